"""What the fuzz tests share: ``ep-testbed fuzz`` on the CPU EP's MaxPool cases, in this process,
with a worker fault planted (``harness.run.worker.FAULT_ENV``: ``perturb=GLOB`` changes one output
element of the cases the glob names, so a failure is there to be found and shrunk)."""

import os

from ep_testbed.harness.cli import main
from ep_testbed.harness.run.worker import FAULT_ENV


def fuzz_cpu(out, *extra: str, fault: str = "", budget: str = "8") -> int:
    """The exit code of ``ep-testbed fuzz --ep cpu --ops max_pooling2 --budget BUDGET --out OUT
    --jobs 2 EXTRA...`` with ``fault`` planted for its workers (removed afterwards)."""
    os.environ[FAULT_ENV] = fault
    try:
        return main(["fuzz", "--ep", "cpu", "--ops", "max_pooling2", "--budget", budget, "--out", str(out),
                     "--no-progress", "--jobs", "2", *extra])
    finally:
        del os.environ[FAULT_ENV]
