"""``fuzz --max-cases N``: the first N cases the seed draws, whatever the machine's speed."""

from __future__ import annotations

import pytest

pytest.importorskip("hypothesis")

from fuzz_kit import fuzz_cpu  # noqa: E402

from ep_testbed.harness.core.results import load_records  # noqa: E402


def _drawn(out):
    records = load_records(str(out / "results.jsonl"))
    return records.header, [i for i in records.cases if not i.endswith("-min")], records.end


@pytest.mark.parametrize("batch", ["1", "8"])
def test_exactly_the_first_n_cases_the_seed_draws(tmp_path, batch):
    assert fuzz_cpu(tmp_path / "few", "--shrink", "none", "--batch", batch, budget="60", max_cases="30") in (0, 1)
    assert fuzz_cpu(tmp_path / "more", "--shrink", "none", "--batch", batch, budget="60", max_cases="45") in (0, 1)
    header, few, end = _drawn(tmp_path / "few")
    _, more, _ = _drawn(tmp_path / "more")
    assert len(few) == 30 and len(more) == 45
    # ids number the cases in the order drawn (fuzz-s0-b0-000, -001, ...): the same first thirty
    assert sorted(few) == sorted(more)[:30]
    assert header["fuzz"]["max_cases"] == 30 and end["interrupted"] is False


def test_the_option_takes_a_whole_number_from_one(tmp_path, capsys):
    from ep_testbed.harness.cli import main

    for bad in ("0", "-3", "x"):
        with pytest.raises(SystemExit) as stop:
            main(["fuzz", "--ep", "cpu", "--max-cases", bad, "--out", str(tmp_path / "f")])
        assert stop.value.code == 2
        assert "--max-cases" in capsys.readouterr().err
