"""``ep-testbed merge RUN... --out DIR``: shards' results joined into one run.

The merged ``results.jsonl`` has one run header (the shards' common facts, ``case_count`` the
sum, ``shards`` listing where each part ran), every case line once (sorted by id), their case
folders copied, and an ``end`` line with the counts -- so reports read it exactly as they read
an unsharded run. Shards must agree on EP, seed, tolerances and session options, and -- unless
``allow_mixed`` -- on what ties results to a device: ONNX Runtime flavour and version and the
GPU identity (``harness.gpu.identity_key``: adapter, PCI ids, driver and DirectML versions); a
mixed merge lists each shard's identity in ``mixed``. A case id in two shards, or a missing
shard of a ``K/N`` split, is refused.
"""

from __future__ import annotations

import os
import shutil
from typing import Any, Sequence

from .gpu import identity_key
from .results import RESULTS_FILE, ResultsWriter, count_outcomes, end_record, read_run

#: Header keys every shard must share.
MUST_AGREE = ("ep", "seed", "tolerances", "session_options")
#: Header keys that tie results to a runtime and a device: shared unless ``allow_mixed``.
IDENTITY = ("ort_flavour", "ort_version", "gpu")


class MergeError(ValueError):
    """The runs cannot be merged (the message says which run and which key)."""


#: One input run: (folder, header, case lines, end line or None).
RunRecords = tuple[str, dict[str, Any], list[dict[str, Any]], "dict[str, Any] | None"]


def merge_runs(run_dirs: Sequence[str], out_dir: str, allow_partial: bool = False,
               command: str = "", allow_mixed: bool = False) -> tuple[dict[str, Any], list[dict[str, Any]]]:
    """Merge ``run_dirs`` into ``out_dir``; returns (header, case lines).

    Raises ``MergeError`` (nothing written to ``results.jsonl``) when a run has no results or
    no header, the runs disagree on a ``MUST_AGREE`` key (or, unless ``allow_mixed``, on an
    ``IDENTITY`` key), a shard of a ``K/N`` split is missing
    (unless ``allow_partial``) or given twice, a case id is in two runs, or ``out_dir`` already
    holds results.
    """
    if not run_dirs:
        raise MergeError("merge: give at least one run folder")
    runs = [_read_run_dir(run_dir) for run_dir in run_dirs]
    _check_agree(runs)
    mixed = _check_identity(runs, allow_mixed)
    _check_shards(runs, allow_partial)
    lines, source = _join_cases(runs)
    os.makedirs(out_dir, exist_ok=True)
    target = os.path.join(out_dir, RESULTS_FILE)
    if os.path.exists(target):
        raise MergeError(f"merge: {target} exists; choose an empty --out")
    _copy_case_folders(lines, source, out_dir)
    header = _merged_header(runs, command)
    if mixed:
        header["mixed"] = [{"run": os.path.abspath(d), "ort_flavour": h.get("ort_flavour"),
                            "ort_version": h.get("ort_version"), "gpu": _gpu_summary(h)} for d, h, _, _ in runs]
    interrupted = any(end is None or end.get("interrupted") for _, _, _, end in runs)
    with ResultsWriter(out_dir) as writer:
        writer.write(header)
        for line in lines:
            writer.write(line)
        end = end_record(count_outcomes(lines), interrupted)
        end["finished"] = max((e or {}).get("finished", "") for _, _, _, e in runs) or end["finished"]
        writer.write(end)
    return header, lines


def _read_run_dir(run_dir: str) -> RunRecords:
    """One run folder's header, case lines and end line; ``MergeError`` if it has no results or header."""
    path = os.path.join(run_dir, RESULTS_FILE)
    if not os.path.exists(path):
        raise MergeError(f"merge: {path} does not exist")
    header, cases, end = read_run(run_dir)
    if header is None:
        raise MergeError(f"merge: {path} has no run header line")
    return run_dir, header, cases, end


def _check_agree(runs: list[RunRecords]) -> None:
    """``MergeError`` naming the run and key when a run's header differs from the first's on ``MUST_AGREE``."""
    first_dir, first, _, _ = runs[0]
    for run_dir, header, _, _ in runs[1:]:
        for key in MUST_AGREE:
            if header.get(key) != first.get(key):
                raise MergeError(f"merge: {run_dir} has {key} = {header.get(key)!r}, {first_dir} has {first.get(key)!r}")


def _identity_of(header: dict[str, Any], key: str) -> Any:
    """The value of an ``IDENTITY`` key that must agree (the GPU record's ``identity_key``)."""
    return identity_key(header.get("gpu")) if key == "gpu" else header.get(key)


def _gpu_summary(header: dict[str, Any]) -> str:
    """The header's one-line GPU identity, or "not recorded" (runs made before it existed)."""
    gpu = header.get("gpu")
    return str(gpu.get("summary")) if isinstance(gpu, dict) else "not recorded"


def _check_identity(runs: list[RunRecords], allow_mixed: bool) -> list[str]:
    """The ``IDENTITY`` keys on which some run differs from the first; ``MergeError`` naming both
    runs and values unless ``allow_mixed``."""
    first_dir, first, _, _ = runs[0]
    differing = []
    for run_dir, header, _, _ in runs[1:]:
        for key in IDENTITY:
            if _identity_of(header, key) == _identity_of(first, key):
                continue
            differing.append(key)
            if not allow_mixed:
                mine, theirs = ((_gpu_summary(h) if key == "gpu" else h.get(key)) for h in (header, first))
                raise MergeError(f"merge: {run_dir} ran on another {'GPU' if key == 'gpu' else key} than {first_dir}: "
                                 f"{mine!r} vs {theirs!r}; results from different devices, drivers or ONNX Runtime "
                                 "versions are not one run. Note: pass --allow-mixed to merge anyway (the merged "
                                 "header then lists each shard's identity under 'mixed')")
    return sorted(set(differing))


def _join_cases(runs: list[RunRecords]) -> tuple[list[dict[str, Any]], dict[str, str]]:
    """Every case line once, sorted by id, and id -> the run folder it came from.
    ``MergeError`` when an id is in two runs."""
    source: dict[str, str] = {}
    lines: list[dict[str, Any]] = []
    for run_dir, _, cases, _ in runs:
        for line in cases:
            if line["id"] in source:
                raise MergeError(f"merge: case {line['id']!r} is in both {source[line['id']]} and {run_dir}")
            source[line["id"]] = run_dir
            lines.append(line)
    lines.sort(key=lambda line: line["id"])
    return lines, source


def _copy_case_folders(lines: list[dict[str, Any]], source: dict[str, str], out_dir: str) -> None:
    """Copy each case's folder (its ``artifacts`` path) from its run into ``out_dir``, same relative path."""
    for line in lines:
        if line.get("artifacts"):
            src = os.path.join(source[line["id"]], line["artifacts"])
            if os.path.isdir(src):
                shutil.copytree(src, os.path.join(out_dir, line["artifacts"]), dirs_exist_ok=True)


def _merged_header(runs: list[RunRecords], command: str) -> dict[str, Any]:
    """The first run's header without ``shard``; ``command`` (or the first's), the earliest
    ``started``, the summed ``case_count`` and ``shards`` (where and how each part ran)."""
    first = runs[0][1]
    header = {key: value for key, value in first.items() if key not in ("shard", "command")}
    header.update(
        command=command or first.get("command", ""),
        started=min(h.get("started", "") for _, h, _, _ in runs),
        case_count=sum(int(h.get("case_count") or 0) for _, h, _, _ in runs),
        shards=[{"run": os.path.abspath(d), "shard": h.get("shard"), "case_count": h.get("case_count"),
                 "command": h.get("command"), "machine": h.get("machine"), "started": h.get("started"),
                 "gpu": _gpu_summary(h)}
                for d, h, _, _ in runs])
    return header


def _check_shards(runs: list[RunRecords], allow_partial: bool) -> None:
    """``MergeError`` unless the runs are all unsharded, or distinct shards of one ``K/N`` split
    with none missing (``allow_partial`` lets shards be missing)."""
    shards = [h.get("shard") for _, h, _, _ in runs]
    if not any(shards):
        return
    if not all(shards):
        raise MergeError("merge: some runs are shards (--shard K/N) and some are not")
    totals = {s.split("/")[1] for s in shards}
    if len(totals) != 1:
        raise MergeError(f"merge: runs come from different splits: {sorted(set(shards))}")
    total = int(totals.pop())
    present = sorted(int(s.split("/")[0]) for s in shards)
    if len(set(present)) != len(present):
        raise MergeError(f"merge: a shard is given twice: {sorted(shards)}")
    missing = sorted(set(range(1, total + 1)) - set(present))
    if missing and not allow_partial:
        raise MergeError(f"merge: shard(s) {', '.join(f'{k}/{total}' for k in missing)} missing "
                         "(pass --allow-partial to merge anyway)")
