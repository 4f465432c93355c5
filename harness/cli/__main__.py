"""``python -m ep_testbed.harness.cli ...``: the same as the ``ep-testbed`` console script."""

import sys

from . import main

sys.exit(main())
