"""``python -m ep_testbed.harness.cli ...``: the same as the ``ep-testbed`` console script."""

import sys

from ..core import walltime
from ..core.exit_codes import quiet_unraisable
from ..core.terminal import reopen_closed_std_fds
from ..launch import start_host_early, start_workers_early

walltime.mark_launch()  # this process is the command: its wall time starts with the process
reopen_closed_std_fds()  # before the early host's pipes could take a closed fd's number
start_host_early(sys.argv[1:])  # --ep dml-wine: its host starts while the rest imports
start_workers_early(sys.argv[1:])  # fuzz: the process that forks its workers too

from . import PROG, main  # noqa: E402  (after the stamp)

quiet_unraisable(PROG)  # also what is collected after main returns, as the process exits
sys.exit(main())
