"""The verdict on one attributed node: owns how a node's EP outputs are judged against the
DirectML reference run on the node's own EP inputs, and the row fields that verdict fills
(statuses: ``statuses.NODE_STATUSES``).

1. The node is read as a desc (``graphs.import_node``); none in this reading: ``not-attributable``.
2. A desc with a zero in a tensor's sizes (a RoiAlign fed 0 ROIs, common on an FPN level that got
   no proposal) computes nothing: DML tensor sizes are at least 1, so the reference is not
   called; the expected outputs are the empty arrays of the desc's output sizes, and the
   comparison checks the EP's output shapes (``row["empty"]`` names the empty tensors).
3. Otherwise ``reference.execute`` computes the desc, and ``harness.core.compare.compare_outputs``
   compares (index outputs tie-aware, ``outputs.index_rule_for``): ``match`` / ``tie-only``.
4. Where it differs, the node's alternatives (``Imported.alternatives``: the rows where the ONNX
   node means something else for these inputs, e.g. a RoiAlign region under one pixel that
   output_half_pixel raises to 1x1) are computed with the same desc; a row that fails the
   reference but matches what the node means is explained. Such a row is judged against what
   the alternative computes within the alternative's own rounding bounds and knife edges (the
   raised region's, not the original region's: their sample positions differ). Everything explained: ``explained``.
   Left over, the readings of the reference that the expectations of the EP the node ran on name
   for its operator (``reference.execute_reading``, DECISIONS.md READ-1) are tried element by
   element, as a case's are (``harness.run.readings``): every element left reproduced by one of
   them (or their combination) is ``explained`` too, the readings named. Left over after that,
   where the node carries a ``diverges`` flag the alternatives do not cover (e.g. ONNX's
   ``mode="max"``): ``flagged`` (predicted, not verified); else ``diverges``.

``errors`` / ``mismatches`` / ``worst`` / ``message`` always describe the comparison with the
DirectML reference; ``unexplained`` the same once explained rows are taken out; ``reason`` says
in one sentence why the node has the status it has.
"""

from __future__ import annotations

import functools
from dataclasses import replace
from typing import Any, Callable, Mapping, Sequence

import numpy as np
import onnx

from ...graphs import import_node
from ...reference import DEFAULT_MODEL, execute_reading, execute_with_bounds, spec_for
from ...reference.descs import member_value
from ...reference.dtypes import numpy_dtype
from ..core.compare import Allowance, Comparison, allowance_record, compare_outputs, knife_edge_note
from ..core.tolerances import Tolerances
from .outputs import index_rule_for

#: Explained rows listed by number in a row's ``explained`` record, at most.
ROWS_LISTED = 20
#: One side of a node's judgement: outputs by DML member, and the reference's allowance for them.
Side = tuple[Mapping[str, np.ndarray], "Allowance | None"]


def judge_node(row: dict[str, Any], node: onnx.NodeProto, arrays: Sequence[np.ndarray],
               ep_values: Mapping[str, np.ndarray], reading: str, tolerances: Tolerances,
               opset: int | None, precision: str = DEFAULT_MODEL,
               readings: Callable[[str], Sequence[str]] | None = None) -> dict[str, np.ndarray] | None:
    """Judge ``node`` (module docstring) on its EP input ``arrays`` against the EP's outputs in
    ``ep_values``, filling ``row``; the reference's rounding bounds and knife-edge alternatives
    under the ``precision`` model widen the comparison; ``readings(op)`` names the readings that may
    explain what is left (step 4). Returns the value outputs of a node that does not match
    (``{"expected", "actual"}``, for pictures), else None."""
    try:
        imported = import_node(node, [a.shape for a in arrays], [a.dtype for a in arrays], reading, opset)
    except ValueError as exc:
        row.update(status="not-attributable", message=f"no DML desc in the {reading!r} reading: {exc}")
        return None
    row["desc_type"] = imported.desc.TYPE
    row["flags"] = [f.to_json() for f in imported.flags if f.kind != "exact"]
    empty = empty_tensors(imported.desc)
    row["empty"] = empty or None
    try:
        expected, reference = _reference(imported, node, arrays, empty, precision)
    except Exception as exc:
        row.update(status="error", message=f"reference raised {type(exc).__name__}: {exc}")
        return None
    actual = {member: ep_values[name] for member, name in _members(imported, node, expected)}
    rename = dict(_members(imported, node, expected))
    index_map, in_window = index_rule_for(imported, arrays)
    compare = functools.partial(compare_outputs, actual=actual, tolerances=tolerances,
                                inputs=imported.inputs(arrays), in_window=in_window, index_outputs=index_map,
                                allowance=Allowance.of(reference) if reference is not None else None)
    cmp = compare(expected)
    _fill(row, cmp, rename)
    if reference is not None:
        row["message"] = _rename(cmp.summary() + knife_edge_note(reference, cmp), rename)
        row.update(allowance_record(reference, cmp))
    if empty:
        row["message"] = f"{row['message']}; {_empty_note(imported.desc, empty)}"
    if cmp.passed:
        row.update(status="tie-only" if cmp.ties else "match", reason="")
        return None
    names = tuple(readings(spec_for(imported.desc).name)) if readings is not None else ()
    _explain(row, imported, node, arrays, (expected, Allowance.of(reference) if reference is not None else None),
             actual, cmp, compare, tolerances, rename, precision, names)
    value = _value_output(imported.desc, expected)
    return None if value is None else {"expected": expected[value], "actual": actual[value]}


def empty_tensors(desc: Any) -> list[str]:
    """The DML members of ``desc`` whose sizes hold a zero (DML tensors need every size >= 1)."""
    found = []
    for member in (*desc.INPUTS, *desc.OUTPUTS):
        tensor = member_value(desc, member)
        if tensor is not None and 0 in tuple(tensor.sizes):
            found.append(member)
    return found


def _reference(imported: Any, node: onnx.NodeProto, arrays: Sequence[np.ndarray], empty: list[str],
               precision: str) -> tuple[dict[str, np.ndarray], Any]:
    """The desc's outputs on ``arrays``, as the node's arrays keyed by DML output member, and the
    reference's ``Expected`` (bounds, alternatives); for a desc with an empty tensor, the empty
    arrays of its output sizes and None (the reference is not called: DML has no such desc)."""
    desc = imported.desc
    reference = None
    if empty:
        raw = {m: np.zeros(member_value(desc, m).sizes, numpy_dtype(member_value(desc, m).data_type))
               for m in desc.OUTPUTS if member_value(desc, m) is not None}
    else:
        reference = execute_with_bounds(desc, imported.inputs(arrays), precision)
        raw = reference.outputs
    listed = imported.outputs(raw)
    expected = {desc.OUTPUTS[i]: np.asarray(listed[i]) for i, name in enumerate(node.output[:len(listed)]) if name}
    return expected, reference


def _members(imported: Any, node: onnx.NodeProto, expected: Mapping[str, np.ndarray]) -> list[tuple[str, str]]:
    """``(DML output member, node output name)`` of every output the reference computed: the
    node's outputs sit at the positions of the desc's DML output members."""
    return [(m, node.output[i]) for i, m in enumerate(imported.desc.OUTPUTS) if m in expected]


def _fill(row: dict[str, Any], cmp: Comparison, rename: Mapping[str, str]) -> None:
    """The comparison with the DirectML reference, in the row's terms (ONNX output names)."""
    row.update(errors=cmp.errors(), mismatches=cmp.mismatches, ties=cmp.ties, compared=cmp.compared,
               worst=[dict(w, output=rename.get(w["output"], w["output"])) for w in cmp.worst],
               message=_rename(cmp.summary(), rename))


def _explain(row: dict[str, Any], imported: Any, node: onnx.NodeProto, arrays: Sequence[np.ndarray],
             expected: Side, actual: Mapping[str, np.ndarray], cmp: Comparison,
             compare: Callable[..., Comparison], tolerances: Tolerances,
             rename: Mapping[str, str], precision: str = DEFAULT_MODEL, names: Sequence[str] = ()) -> None:
    """Take the rows the node's alternatives explain out of a failed comparison and set the
    status, ``explained``, ``unexplained`` and ``reason`` (module docstring, step 4).
    ``expected``: the reference's outputs and their allowance (bounds, knife edges; None under
    the ``exact`` model). An explained row is judged as what the node means there: the
    alternative's outputs within the alternative's own allowance."""
    chosen, allowance = dict(expected[0]), expected[1]
    explained = []
    for alternative in imported.alternatives(arrays):
        try:
            meant, meant_reference = _reference(imported, node, alternative.inputs, [], precision)
        except Exception:  # the node's meaning cannot be computed as this desc: nothing explained
            continue
        meant_allowance = Allowance.of(meant_reference) if meant_reference is not None else None
        rows = _rows_meant(alternative.rows, (chosen, allowance), (meant, meant_allowance), actual, tolerances)
        if rows.size:
            for member in chosen:
                chosen[member] = chosen[member].copy()
                chosen[member][rows] = meant[member][rows]
            # the rows now hold what the raised regions compute: they are judged against those
            # regions' own rounding bounds and knife edges, not the original regions'
            allowance = _merged_allowance(allowance, meant_allowance, rows, meant)
            explained.append((alternative, rows))
    after = compare(chosen, allowance=allowance) if explained else cmp
    row["explained"] = [{"flag": a.flag.to_json(), "rows": rows[:ROWS_LISTED].tolist(), "row_count": int(rows.size),
                         "candidate_rows": int(np.size(a.rows))} for a, rows in explained] or None
    row["unexplained"] = {"mismatches": after.mismatches, "errors": after.errors(),
                          "worst": [dict(w, output=rename.get(w["output"], w["output"])) for w in after.worst],
                          "message": _rename(after.summary(), rename)}
    covered = set(imported.data_flags)
    predicted = [f for f in imported.flags if f.kind == "diverges" and f.field not in covered]
    by_readings = _by_readings(imported, node, arrays, actual, compare, after, names, precision) \
        if not after.passed and after.mismatches and not after.problems else None
    row["readings"] = by_readings
    if after.passed or (by_readings is not None and not by_readings["unexplained"]):
        row["status"] = "explained"
    else:
        row["status"] = "flagged" if predicted else "diverges"
    if by_readings is not None and by_readings["explained"]:
        counts = ", ".join(f"{k} ({v})" for k, v in by_readings["explained"].items())
        found = sum(by_readings["explained"].values())
        text = (f"readings of the reference that the expectations of {row.get('provider')} name reproduce {found} of "
                f"the {after.mismatches} out-of-tolerance elements{' left' if explained else ''}: {counts}")
        if explained:
            text = _reason("explained", cmp, cmp, explained, [], imported.flags, covered) + "; " + text
        row["reason"] = text if not by_readings["unexplained"] else (
            _reason(row["status"], cmp, after, explained, predicted, imported.flags, covered) + "; " + text)
    else:
        row["reason"] = _reason(row["status"], cmp, after, explained, predicted, imported.flags, covered)


def _by_readings(imported: Any, node: onnx.NodeProto, arrays: Sequence[np.ndarray], actual: Mapping[str, np.ndarray],
                 compare: Callable[..., Comparison], after: Comparison, names: Sequence[str],
                 precision: str) -> dict[str, Any] | None:
    """Which of the readings ``names`` reproduce the elements ``after`` still fails (module
    docstring, step 4): ``{"tried", "explained": {reading or "a+b": elements}, "unexplained"}``;
    None when no reading of the node's operator can show on its inputs."""
    own = {r.name: r for r in spec_for(imported.desc).readings}
    inputs = imported.inputs(arrays)
    usable = [n for n in dict.fromkeys(names) if n in own and own[n].can_show(imported.desc, inputs)]
    if not usable:
        return None
    left = {m: mask.copy() for m, mask in after.failing.items() if mask.any()}
    record: dict[str, Any] = {"tried": [], "explained": {}, "unexplained": 0}
    sets = [(n,) for n in usable] + ([tuple(usable)] if len(usable) > 1 else [])
    for combo in sets:
        if not any(mask.any() for mask in left.values()):
            break
        key = "+".join(combo)
        record["tried"].append(key)
        try:
            reference = execute_reading(imported.desc, inputs, list(combo), precision)
        except Exception:  # a reading that cannot run here explains nothing
            continue
        listed = imported.outputs(reference.outputs)
        meant = {imported.desc.OUTPUTS[i]: np.asarray(v) for i, v in enumerate(listed) if imported.desc.OUTPUTS[i] in left}
        other = compare(meant, allowance=Allowance.of(reference))
        found = 0
        for member, mask in left.items():
            failing = other.failing.get(member)
            if failing is not None and failing.shape == mask.shape:
                hit = mask & ~failing
                found += int(hit.sum())
                mask &= ~hit
        if found:
            record["explained"][key] = found
    record["unexplained"] = int(sum(int(mask.sum()) for mask in left.values()))
    return record


def _rows_meant(rows: np.ndarray, expected: Side, meant: Side, actual: Mapping[str, np.ndarray],
                tolerances: Tolerances) -> np.ndarray:
    """Of ``rows``, those where the EP's outputs are closer to ``meant`` than to ``expected``:
    fewer elements outside the comparison (every output, row by row), each side judged with its
    own allowance (the reference's bounds for those regions; None: the rule alone). A row that
    matches neither fully is read as the meaning it is closer to; its remaining elements stay
    unexplained."""
    def mismatches(side: Side, r: int) -> int:
        """Elements of row ``r`` outside the comparison against ``side`` (a shape or dtype problem: any count beats it)."""
        values, allowance = side
        cmp = compare_outputs({m: values[m][r:r + 1] for m in values}, {m: actual[m][r:r + 1] for m in values},
                              tolerances, allowance=_row_allowance(allowance, r))
        return cmp.mismatches + (10**18 if cmp.problems else 0)

    picked = [int(r) for r in np.asarray(rows).ravel() if mismatches(meant, int(r)) < mismatches(expected, int(r))]
    return np.array(picked, dtype=np.int64)


def _row_allowance(allowance: Allowance | None, r: int) -> Allowance | None:
    """``allowance`` cut to row ``r`` (the first axis) of every bound, knife-edge range and NaN flag."""
    if allowance is None:
        return None
    return replace(allowance, bounds={k: np.asarray(v)[r:r + 1] for k, v in allowance.bounds.items()},
                   alternatives={k: (np.asarray(lo)[r:r + 1], np.asarray(hi)[r:r + 1])
                                 for k, (lo, hi) in allowance.alternatives.items()},
                   nan_alternatives={k: np.asarray(v)[r:r + 1] for k, v in allowance.nan_alternatives.items()})


def _merged_allowance(base: Allowance | None, meant: Allowance | None, rows: np.ndarray,
                      meant_outputs: Mapping[str, np.ndarray]) -> Allowance | None:
    """``base`` with ``rows`` (first axis) taken from ``meant``: its bounds (0 where it has none),
    knife-edge ranges (the meant outputs themselves where it has none) and NaN flags (none where it
    has none). None stays None: the run compares with the rule alone (the ``exact`` precision model)."""
    if base is None:
        return None
    bounds = {}
    for name in set(base.bounds) | set(meant.bounds if meant else {}):
        shape = np.shape(meant_outputs[name]) if name in meant_outputs else None
        old = base.bounds.get(name)
        merged = np.array(old, dtype=np.float64) if old is not None else np.zeros(shape or (0,))
        new = meant.bounds.get(name) if meant else None
        if merged.shape == shape:
            merged[rows] = np.asarray(new)[rows] if new is not None and np.shape(new) == shape else 0.0
        bounds[name] = merged
    alternatives = {}
    for name, (low, high) in base.alternatives.items():
        low, high = np.array(low), np.array(high)
        new_low, new_high = (meant.alternatives.get(name) if meant else None) or (meant_outputs.get(name),) * 2
        if new_low is not None and new_high is not None and np.shape(new_low) == low.shape \
                and np.shape(new_high) == high.shape:
            low[rows], high[rows] = np.asarray(new_low)[rows], np.asarray(new_high)[rows]
        alternatives[name] = (low, high)
    nan = {}
    for name in set(base.nan_alternatives) | set(meant.nan_alternatives if meant else {}):
        shape = np.shape(meant_outputs[name]) if name in meant_outputs else None
        old = base.nan_alternatives.get(name)
        flags = np.array(old, dtype=bool) if old is not None and np.shape(old) == shape else np.zeros(shape or (0,), bool)
        new = meant.nan_alternatives.get(name) if meant else None
        if flags.shape == shape:
            flags[rows] = np.asarray(new, dtype=bool)[rows] if new is not None and np.shape(new) == shape else False
        nan[name] = flags
    return replace(base, bounds=bounds, alternatives=alternatives, nan_alternatives=nan)


def _reason(status: str, cmp: Comparison, after: Comparison, explained: list, predicted: list,
            flags: list, covered: set[str]) -> str:
    """One sentence: why the node has ``status`` (what explains its difference, or that nothing does)."""
    where = "; ".join(f"ROIs {_listed(rows)}, where the EP computes what the node means ({alternative.flag.reason})"
                      for alternative, rows in explained)
    if status == "explained":
        return f"all {cmp.mismatches} out-of-tolerance elements lie in {where}"
    if status == "flagged":
        named = "; ".join(f"{f.field}: {f.reason}" for f in predicted)
        return (f"{after.mismatches} out-of-tolerance elements where the node's flags predict a divergence ({named})"
                + (f"; {cmp.mismatches - after.mismatches} more lie in {where}" if explained else ""))
    text = f"{after.mismatches} out-of-tolerance elements are explained by no flag"
    data = [f.field for f in flags if f.field in covered]
    if explained:
        text += f"; the other {cmp.mismatches - after.mismatches} lie in {where}"
    elif data:
        text += f" (the node's flag {', '.join(data)} concerns no region of these inputs)"
    return text


def _listed(rows: np.ndarray) -> str:
    """``"2, 9, 18"``, or the first eight and the count."""
    shown = ", ".join(str(r) for r in rows[:8].tolist())
    return shown if rows.size <= 8 else f"{shown}, ... ({rows.size} in all)"


def _empty_note(desc: Any, empty: list[str]) -> str:
    """Why an empty node is judged on shapes only."""
    sizes = ", ".join(f"{m} {list(member_value(desc, m).sizes)}" for m in empty)
    return (f"empty: {sizes}; DML tensor sizes must be at least 1, so the reference has nothing to compute and "
            "the EP's output shapes are compared with the desc's")


def _value_output(desc: Any, present: Mapping[str, np.ndarray]) -> str | None:
    """The first DML output of ``desc`` that holds values (not an index output of its record)."""
    index = spec_for(desc).index_outputs
    return next((m for m in desc.OUTPUTS if m in present and m not in index), None)


def _rename(text: str, rename: Mapping[str, str]) -> str:
    """``text`` with DML output member names replaced by the node's ONNX output names."""
    for dml, onnx_name in rename.items():
        text = text.replace(dml, onnx_name)
    return text


__all__ = ["ROWS_LISTED", "empty_tensors", "judge_node"]
