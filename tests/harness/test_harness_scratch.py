"""Nothing a run makes in the temp folder outlives it: not the profiling scratch folder of a
worker that was killed, nor the folders of a run that was killed outright (the next run removes
those)."""

import os
import subprocess
import sys
import time

from local_cases import HERE, MAPPER
from test_harness_faults import CASES

from ep_testbed.harness.core.results import read_run
from ep_testbed.harness.eps.providers import resolve_ep
from ep_testbed.harness.eps.session import SCRATCH_PREFIX, sweep_stale
from ep_testbed.harness.run.case_run import CaseConfig
from ep_testbed.harness.run.runner import RunOptions, run_cases
from ep_testbed.harness.run.worker import FAULT_ENV


def _run_in(tmp_path, temp, fault):
    env = dict(os.environ, **{FAULT_ENV: fault, "TMPDIR": str(temp)})
    config = CaseConfig(ep=resolve_ep("cpu"), mapper=MAPPER)
    options = RunOptions(out_dir=str(tmp_path / "run"), jobs=2, timeout=3.0, env=env, extra_paths=(HERE,),
                         progress=False)
    run_cases(CASES, config, options)
    return {line["id"]: line["outcome"] for line in read_run(str(tmp_path / "run"))[1]}


def test_killed_workers_leave_no_scratch_folder(tmp_path, monkeypatch):
    temp = tmp_path / "tmp"
    temp.mkdir()
    monkeypatch.setenv("TMPDIR", str(temp))
    import tempfile

    monkeypatch.setattr(tempfile, "tempdir", str(temp))  # this process's pool folder goes there too
    outcomes = _run_in(tmp_path, temp, "segfault=*-1;abort=*-2;hang=*-3;exit=*-4")
    assert [outcomes[c.id] for c in CASES] == ["pass", "crash", "crash", "timeout", "crash", "pass"]
    import gc

    gc.collect()  # the pool (and its folder) is gone with its last reference
    # (ONNX Runtime's own files, such as a ".ses" cache, are not ep-testbed's to remove)
    assert [p.name for p in temp.iterdir() if p.name.startswith("ep-testbed")] == []


def test_the_folders_of_a_killed_process_are_swept_by_the_next(tmp_path):
    dead = subprocess.Popen([sys.executable, "-c", "pass"])
    dead.wait()
    (tmp_path / f"{SCRATCH_PREFIX}{dead.pid}").mkdir()
    (tmp_path / f"{SCRATCH_PREFIX}{dead.pid}" / "session0.json").write_text("[]")
    alive = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(30)"])
    try:
        (tmp_path / f"{SCRATCH_PREFIX}{alive.pid}").mkdir()
        (tmp_path / "someone-elses-folder").mkdir()
        time.sleep(0.1)
        sweep_stale(str(tmp_path))
        assert sorted(p.name for p in tmp_path.iterdir()) == sorted([f"{SCRATCH_PREFIX}{alive.pid}",
                                                                     "someone-elses-folder"])
    finally:
        alive.kill()
        alive.wait()
