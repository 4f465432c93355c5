"""``python -m ep_testbed.harness.cli ...``: the same as the ``ep-testbed`` console script."""

import sys

from ep_testbed.harness.core import walltime
from ep_testbed.harness.launch import start_host_early

walltime.mark_launch()  # this process is the command: its wall time starts with the process
start_host_early(sys.argv[1:])  # --ep dml-wine: its host starts while the rest imports

from . import main  # noqa: E402  (after the stamp)

sys.exit(main())
