"""Several cases in one session (harness/eps/packing.py, harness/run/packs.py): every member gets
its own outputs, placement and evidence back, bit for bit what a session of its own gives, and a
packed session that fails is taken apart so that each case ends as it would alone.

The sessions are ONNX Runtime's CPU EP, run for real. Refusals and build failures are an EP's,
not the CPU EP's, so the tests that need them put a stand-in EP behind ``session.run_on_ep`` that
refuses or fails named nodes and runs everything else for real (``_Picky``)."""

from __future__ import annotations

import json
import re

import numpy as np
import onnx
import pytest
from onnx import helper

from ep_testbed.graphs import to_onnx
from ep_testbed.graphs.catalog import build_catalog
from ep_testbed.harness.core.results import dumps
from ep_testbed.harness.eps import packing
from ep_testbed.harness.eps import session as session_mod
from ep_testbed.harness.eps.providers import EpSpec, SessionSettings, resolve_ep
from ep_testbed.harness.run.case_run import ArtifactPolicy, CaseConfig, Memory, load_mapper, run_batch, run_case

CPU = resolve_ep("cpu")
#: The stand-in EP of ``_Picky``: the CPU EP's kernels under another name.
PICKY = EpSpec("PickyExecutionProvider", "picky")
REFUSAL = ("This session contains graph nodes that are assigned to the default CPU EP, but fallback to CPU EP has "
           "been explicitly disabled by the user.")


def _mapped(ids_like: str, count: int | None = None):
    """``count`` (None: all) expressible catalog cases whose id contains ``ids_like``, with their
    mappings and feeds."""
    chosen = []
    for case in build_catalog():
        mapping = to_onnx(case.desc, opset=case.opset)
        if ids_like in case.id and mapping.model is not None and not mapping.input_flags(case.inputs()):
            chosen.append((case, mapping, mapping.feeds(case.inputs())))
        if len(chosen) == count:
            return chosen
    if count is None:
        return chosen
    raise AssertionError(f"fewer than {count} cases like {ids_like!r}")


def test_each_member_of_a_pack_gets_what_its_own_session_gives():
    members = _mapped("max_pooling2/grid-float32", 3) + _mapped("max_pooling2/grid-int8", 2)
    models, feeds = [m.model for _, m, _ in members], [f for _, _, f in members]
    assert len({packing.pack_key(m) for m in models}) == 1
    packed = packing.run_packed(models, feeds, CPU, SessionSettings())
    assert len(packed) == len(members)
    for (case, mapping, own_feeds), run in zip(members, packed):
        alone = session_mod.run_on_ep(mapping.model, own_feeds, CPU, SessionSettings())
        assert run.output_names == alone.output_names == [o.name for o in mapping.model.graph.output]
        for a, b in zip(run.outputs, alone.outputs):
            assert a.dtype == b.dtype and a.shape == b.shape and np.array_equal(a, b, equal_nan=True), case.id
        assert run.placement == alone.placement and set(run.placement) == {n.name for n in mapping.model.graph.node}
        assert run.placement_source == alone.placement_source == "trace-node"
        assert run.evidence == alone.evidence


def test_the_packed_model_keeps_members_apart():
    members = _mapped("roi_align1/grid", 2)
    packed = packing.pack([m.model for _, m, _ in members])
    onnx.checker.check_model(packed.model, full_check=True)
    graph = packed.model.graph
    for index, (_, mapping, _) in enumerate(members):
        tag = packing.prefix(index)
        own = [n for n in graph.node if n.name.startswith(tag)]
        assert [n.name[len(tag):] for n in own] == [n.name for n in mapping.model.graph.node]
        # a member's nodes read only its own values (or nothing, an absent optional input)
        assert all(not name or name.startswith(tag) for n in own for name in (*n.input, *n.output))
    assert packing.prefix(1) != packing.prefix(10)[:len(packing.prefix(1))]  # c1__ does not start c10__


def test_one_model_is_run_as_it_is():
    (case, mapping, feeds), = _mapped("roi_pooling/grid", 1)
    assert packing.pack([mapping.model]).model is mapping.model
    run = packing.run_packed([mapping.model], [feeds], CPU, SessionSettings())[0]
    assert set(run.placement) == {n.name for n in mapping.model.graph.node}


def test_what_cannot_share_a_graph_is_not_packed():
    (_, ten, _), = [m for m in _mapped("roi_align/") if m[1].opset == 10][:1]
    (_, sixteen, _), = [m for m in _mapped("roi_align/") if m[1].opset == 16][:1]
    assert packing.pack_key(ten.model) != packing.pack_key(sixteen.model)
    with pytest.raises(ValueError, match="opset"):
        packing.pack([ten.model, sixteen.model])
    body = helper.make_graph([helper.make_node("Identity", ["x"], ["y"])], "body", [],
                             [helper.make_tensor_value_info("y", onnx.TensorProto.FLOAT, [1])])
    looped = helper.make_model(helper.make_graph(
        [helper.make_node("If", ["c"], ["y"], then_branch=body, else_branch=body)], "g",
        [helper.make_tensor_value_info("c", onnx.TensorProto.BOOL, [])],
        [helper.make_tensor_value_info("y", onnx.TensorProto.FLOAT, [1])]))
    assert packing.pack_key(looped) is None  # a subgraph names outer values: never renamed under it


def test_default_batch_is_one_where_never_measured():
    assert packing.default_batch(resolve_ep("OpenVINOExecutionProvider", available=["OpenVINOExecutionProvider"])) == 1
    assert packing.default_batch(resolve_ep("cpu")) == 1
    for key, value in packing.DEFAULT_BATCH.items():
        assert isinstance(key, str) and value >= 1
    cuda = resolve_ep("CUDAExecutionProvider", available=["CUDAExecutionProvider"])
    assert packing.default_batch(cuda) == packing.DEFAULT_BATCH["CUDAExecutionProvider"] > 1


def test_default_jobs_is_the_measured_one_within_the_cores_else_one_a_core():
    """A GPU EP's workers share one device: its measured default holds however many cores there
    are (never more workers than cores); an EP never measured gets one worker a core."""
    cuda = resolve_ep("CUDAExecutionProvider", available=["CUDAExecutionProvider"])
    openvino = resolve_ep("OpenVINOExecutionProvider", available=["OpenVINOExecutionProvider"])
    measured = packing.DEFAULT_JOBS["CUDAExecutionProvider"]
    assert packing.default_jobs(cuda, 16) == measured < 16
    assert packing.default_jobs(cuda, 1) == 1
    assert packing.default_jobs(openvino, 16) == 16 and packing.default_jobs(openvino, 0) == 1


def test_run_config_takes_the_eps_default_jobs_only_when_jobs_is_not_given():
    import os

    from ep_testbed.harness.cli import parse_args
    from ep_testbed.harness.cli.options import run_config

    assert run_config(parse_args(["run", "--ep", "cpu"])).jobs == packing.default_jobs(
        run_config(parse_args(["run", "--ep", "cpu", "--jobs", "1"])).ep, os.cpu_count() or 1)
    assert run_config(parse_args(["run", "--ep", "cpu", "--jobs", "3"])).jobs == 3


# --- a pack that fails is taken apart ------------------------------------------------------------

class _Picky:
    """A stand-in EP (``PICKY``) behind ``session.run_on_ep``: a session holding an int8 node whose
    op type is in ``refuses`` is refused a CPU fallback (run with fallback allowed, such a node is
    placed on ``CPUExecutionProvider``); one holding a node of an op type in ``breaks`` (of
    ``breaks_dtype`` when given) fails to build; everything else runs on the CPU EP's kernels for
    real, placed on ``PICKY``. ``hides``: in a session of several cases with fallback allowed, the
    float32 nodes of those op types are missing from the placement (a profile that misses nodes).
    Counts the sessions: ``(cases in it, fallback allowed)``."""

    def __init__(self, monkeypatch, refuses=(), breaks=(), breaks_dtype=None, hides=()):
        self.real, self.refuses, self.breaks, self.breaks_dtype = session_mod.run_on_ep, refuses, breaks, breaks_dtype
        self.hides = hides
        self.sessions: list[tuple[int, bool]] = []
        monkeypatch.setattr(session_mod, "run_on_ep", self)

    def _hits(self, model, op_types, dtype=None):
        inputs = {i.name: i.type.tensor_type.elem_type for i in model.graph.input}
        return [n.name for n in model.graph.node if n.op_type in op_types
                and (dtype is None or inputs.get(n.input[0]) == dtype)]

    def __call__(self, model, feeds, ep, settings, *, allow_fallback=False, **kwargs):
        members = len({n.name.split("__")[0] for n in model.graph.node if re.match(r"c\d+__", n.name)}) or 1
        self.sessions.append((members, allow_fallback))
        if self._hits(model, self.breaks, self.breaks_dtype):
            raise session_mod.SessionError("build", "CPUExecutionProvider", RuntimeError("80070057 Invalid parameter"))
        refused = self._hits(model, self.refuses, onnx.TensorProto.INT8)
        if refused and not allow_fallback:
            raise session_mod.SessionError("build", "CPUExecutionProvider", RuntimeError(REFUSAL))
        run = self.real(model, feeds, CPU, settings, allow_fallback=allow_fallback, **kwargs)
        run.placement = {n: "CPUExecutionProvider" if n in refused else ep.provider for n in run.placement}
        if allow_fallback and members > 1:
            for name in self._hits(model, self.hides, onnx.TensorProto.FLOAT):
                run.placement.pop(name, None)
        return run


def _lines(cases, ep=PICKY, batch=True):
    """Raw lines by id: all ``cases`` in one batch, or each alone (``run_case``)."""
    config = CaseConfig(ep=ep)
    mapper = load_mapper(config.mapper)
    if batch:
        lines = run_batch([(c, ArtifactPolicy(), mapper) for c in cases], config, memory=Memory())
    else:
        lines = [run_case(c, config, mapper=mapper) for c in cases]
    return {line["id"]: line for line in lines}


def _same_apart_from_timings(a, b):
    strip = lambda line: dumps({k: v for k, v in line.items() if k not in ("duration_s", "timings")})  # noqa: E731
    assert a.keys() == b.keys()
    for case_id in a:
        assert strip(a[case_id]) == strip(b[case_id]), case_id


def _mixed_max_pools():
    """Seven MaxPool cases of one opset: float32 ones and int8 ones, interleaved."""
    floats = [c for c, _, _ in _mapped("max_pooling2/grid-float32", 4)]
    ints = [c for c, _, _ in _mapped("max_pooling2/grid-int8", 3)]
    cases = [floats[0], ints[0], floats[1], floats[2], ints[1], floats[3], ints[2]]
    assert len({packing.pack_key(to_onnx(c.desc, opset=c.opset).model) for c in cases}) == 1
    return cases


def test_a_refused_pack_is_sorted_by_one_diagnostic_session(monkeypatch):
    cases = _mixed_max_pools()
    picky = _Picky(monkeypatch, refuses=("MaxPool",))
    alone = _lines(cases, batch=False)
    assert [alone[c.id]["outcome"] for c in cases].count("not-on-ep") == 3
    picky.sessions.clear()
    packed = _lines(cases)
    _same_apart_from_timings(packed, alone)
    # the strict pack (refused), its diagnosis, the four taken cases again, then the three refused
    # cases' carrier models together (refused) and their diagnosis: never a session per refused case
    assert picky.sessions == [(7, False), (7, True), (4, False), (3, False), (3, True)]
    assert {line["timings"]["shared_by"] for line in packed.values() if line["outcome"] == "pass"} == {4}
    refused = [line for line in packed.values() if line["outcome"] == "not-on-ep"]
    assert all("MaxPool -> CPUExecutionProvider" in line["message"] for line in refused)
    assert all(set(line["placement"]) == {"MaxPool"} for line in refused)  # its own names, not the pack's


def test_a_case_the_diagnosis_cannot_place_is_run_again_never_called_refused(monkeypatch):
    # Seen on the WebGPU EP: a packed diagnosis whose placement lacked a float32 MaxPool turned a
    # case that passes alone into not-on-ep ("MaxPool -> unknown"). A missing placement proves
    # nothing: such a case is settled again in a session of its own.
    cases = _mixed_max_pools()
    picky = _Picky(monkeypatch, refuses=("MaxPool",), hides=("MaxPool",))
    alone = _lines(cases, batch=False)
    picky.sessions.clear()
    packed = _lines(cases)
    _same_apart_from_timings(packed, alone)
    assert [packed[c.id]["outcome"] for c in cases].count("pass") == 4
    assert not any("unknown" in line["message"] for line in packed.values())
    # the strict pack, its diagnosis, each unplaced float case alone, the refused carriers and theirs
    assert picky.sessions == [(7, False), (7, True)] + [(1, False)] * 4 + [(3, False), (3, True)]


def test_a_pack_that_fails_to_build_is_halved_and_what_fails_alone_is_learned(monkeypatch):
    cases = _mixed_max_pools()
    picky = _Picky(monkeypatch, breaks=("MaxPool",), breaks_dtype=onnx.TensorProto.INT8)
    alone = _lines(cases, batch=False)
    assert [alone[c.id]["outcome"] for c in cases].count("fail") == 3
    picky.sessions.clear()
    memory = Memory()
    config = CaseConfig(ep=PICKY)
    lines = run_batch([(c, ArtifactPolicy(), load_mapper(config.mapper)) for c in cases], config, memory=memory)
    _same_apart_from_timings({line["id"]: line for line in lines}, alone)
    assert [size for size, _ in picky.sessions[:3]] == [7, 3, 1]  # the pack, its first half, its first case
    assert memory.alone  # an int8 MaxPool failed alone: cases like it are not packed again
    picky.sessions.clear()
    again = run_batch([(c, ArtifactPolicy(), load_mapper(config.mapper)) for c in cases], config, memory=memory)
    _same_apart_from_timings({line["id"]: line for line in again}, alone)
    assert sorted(picky.sessions) == [(1, False)] * 3 + [(4, False)]  # the int8 ones alone, the rest packed


def test_a_case_whose_expectation_announces_its_failure_runs_alone_and_teaches_nothing(monkeypatch):
    """An expectation that names the error a case's own session fails with, for the flags this
    case holds, sends it alone from the start: no pack fails for it, nothing is halved, and cases
    of its likeness without those flags are still packed. The lines are those of each case alone."""
    from ep_testbed.harness.core.expectations import Expectation

    cases = _mixed_max_pools()
    picky = _Picky(monkeypatch, breaks=("MaxPool",), breaks_dtype=onnx.TensorProto.INT8)
    alone = _lines(cases, batch=False)
    announced = Expectation(id="max_pooling2/*", outcome=("not-on-ep",), reason="int8 MaxPool never builds", link="l",
                            flags=((("field", "InputTensor.DataType"), ("value", "INT8")),), error="80070057")
    elsewhere = Expectation(id="max_pooling2/*", outcome=("not-on-ep",), reason="another error", link="l",
                            flags=((("field", "InputTensor.DataType"), ("value", "INT8")),), error="no such error")
    config = CaseConfig(ep=PICKY)
    for policy, sessions, learned in ((ArtifactPolicy(expected=(announced,)), [(1, False)] * 3 + [(4, False)], False),
                                      (ArtifactPolicy(expected=(elsewhere,)), [(1, False)] * 3 + [(4, False)], True)):
        picky.sessions.clear()
        memory = Memory()
        lines = run_batch([(c, policy, load_mapper(config.mapper)) for c in cases], config, memory=memory)
        _same_apart_from_timings({line["id"]: line for line in lines}, alone)
        assert sorted(picky.sessions) == sessions  # the int8 ones alone from the start, the rest packed
        assert bool(memory.alone) is learned  # a failure other than the one announced is learned


def test_a_case_that_fails_in_a_pack_is_judged_alone(monkeypatch):
    """Failures are never reported from a shared session: the line (attribution, case folder) is
    the case's own session's."""
    from ep_testbed.harness.run import worker

    cases = [c for c, _, _ in _mapped("max_pooling2/grid-float32", 4)]
    wrong = cases[2].id
    mapper = load_mapper(CaseConfig(ep=CPU).mapper)
    mappers = {c.id: worker.perturbing([("perturb", wrong)], c.id, mapper) for c in cases}
    config = CaseConfig(ep=CPU)
    lines = {line["id"]: line for line in run_batch([(c, ArtifactPolicy(), mappers[c.id]) for c in cases], config)}
    assert lines[wrong]["outcome"] == "fail" and lines[wrong]["timings"]["shared_by"] == 1
    assert lines[wrong]["attribution"] is not None  # attributed, in the case's own session
    alone = run_case(cases[2], config, mapper=mappers[wrong])
    _same_apart_from_timings({wrong: lines[wrong]}, {wrong: alone})
    assert {lines[c.id]["timings"]["shared_by"] for c in cases if c.id != wrong} == {4}


def test_timings_share_each_session_between_its_cases():
    cases = [c for c, _, _ in _mapped("roi_pooling/grid-fp32", 4)]
    lines = _lines(cases, CPU)
    for line in lines.values():
        timings = line["timings"]
        assert timings["shared_by"] == 4
        assert set(timings) == {"prepare_s", "reference_s", "build_s", "run_s", "judge_s", "shared_by"}
        assert 0 < timings["reference_s"] <= timings["prepare_s"]  # a part of preparing the case
        parts = [v for k, v in timings.items() if k not in ("shared_by", "reference_s")]
        assert line["duration_s"] == pytest.approx(sum(parts), abs=1e-5)
    assert len({line["timings"]["build_s"] for line in lines.values()}) == 1  # one session, four equal shares
    json.dumps(list(lines.values()))


def test_cases_too_large_to_pack_are_prepared_and_finished_one_at_a_time(monkeypatch):
    """A worker sent a batch of large cases holds one case's arrays at a time (the stress tier's
    memory need is per case): each is settled and its line handed on before the next is prepared."""
    monkeypatch.setattr(packing, "PACK_ELEMENTS", 64)
    cases = [c for c, _, _ in _mapped("roi_pooling/grid-fp32", 3)]
    events = []

    def mapper(desc, **kwargs):
        events.append("prepare")
        return to_onnx(desc, **kwargs)

    lines = run_batch([(c, ArtifactPolicy(), mapper) for c in cases], CaseConfig(ep=CPU),
                      emit=lambda line: events.append("line"))
    assert events == ["prepare", "line"] * 3
    assert {line["timings"]["shared_by"] for line in lines} == {1}


def test_jobs_and_threads_count_the_cpus_this_process_may_use_not_the_machines(monkeypatch):
    """A container's cpuset or ``taskset`` leaves a process fewer CPUs than the machine has: the
    default workers and each worker's ONNX Runtime threads are sized by those, or 16 CPUs' worth of
    threads would crowd 2 (measured: fuzz at a third of its rate)."""
    import os

    from ep_testbed.harness.cli import parse_args
    from ep_testbed.harness.cli.options import run_config
    from ep_testbed.reference import workers

    monkeypatch.setattr(os, "sched_getaffinity", lambda pid: {0, 1}, raising=False)
    monkeypatch.setattr(os, "cpu_count", lambda: 16)
    config = run_config(parse_args(["run", "--ep", "cpu"]))
    assert config.jobs == packing.default_jobs(config.ep, 2) and workers.usable_cpus() == 2
    assert config.session(2).intra_op_threads == 1 and config.session(1).intra_op_threads == 0
    assert workers.thread_count() == 2


def test_the_tensor_type_note_of_a_failure_is_computed_once_in_its_own_session(monkeypatch):
    """The tensor-type note of a float16 failure (a second reference computation) belongs to the
    verdict of the case's own session: judging the pack only decides who is judged again alone,
    so it computes no note. Every failing case gets the note once, as a session of its own gives."""
    from ep_testbed.harness.run import case_steps, worker

    cases = [c for c, _, _ in _mapped("roi_pooling/grid-fp16", 4)]
    mapper = load_mapper(CaseConfig(ep=CPU).mapper)
    mappers = {c.id: worker.perturbing([("perturb", c.id)], c.id, mapper) for c in cases}
    notes = []
    real = case_steps._tensor_type_hint
    monkeypatch.setattr(case_steps, "_tensor_type_hint", lambda case, *a: notes.append(case.id) or real(case, *a))
    config = CaseConfig(ep=CPU)
    lines = {line["id"]: line for line in run_batch([(c, ArtifactPolicy(), mappers[c.id]) for c in cases], config)}
    assert {line["outcome"] for line in lines.values()} == {"fail"}
    assert sorted(notes) == sorted(lines), "one note per failing case, none while judging the pack"
    notes.clear()
    for case in cases:
        _same_apart_from_timings({case.id: lines[case.id]}, {case.id: run_case(case, config, mapper=mappers[case.id])})
    assert sorted(notes) == sorted(lines)
