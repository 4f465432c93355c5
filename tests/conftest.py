"""Suite-wide set-up: the Hypothesis profiles every property test runs under, and the order of the work.

- ``default`` (what the README's test command runs): no deadline (a loaded 2-core machine makes
  per-example timings meaningless), the failing example's reproduction blob printed, and each
  test's own example count (``hypothesis_profiles.examples(n)``: ``n``).
- ``long`` (``HYPOTHESIS_PROFILE=long``, or pytest's ``--hypothesis-profile=long``): a scheduled
  soak. Every count ``examples(n)`` gives is ten times larger, and the attack suite
  (``tests/hostile``), derandomized by default so that CI runs the same inputs every time, draws
  from fresh seeds. ``hostile-long`` is the older name of the same profile.

It lets Python keep bytecode caches even where ``PYTHONDONTWRITEBYTECODE`` is set (as on the
machines this suite was first run on): the suite starts some 500 Python processes (test
processes, run workers, command lines, nested pytest runs), and without caches each compiles the
project, and pytest rewrites Hypothesis' 74 modules, again. Measured on a 2-core machine: a
worker's start 0.43 -> 0.36 s of CPU, ``import ep_testbed.harness.cli`` 0.55 -> 0.38 s, a nested
pytest collection 1.44 -> 0.92 s. The caches go where Python and pytest always put them
(``__pycache__``, ignored by git).

It gives Ctrl-C back its usual meaning when the suite itself was started with SIGINT ignored
(a shell's background job, ``cmd &`` without job control, is started that way, and every
process it starts inherits it, as POSIX says): the tests that press Ctrl-C on a run would
otherwise see the run ignore it and finish, which is right for the run and wrong for the test.

It also orders the work: the longest test modules first (tests/durations.json, measured; see
tools/test_durations.py), so that under ``--dist loadscope`` the long modules overlap on the
test processes instead of one of them ending the run alone.
"""

from __future__ import annotations

import json
import os
import signal
import sys
from pathlib import Path

from hypothesis import settings
from hypothesis_profiles import LONG_FACTOR, PROFILE_ENV

# Before any test process or subprocess starts: they inherit the environment (module docstring).
os.environ.pop("PYTHONDONTWRITEBYTECODE", None)
sys.dont_write_bytecode = False

settings.register_profile("default", deadline=None, print_blob=True)
settings.register_profile("long", deadline=None, print_blob=True, max_examples=100 * LONG_FACTOR)
settings.register_profile("hostile-long", settings.get_profile("long"))
settings.load_profile(os.environ.get(PROFILE_ENV, "default"))


def _module_seconds() -> dict[str, float]:
    """tests/durations.json: measured seconds per test module (tools/test_durations.py writes it);
    empty where it is missing or unreadable, since it only orders the work."""
    try:
        seconds = json.loads((Path(__file__).parent / "durations.json").read_text())
    except (OSError, ValueError):
        return {}
    return {k: float(v) for k, v in seconds.items() if isinstance(v, (int, float))} if isinstance(seconds, dict) else {}


def pytest_configure(config):
    """Ctrl-C as in a terminal for the runs the tests start (module docstring); queue test modules in collection order (``pytest_collection_modifyitems`` puts the longest
    first) instead of pytest-xdist's default for ``--dist loadscope``, most tests first: that
    one sent the few-test modules that run a whole suite in a venv last, to run alone while
    the other process idled."""
    if signal.getsignal(signal.SIGINT) == signal.SIG_IGN:
        signal.signal(signal.SIGINT, signal.default_int_handler)
    if hasattr(config.option, "loadscopereorder"):
        config.option.loadscopereorder = False


def pytest_collection_modifyitems(session, config, items):
    """Longest module first (tests/durations.json), each module's tests in their own order: with
    ``--dist loadscope`` each process takes the next module when it runs short, so the long ones
    overlap instead of ending the run alone. A module the file does not list yet (a new one) goes
    before all: if it is long it must not start last, and if it is short starting first costs nothing."""
    seconds = _module_seconds()
    first_seen: dict[str, int] = {}
    for item in items:
        first_seen.setdefault(item.nodeid.split("::", 1)[0], len(first_seen))

    def key(item):
        module = item.nodeid.split("::", 1)[0]
        return -seconds.get(module, float("inf")), first_seen[module]

    items.sort(key=key)  # stable: a module's tests keep their order
