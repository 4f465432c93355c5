"""What the fuzz tests share: ``ep-testbed fuzz`` on the CPU EP's MaxPool cases, in this process,
with a worker fault planted (``harness.run.worker.FAULT_ENV``: ``perturb=GLOB`` changes one output
element of the cases the glob names, so a failure is there to be found and shrunk)."""

import os

from ep_testbed.harness.cli import main
from ep_testbed.harness.run.worker import FAULT_ENV


def fuzz_cpu(out, *extra: str, fault: str = "", budget: str = "8", max_cases: str | None = "100") -> int:
    """The exit code of ``ep-testbed fuzz --ep cpu --ops max_pooling2 --budget BUDGET --max-cases
    MAX_CASES --out OUT --jobs 2 EXTRA...`` with ``fault`` planted for its workers (removed
    afterwards). The first hundred cases (one drawn batch) hold every planted failure the fuzz
    tests use, and counting cases rather than seconds makes a loaded machine run the same ones;
    ``max_cases=None`` lets the budget alone decide."""
    os.environ[FAULT_ENV] = fault
    cases = ["--max-cases", max_cases] if max_cases else []
    try:
        return main(["fuzz", "--ep", "cpu", "--ops", "max_pooling2", "--budget", budget, "--out", str(out),
                     "--no-progress", "--jobs", "2", *cases, *extra])
    finally:
        del os.environ[FAULT_ENV]


def replay_on_cpu(out, *case_ids: str) -> tuple[int, dict]:
    """``fuzz --ep cpu --replay`` of ``case_ids`` (seeded fuzz case ids) into ``out``, unshrunk:
    the exit code and each case's line by id (exactly those cases)."""
    import json

    replays = [arg for case in case_ids for arg in ("--replay", case)]
    code = main(["fuzz", "--ep", "cpu", *replays, "--shrink", "none", "--out", str(out), "--no-progress", "--jobs", "1"])
    lines = [json.loads(line) for line in (out / "results.jsonl").read_text().splitlines()]
    cases = {line["id"]: line for line in lines if line["type"] == "case"}
    assert sorted(cases) == sorted(case_ids)
    return code, cases
