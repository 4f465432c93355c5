"""Tiers: smoke picks catalog cases, default is the catalog unchanged, stress states each case's
memory need and time, a run skips, with the reason, what does not fit the machine and says where
each case's time went, and stress-cpu is the part of the stress tier that a CPU machine's CI job runs."""

import pytest

from ep_testbed.graphs.cases.common import (
    CASE_SECONDS,
    CPU_TIER_MB,
    CPU_TIER_SECONDS,
    SECONDS_PER_JUDGED_OUTPUT,
    SECONDS_PER_REFERENCE_VALUE,
    memory_need,
    time_need,
)
from ep_testbed.graphs.catalog import TIERS, build_catalog
from ep_testbed.harness.cli import main
from ep_testbed.harness.cli import run as run_cli
from ep_testbed.harness.core.results import read_run
from ep_testbed.reference import validate
from ep_testbed.reference.checks import element_cap
from ep_testbed.reference.registry import names


def test_the_default_tier_is_the_catalog_and_smoke_is_a_few_of_its_cases_per_operator():
    default = build_catalog()
    assert [c.id for c in build_catalog(tier="default")] == [c.id for c in default]
    smoke = build_catalog(tier="smoke")
    assert {c.id for c in smoke} < {c.id for c in default}
    per_op = {op: sum(c.id.startswith(op + "/") for c in smoke) for op in names()}
    assert all(3 <= n <= 10 for n in per_op.values()), per_op


def test_stress_cases_are_valid_large_and_state_their_memory_need_and_time():
    stress = build_catalog(tier="stress")
    assert TIERS == ("smoke", "default", "stress", "stress-cpu") and len({c.id for c in stress}) == len(stress)
    for case in stress:
        with element_cap(2**33):  # run --tier stress raises the cap so (harness.cli.run.STRESS_ELEMENTS)
            validate(case.desc)
        assert case.id.split("/")[1].startswith("stress-") and case.tags["family"] == "stress"
        assert int(case.tags["memory_mb"]) * 2**20 >= memory_need(case.desc, 2, 48)
        assert float(case.tags["seconds"]) >= time_need(case.desc, 0) - 0.05  # at least judging its outputs
    ids = {c.id for c in stress}
    for wanted in ("roi_align1/stress-detection-1x256x200x304-r1000-7x7-sr2-scale1_16",
                   "roi_pooling/stress-detection-1x512x38x50-r300-7x7-scale1_16",
                   "max_pooling2/stress-classifier-1x64x112x112-3x3-s2-p1-fp16",
                   "max_pooling2/stress-5d-1x16x32x56x56-3x3x3-s1x2x2-p1-d2",
                   "roi_align1/stress-rois-10000-1x64x50x50-7x7"):
        assert wanted in ids
    counts = sorted(c.desc.output_tensor.element_count for c in stress if "groups-of-64" in c.id)
    assert {64 * 65534, 64 * 65535, 64 * 65536} <= set(counts)
    huge = [c for c in stress if "idxuint32" in c.id and c.desc.input_tensor.element_count > 2**31]
    assert huge and max(c.desc.input_tensor.element_count for c in huge) == 2**32 - 1


def test_a_stress_case_states_the_time_its_reference_and_its_judging_take():
    """The detection RoiAlign: 1000 regions x 256 channels x 7x7 outputs x 2x2 samples interpolated,
    1000 x 256 x 49 outputs judged; the 2**32 - 1 element MaxPool: each of 2**26 windows of 64 INT8
    elements read (a quarter of a 4-byte value each), values and indices judged."""
    stress = {c.id: c for c in build_catalog(tier="stress")}
    detection = stress["roi_align1/stress-detection-1x256x200x304-r1000-7x7-sr2-scale1_16"]
    outputs = 1000 * 256 * 49
    expected = CASE_SECONDS + SECONDS_PER_REFERENCE_VALUE * outputs * 4 + SECONDS_PER_JUDGED_OUTPUT * outputs
    assert detection.tags["seconds"] == f"{expected:.1f}"
    huge = stress["max_pooling2/stress-int8-idxuint32-2^32-1-elements"]
    windows = huge.desc.output_tensor.element_count
    expected = CASE_SECONDS + SECONDS_PER_REFERENCE_VALUE * (windows * 64 // 4) + SECONDS_PER_JUDGED_OUTPUT * 2 * windows
    assert huge.tags["seconds"] == f"{expected:.1f}"


def test_the_cpu_tier_is_the_stress_cases_whose_stated_cost_fits_a_ci_job():
    """Every stress case of at most ``CPU_TIER_SECONDS`` and ``CPU_TIER_MB``, in the stress tier's
    order, from every operator; all of them together within a CI job's share for one test module."""
    stress, cpu = build_catalog(tier="stress"), build_catalog(tier="stress-cpu")
    fits = [c.id for c in stress if float(c.tags["seconds"]) <= CPU_TIER_SECONDS and int(c.tags["memory_mb"]) <= CPU_TIER_MB]
    assert [c.id for c in cpu] == fits
    assert {c.id.split("/")[0] for c in cpu} == set(names())
    assert sum(float(c.tags["seconds"]) for c in cpu) <= 10
    assert max(int(c.tags["memory_mb"]) for c in cpu) <= CPU_TIER_MB


@pytest.mark.slow
def test_the_cpu_stress_tier_runs_on_the_cpu_ep_and_says_where_each_case_time_went(tmp_path, capsys):
    out = tmp_path / "s"
    code = main(["run", "--ep", "cpu", "--tier", "stress-cpu", "--jobs", "2", "--out", str(out), "--no-progress"])
    printed = capsys.readouterr().out
    header, lines, _ = read_run(str(out))
    cpu = build_catalog(tier="stress-cpu")
    assert code == 0 and header["selection"]["tier"] == "stress-cpu" and not header["skipped"]
    assert sorted(l["id"] for l in lines) == sorted(c.id for c in cpu)
    assert {l["outcome"] for l in lines} == {"pass"}, [(l["id"], l["message"]) for l in lines if l["outcome"] != "pass"]
    for line in lines:
        timings = line["timings"]
        assert 0 < timings["reference_s"] <= timings["prepare_s"], line["id"]
    table = printed[printed.index("where each case's time went"):].splitlines()
    assert table[1].split()[-7:] == ["prepare", "reference", "EP", "build", "EP", "run", "judge"]
    for case in cpu:
        row = next(r for r in table if r.startswith(case.id + " "))
        assert row.split()[1:4] == ["pass", case.tags["seconds"], case.tags["memory_mb"]]


def test_stress_inputs_hold_regions_on_the_exact_grid():
    import numpy as np

    case = next(c for c in build_catalog(["roi_align1"], tier="stress") if c.id.endswith("scale1-half-image"))
    rois = case.inputs()["ROITensor"].astype(np.float64)
    sides = rois[:, 2] - rois[:, 0]
    assert np.all(rois * 16 == np.round(rois * 16)) and np.all(np.isclose(sides / (14 / 16), np.round(sides / (14 / 16))))


def test_a_case_that_does_not_fit_is_skipped_with_its_need_and_a_hint(monkeypatch, capsys):
    monkeypatch.setattr(run_cli, "available_memory", lambda: 10 * 2**30)
    cases = build_catalog(["max_pooling2"], tier="stress")
    kept, skipped = run_cli._fitting(cases, jobs=2)
    assert {s["id"] for s in skipped} == {c.id for c in cases if int(c.tags["memory_mb"]) > 4096}
    assert skipped and all("MiB" in s["reason"] and "--jobs 1" in s["reason"] for s in skipped)
    assert len(kept) + len(skipped) == len(cases)
    assert "skipped max_pooling2/stress-int8-idxuint32-2^32-1-elements" in capsys.readouterr().err


def test_a_run_records_what_it_skipped_in_its_header(monkeypatch, tmp_path):
    monkeypatch.setattr(run_cli, "available_memory", lambda: 2**30)
    code = main(["run", "--ep", "cpu", "--tier", "stress", "--ops", "max_pooling2", "-k", "classifier,2^32",
                 "--out", str(tmp_path / "r"), "--no-progress", "--jobs", "1"])
    header, lines, _ = read_run(str(tmp_path / "r"))
    assert code == 0 and {l["outcome"] for l in lines} == {"pass"} and len(lines) == 3
    assert [s["id"] for s in header["skipped"]] == ["max_pooling2/stress-int8-idxuint32-2^32-1-elements"]
    assert header["selection"]["tier"] == "stress"


def test_the_smoke_tier_runs_on_the_cpu_ep(tmp_path):
    assert main(["run", "--ep", "cpu", "--tier", "smoke", "--out", str(tmp_path / "s"), "--no-progress"]) == 0
    _, lines, _ = read_run(str(tmp_path / "s"))
    assert {l["id"] for l in lines} == {c.id for c in build_catalog(tier="smoke")}


def no_tier_catalog(ops=None, seed=0):
    """A case source with build_catalog's old signature (no ``tier``)."""
    return build_catalog(ops, seed)[:2]


def test_a_catalog_without_tiers_is_refused_for_another_tier_and_runs_by_default(tmp_path, capsys):
    from ep_testbed.harness.cli import parse_args

    catalog = f"{__name__}:no_tier_catalog"
    parsed = parse_args(["run", "--ep", "cpu", "--tier", "smoke", "--out", str(tmp_path / "t"), "--list"])
    assert run_cli.run_command(parsed, catalog=catalog) == 2
    assert "has no tiers" in capsys.readouterr().err
    parsed = parse_args(["run", "--ep", "cpu", "--out", str(tmp_path / "t"), "--list"])
    assert run_cli.run_command(parsed, catalog=catalog) == 0
    assert len(capsys.readouterr().out.split()) == 2
