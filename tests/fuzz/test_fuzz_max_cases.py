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


def test_the_first_cases_cover_every_operator_announced(tmp_path, capsys):
    """Cases come in rounds, one batch per operator with their cases interleaved, so the first 200
    cover all four operators (in batches of 100 per operator in turn, two of them got none)."""
    from ep_testbed.harness.cli import main
    from ep_testbed.reference.registry import names

    ops = list(names())
    code = main(["fuzz", "--ep", "cpu", "--budget", "120", "--max-cases", "200", "--shrink", "none", "--jobs", "2",
                 "--no-progress", "--out", str(tmp_path / "f")])
    assert code in (0, 1)
    out = capsys.readouterr().out
    _, drawn, end = _drawn(tmp_path / "f")
    by_op = {op: sum(1 for i in drawn if i.startswith(op + "/")) for op in ops}
    assert by_op == {op: 200 // len(ops) for op in ops}
    assert end["fuzz"]["cases_by_op"] == by_op
    assert "cases per operator: " + ", ".join(f"{op} {n}" for op, n in by_op.items()) in out


def test_every_case_of_a_round_replays_from_its_id():
    from ep_testbed.harness.fuzz import draw

    ops = ["roi_pooling", "max_pooling2"]
    cases = draw.draw_round(ops, 5, 2)
    assert [c.id.split("/")[0] for c in cases[:4]] == ops * 2
    assert sorted(c.id for c in cases) == sorted(c.id for op in ops for c in draw.draw_batch(op, 5, 2))
    for case in cases[::23]:
        again = draw.replay(case.id)
        assert (again.desc, again.recipe, again.value_seed, again.opset) == (case.desc, case.recipe, case.value_seed,
                                                                            case.opset)
    with pytest.raises(ValueError, match="largest index is 099"):
        draw.replay("roi_pooling/fuzz-s5-b2-100")


def test_interleave_takes_one_of_each_in_turn():
    from ep_testbed.harness.fuzz.draw import interleave

    assert interleave([["a0", "a1", "a2"], ["b0"], [], ["c0", "c1"]]) == ["a0", "b0", "c0", "a1", "c1", "a2"]
    assert interleave([]) == []
