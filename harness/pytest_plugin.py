"""The case catalog as a pytest suite: ``pytest tests/conformance --ep openvino``.

One test per catalog case, named by its readable case id
(``test_case[roi_align1/grid-avg-linear-fp16-...]``), marked with its operator's registry name
(``reference.registry.names()``, e.g. ``roi_align1``) and its dtype (``float32``, ``float16``,
``int8``, ...), so ``-m "roi_align1 and float16"`` and ``-k`` select as usual.
Each case runs in a worker process kept for the whole pytest process (a crash or a hang
fails that test only; ``-n 2`` with pytest-xdist gives each xdist worker its own). With
``--batch K`` (default: the EP's, ``harness.eps.packing.default_batch``), the first test of a
case that has no result yet runs it together with the next K-1 collected conformance cases of
this process (in collection order) in shared sessions, as ``ep-testbed run --batch`` does; their
tests then read their results. Under pytest-xdist a worker is handed consecutive runs of tests,
so a batch can reach a few tests of another worker at the end of a run: those run twice, in
both processes, and each test reads its own process's result.

Every result line is settled by the EP's expectations exactly as ``ep-testbed run`` settles it
(``Expectations.settle``), and each of ``run``'s outcomes maps to one pytest outcome, so the two
count the same catalog the same way (``OUTCOME_TO_PYTEST``):

========================================  ===========================================
``ep-testbed run``                        pytest
========================================  ===========================================
``pass``, ``tie-only``                    passed
``fail``, ``crash``, ``timeout``,         failed, with the harness's message
``error``, ``fixed``
``known``                                 xfailed
``not-on-ep``, ``inexpressible``,         skipped, with the reason (never a pass)
``emulation-gap``
========================================  ===========================================

``known`` needs evidence from the case's own outputs (every failing element reproduced by a
reading an expectation names), so no expectation is decided at collection: each test settles
its line after the case ran.

Options (added by this plugin; ``tests/conformance/conftest.py`` loads it):
``--ep``, ``--ep-option KEY=VALUE``, ``--graph-opt``, ``--tol DTYPE:atol=X,rtol=Y,ulp=N``
(repeatable), ``--tolerances FILE``, ``--precision-model MODEL`` / ``--strict-tolerance``,
``--expectations FILE`` / ``--no-expectations``, ``--batch K`` (the same
flags, parsed by the same functions, as ``ep-testbed run``: ``harness.cli.options``), and
``--case-timeout SECONDS``, ``--catalog-seed N``, ``--ops a,b``. An unusable value of the shared
options (an EP that is not installed, a malformed ``--tol``) stops pytest with one usage error.
"""

from __future__ import annotations

import argparse
import itertools
from typing import Any

import pytest

from ..reference.dtypes import NUMPY_DTYPES
from ..reference.registry import spec_for, specs
from .cli.options import (
    CASE_TIMEOUT,
    OptionError,
    add_batch_option,
    add_ep_options,
    add_expectation_options,
    add_ops,
    add_seed,
    add_timeout,
    add_tolerance_options,
    declare_groups,
    run_config,
)
from .core.results import EXPECTED_FAILURE, FAILING, NOT_TESTED, PASSING, CaseLine
from .run.case_steps import ArtifactPolicy
from .run.pool import WorkerPool

DTYPE_MARKERS = tuple(sorted(str(dtype) for dtype in NUMPY_DTYPES.values()))


class CaseFailed(AssertionError):
    """The EP's output is out of tolerance, or the EP raised (outcome ``fail``)."""


class CaseCrashed(AssertionError):
    """The worker died while running the case (outcome ``crash``)."""


class CaseTimedOut(AssertionError):
    """The case exceeded ``--case-timeout`` (outcome ``timeout``)."""


class CaseError(AssertionError):
    """The mapper, the reference or the harness raised (outcome ``error``)."""


#: Seconds a conformance case may run before its worker is killed (``--case-timeout``'s default).
DEFAULT_CASE_TIMEOUT = 120.0

EXCEPTIONS = {"fail": CaseFailed, "crash": CaseCrashed, "timeout": CaseTimedOut, "error": CaseError,
              "tie-only": CaseFailed}

#: What each outcome of ``ep-testbed run`` becomes in pytest (module docstring): the report's
#: passed / failed / xfailed / skipped counts are ``run``'s outcome counts grouped this way.
OUTCOME_TO_PYTEST = {**{o: "passed" for o in PASSING}, **{o: "failed" for o in FAILING},
                     **{o: "xfailed" for o in EXPECTED_FAILURE}, **{o: "skipped" for o in NOT_TESTED}}


#: The option groups this plugin shares with ``ep-testbed run`` (``harness.cli.options``), added
#: by ``_add_shared``.
GROUPS = ("ep", "graph-opt", "tolerances", "expectations", "batch", "timeout", "seed", "ops")
#: The plugin's own spellings of two shared options (pytest has a ``--timeout`` and a ``--seed``
#: of other plugins): its destination -> ``run_config``'s.
RENAMED = {"case_timeout": "timeout", "catalog_seed": "seed"}


def _add_shared(add: Any) -> None:
    """Register the shared groups (``GROUPS``) with ``add`` (pytest's ``addoption`` or argparse's
    ``add_argument``: they take the same keywords)."""
    add_ep_options(add)
    add_tolerance_options(add)
    add_expectation_options(add)
    add_batch_option(add)
    add_timeout(add, DEFAULT_CASE_TIMEOUT, CASE_TIMEOUT, flag="--case-timeout")
    add_seed(add, "catalog seed", flag="--catalog-seed")
    add_ops(add)


def _namespace(config: pytest.Config) -> argparse.Namespace:
    """This plugin's options as ``run_config`` reads them, its ``GROUPS`` declared: the shared
    ones under ``run_config``'s names (``RENAMED``); an option never added (the plugin loaded too
    late) has the default its own definition gives it."""
    parser = argparse.ArgumentParser(add_help=False)
    _add_shared(parser.add_argument)
    values = {RENAMED.get(dest, dest): _option(config, dest, default)
              for dest, default in vars(parser.parse_args([])).items()}
    namespace = argparse.Namespace(**values)
    declare_groups(namespace, *GROUPS)
    return namespace


def _option(config: pytest.Config, name: str, default: Any) -> Any:
    """An option of this plugin, or its default when the plugin's options were never added
    (a bare ``pytest`` from the repository root loads tests/conformance/conftest.py too late
    for command-line options; ``pytest tests/conformance --ep ...`` or ``-p ep_testbed.harness.pytest_plugin``
    loads it in time)."""
    try:
        return config.getoption(name)
    except ValueError:
        return default


def pytest_addoption(parser: pytest.Parser) -> None:
    """Add this plugin's options once, however many ways the plugin was loaded."""
    try:
        _add_options(parser)
    except ValueError:  # already added: the plugin is loaded both with -p and by the conftest
        pass


def _add_options(parser: pytest.Parser) -> None:
    """The shared EP, tolerance and expectations groups (``harness.cli.options``), then this plugin's own."""
    group = parser.getgroup("ep-testbed", "ep-testbed conformance (the case catalog on an execution provider)")
    _add_shared(group.addoption)


def pytest_configure(config: pytest.Config) -> None:
    """Register the op and dtype markers; read the shared options now, so a bad value is one usage
    error before collection rather than a collection error per test module."""
    for spec in specs():
        config.addinivalue_line("markers", f"{spec.name}: a conformance case of {spec.dml_type}")
    for dtype in DTYPE_MARKERS:
        config.addinivalue_line("markers", f"{dtype}: a conformance case whose data type is {dtype}")
    try:
        conformance_state(config)
    except OptionError as exc:
        raise pytest.UsageError(str(exc)) from None


class Conformance:
    """Per-pytest-process state: the run's configuration, a one-worker pool, and the results of
    cases run ahead of their tests (``--batch``)."""

    def __init__(self, config: pytest.Config):
        """Read the options (``OptionError`` for an unusable one); no worker starts until ``run``."""
        self.settings = run_config(_namespace(config))
        self.ep = self.settings.ep
        self.expectations = self.settings.expectations
        self.case_config = self.settings.case_config()
        self.timeout = self.settings.timeout or DEFAULT_CASE_TIMEOUT  # None only where no option was registered
        self.batch = self.settings.batch
        self._pool: Any = None
        self._order: list[Any] = []            # the collected conformance cases, in collection order
        self._position: dict[str, int] = {}
        self._ran: set[str] = set()             # ids run in this process (their tests may still be ahead)
        self._lines: dict[str, CaseLine] = {}  # results of cases run ahead of their tests

    def plan(self, cases: list[Any]) -> None:
        """The conformance cases this process collected, in the order their tests run."""
        self._order = list(cases)
        self._position = {case.id: i for i, case in enumerate(self._order)}

    def run(self, case: Any) -> CaseLine:
        """The result line of ``case``: run ahead with an earlier test's batch, or now, in the
        (lazily started) worker process, with the next cases of ``plan`` not run yet."""
        if case.id in self._lines:
            return self._lines.pop(case.id)
        if self._pool is None:
            self._pool = WorkerPool(self.case_config, jobs=1, timeout=self.timeout, batch=self.batch)
        batch = [case] + self._ahead(case)
        self._ran.update(c.id for c in batch)
        def policy(case: Any) -> ArtifactPolicy:  # the readings an expectation may need are tried in the worker
            return ArtifactPolicy(expected=self.expectations.candidates(case))

        lines = {line["id"]: line for line in self._pool.run(batch, policy, keep_workers=True)}
        mine = lines.pop(case.id)
        self._lines.update(lines)
        return mine

    def _ahead(self, case: Any) -> list[Any]:
        """Up to ``batch - 1`` collected cases after ``case`` whose tests have not run them yet."""
        start = self._position.get(case.id)
        if start is None or self.batch == 1:
            return []
        later = (c for c in self._order[start + 1:] if c.id not in self._ran and c.id != case.id)
        return list(itertools.islice(later, self.batch - 1))

    def close(self) -> None:
        """Stop the worker process, if any."""
        if self._pool is not None:
            self._pool.close()


_STATE: dict[int, Conformance] = {}


def conformance_state(config: pytest.Config) -> Conformance:
    """The ``Conformance`` of this pytest process, built on first use; ``OptionError`` on bad options."""
    key = id(config)
    if key not in _STATE:
        _STATE[key] = Conformance(config)
    return _STATE[key]


def pytest_unconfigure(config: pytest.Config) -> None:
    """Stop the worker process of this pytest process, if one was started."""
    state = _STATE.pop(id(config), None)
    if state is not None:
        state.close()


def pytest_collection_finish(session: pytest.Session) -> None:
    """Hand the collected conformance cases, in the order their tests run, to this process's
    state (``--batch`` runs cases ahead of their tests in this order)."""
    params = [getattr(getattr(item, "callspec", None), "params", {}) for item in session.items]
    cases = [p["conformance_case"] for p in params if "conformance_case" in p]
    if cases:
        conformance_state(session.config).plan(cases)


def catalog_params(config: pytest.Config) -> list[Any]:
    """``pytest.param`` per catalog case, with its id and markers."""
    # The catalog (graphs, onnx) loads only when conformance tests are collected, not with the plugin.
    from ..graphs.catalog import build_catalog

    state = conformance_state(config)
    params = []
    for case in build_catalog(state.settings.ops, seed=state.settings.seed):
        marks = [pytest.mark.conformance, getattr(pytest.mark, spec_for(case.desc).name)]
        dtype = str(case.tags.get("dtype", ""))
        if dtype in DTYPE_MARKERS:
            marks.append(getattr(pytest.mark, dtype))
        params.append(pytest.param(case, id=case.id, marks=marks))
    return params


def check_case(config: pytest.Config, case: Any) -> None:
    """Run ``case`` on the EP, settle its line as ``ep-testbed run`` does and turn its outcome
    into pytest's (``OUTCOME_TO_PYTEST``)."""
    state = conformance_state(config)
    line = state.run(case)
    # as ep-testbed run decides: known, a refusal, emulation-gap, fixed (settle types a line as any dict)
    state.expectations.settle(case, line)
    outcome, message = line["outcome"], (line.get("message") or "").strip()
    settled = line.get("expected_outcome") or {}
    if outcome in NOT_TESTED:
        pytest.skip(f"{outcome}: {message}")
    if outcome in EXPECTED_FAILURE:
        pytest.xfail(f"known: {settled.get('reason')} ({settled.get('link')}); {message}")
    if outcome == "fixed":
        pytest.fail(f"fixed: expected {settled.get('outcome')} ({settled.get('reason')}, {settled.get('link')}) but "
                    f"it passed: {message}", pytrace=False)
    if outcome == "pass":
        return
    if outcome == "tie-only" and line.get("mismatches", 0) == 0:
        return
    raise EXCEPTIONS.get(outcome, CaseFailed)(f"{outcome} on {line['ep']}: {message}")
