"""The order of the work (tests/conftest.py): the longest modules first, from tests/durations.json."""

from __future__ import annotations

import importlib.util
import json
import sys
from pathlib import Path
from types import SimpleNamespace

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "tools"))

import test_durations  # noqa: E402


def _conftest():
    """tests/conftest.py loaded under its own name (every test folder has a ``conftest``)."""
    spec = importlib.util.spec_from_file_location("suite_conftest", ROOT / "tests" / "conftest.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_every_module_in_durations_json_exists():
    """A renamed or removed module left in the file would order nothing: refresh the file
    (python tools/test_durations.py JUNIT_XML) when this fails."""
    listed = json.loads((ROOT / "tests" / "durations.json").read_text())
    missing = [m for m in listed if not (ROOT / m).is_file()]
    assert not missing, f"tests/durations.json names modules that do not exist: {missing}"
    assert all(isinstance(s, (int, float)) and s >= 0 for s in listed.values())


def test_longest_module_first_and_each_modules_tests_keep_their_order():
    conftest = _conftest()
    listed = json.loads((ROOT / "tests" / "durations.json").read_text())
    long_module, short_module = max(listed, key=listed.get), min(listed, key=listed.get)
    names = [f"{short_module}::a", "tests/not_listed.py::x", f"{long_module}::b[2]", f"{short_module}::c",
             f"{long_module}::a[1]"]
    items = [SimpleNamespace(nodeid=n) for n in names]
    conftest.pytest_collection_modifyitems(None, None, items)
    assert [i.nodeid for i in items] == ["tests/not_listed.py::x", f"{long_module}::b[2]", f"{long_module}::a[1]",
                                         f"{short_module}::a", f"{short_module}::c"]


def test_xdist_queues_modules_in_that_order():
    """pytest-xdist's ``--dist loadscope`` re-sorts modules by test count unless told not to."""
    config = SimpleNamespace(option=SimpleNamespace(loadscopereorder=True))
    _conftest().pytest_configure(config)
    assert config.option.loadscopereorder is False


def test_the_tool_sums_a_junit_file_per_module(tmp_path):
    junit = tmp_path / "j.xml"
    junit.write_text('<testsuites><testsuite><testcase classname="tests.a.test_b" name="x" time="1.5"/>'
                     '<testcase classname="tests.a.test_b.TestK" name="y" time="2"/>'
                     '<testcase classname="tests.test_c" name="z" time="0.25"/>'
                     '<testcase classname="" name="tests.a.test_d" time="0"/></testsuite></testsuites>')
    assert test_durations.module_seconds(junit) == {"tests/a/test_b.py": 3.5, "tests/test_c.py": 0.2}
    broken = tmp_path / "broken.xml"
    broken.write_text("<testsuites")
    assert test_durations.main([str(broken)]) == 2
