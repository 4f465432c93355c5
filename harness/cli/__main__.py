"""``python -m ep_testbed.harness.cli ...``: the same as the ``ep-testbed`` console script."""

import sys

from ep_testbed.harness.core import walltime

walltime.mark_launch()  # this process is the command: its wall time starts with the process

from . import main  # noqa: E402  (after the stamp)

sys.exit(main())
