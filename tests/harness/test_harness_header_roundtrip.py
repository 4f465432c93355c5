"""Anything ``run`` accepts and records, its own readers accept back.

A run records its options in the header of ``results.jsonl``; ``--resume``, ``report``, ``diff``,
``merge`` and the repro bundles read that header through ``untrusted_files`` (integers of at most
40 digits, finite floats) and ``Tolerances.from_json`` (``tolerances.check_value``'s table). If
the parser took a value the readers refuse, the run would write a folder nobody can read
(``--tol fp32:ulp=<100 digits>`` once did, exit 0). So: draw option values, and whenever the
parser accepts them, write the header the run would write and read it back with every reader,
and the header's rerun words must parse to the same tolerances.
"""

from __future__ import annotations

import math
import tempfile

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from ep_testbed.harness.cli import main, parse_args
from ep_testbed.harness.cli import run as run_cli
from ep_testbed.harness.cli.options import OptionError, run_config
from ep_testbed.harness.core import tolerances as tolerances_mod
from ep_testbed.harness.core.exit_codes import USAGE
from ep_testbed.harness.core.rerun import outcome_argv
from ep_testbed.harness.core.results import ResultsWriter, load_records, results_path
from ep_testbed.harness.core.tolerances import Tolerances
from ep_testbed.harness.core.untrusted_files import Limits
from ep_testbed.harness.run.case_run import DEFAULT_MAPPER
from ep_testbed.harness.run.runner import run_header
from ep_testbed.reports import load_run

#: Number-like text: mostly values in or near the allowed ranges (so that most draws are accepted
#: and written), some far outside, some not numbers at all.
PLAUSIBLE = st.one_of(st.integers(0, 2**64 + 2).map(str), st.floats(min_value=0, max_value=1e308).map(repr),
                      st.integers(0, 10**6).map(str),
                      st.sampled_from([str(2**64), str(2**64 + 1), "9" * 40, "9" * 41, "9" * 100]))  # the edges
HOSTILE = st.one_of(
    st.integers(-3, 10**120).map(str), st.floats(allow_nan=True, allow_infinity=True).map(repr),
    st.sampled_from(["none", "None", "1e309", "-0", "0x10", "1_000", " 4", "", "2**64", str(2**64), str(2**64 + 1)]),
    st.text(max_size=6))
NUMBER_TEXT = st.one_of(PLAUSIBLE, PLAUSIBLE, PLAUSIBLE, HOSTILE)
TOL_ITEM = st.tuples(st.sampled_from(["atol", "rtol", "ulp", "ulp"]), NUMBER_TEXT).map(lambda kv: f"{kv[0]}={kv[1]}")
TOL = st.tuples(st.sampled_from(["fp16", "fp32", "FLOAT64", "int8", "uint64", "bf16"]),
                st.lists(TOL_ITEM, min_size=1, max_size=3, unique_by=lambda item: item.partition("=")[0])
                ).map(lambda t: f"{t[0]}:{','.join(t[1])}")
OPTIONS = st.fixed_dictionaries({}, optional={
    "--seed": st.one_of(st.integers(0, 2**64).map(str), NUMBER_TEXT),
    "--timeout": st.one_of(st.floats(min_value=1e-3, max_value=7 * 24 * 3600.0).map(repr), NUMBER_TEXT),
    "--jobs": st.integers(-1, 2**32).map(str),
    "--keep-worst": st.integers(-1, 2**32).map(str),
    "--tol": st.lists(TOL, max_size=3),
})


def _parsed(options: dict) -> tuple | None:
    """(args, settings) when ``run`` accepts ``options``, else None (a refusal is exit 2 with a message)."""
    argv = ["run", "--ep", "cpu", "--ops", "roi_pooling"]
    for flag, value in options.items():
        for item in value if isinstance(value, list) else [value]:
            argv += [f"{flag}={item}"]
    try:
        args = parse_args(argv)
        return args, run_config(args)
    except SystemExit as exc:
        assert exc.code == USAGE
    except OptionError:
        pass
    return None


def _header(args, settings) -> dict:
    """The header ``run`` writes for these options (``cli.run``'s own steps)."""
    options = run_cli._run_options(args, settings, settings.jobs, run_cli.DEFAULT_CATALOG, ())
    options.header_extra.update(rerun_args=outcome_argv(args.outcome_actions, args, settings.tolerances))
    return run_header(settings.case_config(DEFAULT_MAPPER, settings.jobs), options, 1)


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(OPTIONS)
def test_a_header_run_writes_is_read_back_by_its_own_readers(options):
    parsed = _parsed(options)
    if parsed is None:
        return
    args, config = parsed
    header = _header(args, config)
    with tempfile.TemporaryDirectory() as out:
        with ResultsWriter(out) as writer:
            writer.write(header)
        records = load_records(results_path(out))
        assert records.bad_lines == [] and records.header is not None, [b.reason for b in records.bad_lines]
        assert load_run(out).header["seed"] == config.seed
        assert Tolerances.from_json(records.header["tolerances"]) == config.tolerances
    rerun = parse_args(["run", *header["rerun_args"]])  # the report's rerun line
    assert run_config(rerun).tolerances == config.tolerances


def test_the_tolerance_table_fits_the_json_readers_integer_cap():
    assert len(str(tolerances_mod.MAX_ULP)) <= Limits().int_digits


@pytest.mark.parametrize("tol, says", [
    ("fp32:ulp=" + "9" * 100, "too long; it must be a whole number from 0 to 2**64"),
    ("fp32:ulp=" + str(2**64 + 1), "from 0 to 2**64"),
    ("fp32:atol=1,atol=2", "atol is given twice"),
    ("fp16:ulp=4,rtol=0,ulp=5", "ulp is given twice"),
])
def test_a_tolerance_the_readers_would_refuse_is_refused_when_parsed(capsys, tmp_path, tol, says):
    code = main(["run", "--ep", "cpu", "--tol", tol, "--out", str(tmp_path / "r")])
    err = capsys.readouterr().err
    assert code == USAGE and says in err and len(err.strip().splitlines()) == 1
    assert not (tmp_path / "r").exists()  # refused at parse time: nothing written


def test_the_largest_ulp_accepted_is_read_back():
    tolerances = Tolerances.defaults().override(f"fp32:ulp={2**64}")
    assert Tolerances.from_json(tolerances.to_json()) == tolerances
    assert math.isfinite(tolerances.for_dtype("FLOAT32").atol)
