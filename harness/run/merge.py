"""``ep-testbed merge RUN... --out DIR``: shards' results joined into one run.

The merged ``results.jsonl`` has one run header (the shards' common facts, ``case_count`` the
sum, ``shards`` listing where each part ran), every case line once (sorted by id), their case
folders copied, and an ``end`` line with the counts -- so reports read it exactly as they read
an unsharded run. Shards must agree on EP, seed, tolerances and session options, and -- unless
``allow_mixed`` -- on what ties results to a device: ONNX Runtime flavour and version and the
GPU identity (``harness.eps.gpu.identity_key``: adapter, PCI ids, driver and DirectML versions); a
mixed merge lists each shard's identity in ``mixed``. A case id in two shards, or a missing
shard of a ``K/N`` split, is refused.

A shard's ``results.jsonl`` is data: it is read through ``harness.core.untrusted_files`` and held to
``harness.core.results``' schema. A damaged line (anything but the torn last line a killed run
leaves) or two different run headers refuse the merge, naming the file and line, rather than
dropping a case. A case line's ``artifacts`` must be the case's own folder (``results.case_dir``)
and is copied only as regular files inside the shard's folder: a path that leaves either
folder, or a symbolic link anywhere in it, refuses the merge before anything is copied.

Memory: each shard is read twice, never held whole. The first pass keeps each case line's
``merge_view`` and where the line lies; the second reads the lines again one at a time, in id
order (one reader per shard, merged by id), each held to the schema and to its view, and writes
them: a shard rewritten between the passes refuses the merge.
"""

from __future__ import annotations

import heapq
import os
import shutil
from pathlib import Path
from typing import Any, Iterator, Sequence

from ..core.results import (
    CASES_DIR,
    PASSING,
    RESULTS_FILE,
    CaseLine,
    case_dir,
    count_outcomes,
    dumps,
    end_record,
    keep_keys,
    load_records,
    read_cases_at,
    results_path,
)
from ..core.terminal import safe
from ..core.untrusted_files import FileRefused, copy_planned, open_output, plan_copy
from ..eps.gpu import identity_key
from .run_folder import FolderBusy, claim
from .selection import parse_shard

#: Header keys every shard must share.
MUST_AGREE = ("ep", "seed", "tolerances", "session_options")
#: Header keys that tie results to a runtime and a device: shared unless ``allow_mixed``.
IDENTITY = ("ort_flavour", "ort_version", "gpu")


class MergeError(ValueError):
    """The runs cannot be merged (the message says which run and which key)."""


#: One input run: (folder, header, each case line's ``merge_view``, end line or None, case id ->
#: (line number, byte offset) of its line, where the merged file's copy is read from).
RunRecords = tuple[str, dict[str, Any], list[CaseLine], "dict[str, Any] | None", dict[str, tuple[int, int]]]
#: The first line of a failing case's message that a merge prints, at most this many characters.
MESSAGE_CHARS = 4000


def merge_view(line: CaseLine) -> CaseLine:
    """What a merge holds of a case line until it copies the line: the keys that order, count,
    check and print it (id, op, outcome, artifacts and, unless it passed, the first line of its
    message, cut to ``MESSAGE_CHARS``: the failures listing prints it), so a merge of files
    larger than memory holds each case small."""
    view = keep_keys(line, ("id", "op", "outcome", "artifacts"))
    first = [] if line.get("outcome") in PASSING else (line.get("message") or "").strip().splitlines()
    if first:
        view["message"] = first[0] if len(first[0]) <= MESSAGE_CHARS else first[0][:MESSAGE_CHARS - 1] + "…"
    return view


def merge_runs(run_dirs: Sequence[str], out_dir: str, allow_partial: bool = False,
               command: str = "", allow_mixed: bool = False, overwrite: bool = False
               ) -> tuple[dict[str, Any], list[CaseLine]]:
    """Merge ``run_dirs`` into ``out_dir``; returns (header, each case's ``merge_view``, by id).

    Two passes over each run's ``results.jsonl``: the first keeps each case line's
    ``merge_view`` and where the line lies, the second copies the lines, held to the schema
    again, one at a time into the merged file (written whole or not at all), so memory holds the
    cases small, never every line parsed.

    Raises ``MergeError`` (nothing written to ``results.jsonl``) when a run has no results or
    no header, the runs disagree on a ``MUST_AGREE`` key (or, unless ``allow_mixed``, on an
    ``IDENTITY`` key), a shard of a ``K/N`` split is missing
    (unless ``allow_partial``) or given twice, a case id is in two runs, or ``out_dir`` already
    holds results and ``overwrite`` is not set (with it, what a merge writes there, from an
    earlier merge or one killed halfway, is replaced: a merge is redone from its runs).
    """
    if not run_dirs:
        raise MergeError("merge: give at least one run folder")
    _check_out_not_an_input(run_dirs, out_dir)
    runs = [_read_run_dir(run_dir) for run_dir in run_dirs]
    _check_agree(runs)
    mixed = _check_identity(runs, allow_mixed)
    _check_shards(runs, allow_partial)
    lines, source = _join_cases(runs)
    try:
        folder = claim(out_dir, command)
    except FolderBusy as exc:
        raise MergeError(f"merge: {exc}") from None
    with folder:
        if overwrite:
            _clear_merged(out_dir)
        return _write_merged(runs, lines, source, out_dir, command, mixed)


def _check_out_not_an_input(run_dirs: Sequence[str], out_dir: str) -> None:
    """``MergeError`` when ``out_dir`` is one of ``run_dirs`` (the same folder by any path): the
    merge would write, and ``--overwrite`` first delete, the results it reads."""
    try:
        out = os.stat(out_dir)
    except OSError:
        return  # a folder that is not there yet is none of the runs
    for run_dir in run_dirs:
        try:
            same = os.path.samestat(out, os.stat(run_dir))
        except OSError:
            continue  # reading the run says what is wrong with it
        if same:
            raise MergeError(f"merge: --out {safe(out_dir)} is the run folder {safe(run_dir)} it merges; writing there "
                             "would replace the results it reads.\nNote: choose a new folder for --out")


#: What a merge writes into its --out (``--overwrite`` removes these, and nothing else).
MERGED_FILES = (RESULTS_FILE, "report.html", "junit.xml", "summary.json")


def _clear_merged(out_dir: str) -> None:
    """Remove what a merge writes from ``out_dir`` (``MERGED_FILES`` and the case folders), never
    following a link: the ``--overwrite`` of a merge."""
    for name in MERGED_FILES:
        path = os.path.join(out_dir, name)
        if os.path.islink(path) or os.path.isfile(path):
            os.remove(path)
    cases = os.path.join(out_dir, CASES_DIR)
    if os.path.islink(cases):
        os.remove(cases)
    elif os.path.isdir(cases):
        shutil.rmtree(cases)


def _write_merged(runs: list[RunRecords], lines: list[CaseLine], source: dict[str, str], out_dir: str,
                  command: str, mixed: list[str]) -> tuple[dict[str, Any], list[CaseLine]]:
    """Copy the case folders and write the merged ``results.jsonl`` into ``out_dir`` (held);
    ``mixed``: the identity keys the runs differ on (each run's identity is then listed)."""
    target = os.path.join(out_dir, RESULTS_FILE)
    if os.path.lexists(target):
        raise MergeError(f"merge: {safe(target)} exists: --out holds a run or an earlier merge.\nNote: pass --overwrite "
                         "to replace it (the merge is redone from the runs given), or choose an empty --out")
    copy_planned(_plan_case_folders(lines, source, out_dir))
    header = _merged_header(runs, command)
    if mixed:
        header["mixed"] = [{"run": os.path.abspath(d), "ort_flavour": h.get("ort_flavour"),
                            "ort_version": h.get("ort_version"), "gpu": _gpu_summary(h)} for d, h, _, _, _ in runs]
    interrupted = any(end is None or end.get("interrupted") for _, _, _, end, _ in runs)
    end = end_record(count_outcomes(lines), interrupted)
    end["finished"] = max((e or {}).get("finished") or "" for _, _, _, e, _ in runs) or end["finished"]
    with open_output(target, "w") as f:  # whole or not at all: a merge cut short leaves no results.jsonl
        f.write(dumps(header) + "\n")
        for line in _whole_lines(runs, lines, source):
            f.write(dumps(line) + "\n")
        f.write(dumps(end) + "\n")
        f.flush()
        os.fsync(f.fileno())
    return header, lines


def _whole_lines(runs: list[RunRecords], lines: list[CaseLine], source: dict[str, str]
                 ) -> Iterator[CaseLine]:
    """The whole case lines of ``lines`` (views sorted by id), in that order: each run's lines
    read again in id order (``read_cases_at``, held to the schema) and merged by id. A line that
    no longer matches its view (the shard was rewritten meanwhile) refuses the merge."""
    per_run: dict[str, list[CaseLine]] = {run_dir: [] for run_dir, *_ in runs}
    for view in lines:
        per_run[source[view["id"]]].append(view)
    streams = [_checked_lines(run_dir, per_run.pop(run_dir, []), where) for run_dir, _, _, _, where in runs]
    return heapq.merge(*streams, key=lambda line: line["id"])


def _checked_lines(run_dir: str, views: list[CaseLine], where: dict[str, tuple[int, int]]
                   ) -> Iterator[CaseLine]:
    """The whole lines of ``views`` from ``run_dir``'s results file, in the order given;
    ``MergeError`` when the file refuses or a line differs from what the first pass read."""
    path = results_path(run_dir)
    try:
        for view, line in zip(views, read_cases_at(path, ((v["id"], *where[v["id"]]) for v in views))):
            if merge_view(line) != view:
                raise MergeError(f"merge: {path}: case {safe(view['id'])!r} changed while it was being merged. "
                                 "Note: merge again once nothing writes into the run folders")
            yield line
    except FileRefused as exc:
        raise MergeError(f"merge: {exc}") from None


def _read_run_dir(run_dir: str) -> RunRecords:
    """One run folder's header, case lines and end line; ``MergeError`` naming the file (and
    line) if it has no results, a damaged line, no header, or two different headers."""
    path = os.path.join(run_dir, RESULTS_FILE)
    if not os.path.lexists(path):
        raise MergeError(f"merge: {path} does not exist")
    try:
        records = load_records(results_path(run_dir), merge_view)
    except FileRefused as exc:
        raise MergeError(f"merge: {exc}") from None
    if records.damaged:
        first = records.damaged[0]
        raise MergeError(f"merge: {path} line {first.number} is damaged ({safe(first.reason)})"
                         + (f", and {len(records.damaged) - 1} more line(s)" if len(records.damaged) > 1 else "")
                         + "; merging would lose a case.\nNote: repair or delete the line (its case then counts as "
                           "not run), or rerun that shard with --resume")
    if records.repeated:  # keeping the last line per id would drop the other result unseen
        case_id, numbers = next(iter(records.repeated.items()))
        raise MergeError(f"merge: {path} holds {len(records.repeated)} case id(s) with more than one result, e.g. "
                         f"{safe(case_id, 120)!r} on lines {', '.join(map(str, numbers))}; merging would keep one."
                         "\nNote: rerun that shard into an empty folder")
    if records.header is None:
        raise MergeError(f"merge: {path} has no run header line")
    if any(h != records.header for h in records.headers[1:]):
        raise MergeError(f"merge: {path} has {len(records.headers)} different run headers: two runs wrote into "
                         "one folder, so which options its cases ran with is unknown.\nNote: rerun that shard into "
                         "an empty folder")
    return run_dir, records.header, list(records.cases.values()), records.end, records.where


def _check_agree(runs: list[RunRecords]) -> None:
    """``MergeError`` naming the run and key when a run's header differs from the first's on ``MUST_AGREE``."""
    first_dir, first, _, _, _ = runs[0]
    for run_dir, header, _, _, _ in runs[1:]:
        for key in MUST_AGREE:
            if header.get(key) != first.get(key):
                raise MergeError(f"merge: {run_dir} has {key} = {safe(repr(header.get(key)), 300)}, {first_dir} has "
                                 f"{safe(repr(first.get(key)), 300)}")


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
    first_dir, first, _, _, _ = runs[0]
    differing = []
    for run_dir, header, _, _, _ in runs[1:]:
        for key in IDENTITY:
            if _identity_of(header, key) == _identity_of(first, key):
                continue
            differing.append(key)
            if not allow_mixed:
                mine, theirs = ((_gpu_summary(h) if key == "gpu" else h.get(key)) for h in (header, first))
                raise MergeError(f"merge: {run_dir} ran on another {'device' if key == 'gpu' else key} than {first_dir}: "
                                 f"{safe(repr(mine), 300)} vs {safe(repr(theirs), 300)}; results from different devices, drivers or ONNX Runtime "
                                 "versions are not one run. Note: pass --allow-mixed to merge anyway (the merged "
                                 "header then lists each shard's identity under 'mixed')")
    return sorted(set(differing))


def _join_cases(runs: list[RunRecords]) -> tuple[list[CaseLine], dict[str, str]]:
    """Every case line once, sorted by id, and id -> the run folder it came from.
    ``MergeError`` when an id is in two runs."""
    source: dict[str, str] = {}
    lines: list[CaseLine] = []
    for run_dir, _, cases, _, _ in runs:
        for line in cases:
            if line["id"] in source:
                raise MergeError(f"merge: case {safe(line['id'])!r} is in both {source[line['id']]} and {run_dir}")
            source[line["id"]] = run_dir
            lines.append(line)
    lines.sort(key=lambda line: line["id"])
    return lines, source


def _plan_case_folders(lines: list[CaseLine], source: dict[str, str], out_dir: str
                       ) -> list[tuple[Path, Path]]:
    """What copying each case's folder (its ``artifacts`` path) from its run into ``out_dir``
    takes, checked whole before anything is copied; ``MergeError`` when a line's ``artifacts``
    is not its case's folder or the folder holds a link or something not a regular file. A
    folder the line names but the shard no longer has is left out (the report says so)."""
    pairs: list[tuple[Path, Path]] = []
    for line in lines:
        artifacts = line.get("artifacts")
        if not artifacts:
            continue
        if artifacts != case_dir(line["id"]):
            raise MergeError(f"merge: {source[line['id']]}: case {safe(line['id'])!r} says its folder is "
                             f"{safe(artifacts)!r}; a case's folder is {case_dir(line['id'])!r} (the line was "
                             "edited, or written by something else)")
        if not os.path.isdir(os.path.join(source[line["id"]], artifacts)):
            continue
        try:
            pairs += plan_copy(source[line["id"]], artifacts, out_dir, "case folder")
        except FileRefused as exc:
            raise MergeError(f"merge: {exc}") from None
    return pairs


def _merged_header(runs: list[RunRecords], command: str) -> dict[str, Any]:
    """The first run's header without ``shard``; ``command`` (or the first's), the earliest
    ``started``, the summed ``case_count`` and ``shards`` (where and how each part ran)."""
    first = runs[0][1]
    header = {key: value for key, value in first.items() if key not in ("shard", "command")}
    header.update(
        command=command or first.get("command", ""),
        started=min(h.get("started") or "" for _, h, _, _, _ in runs),
        case_count=sum(int(h.get("case_count") or 0) for _, h, _, _, _ in runs),
        shards=[{"run": os.path.abspath(d), "shard": h.get("shard"), "case_count": h.get("case_count"),
                 "command": h.get("command"), "machine": h.get("machine"), "started": h.get("started"),
                 "gpu": _gpu_summary(h)}
                for d, h, _, _, _ in runs])
    return header


def _check_shards(runs: list[RunRecords], allow_partial: bool) -> None:
    """``MergeError`` unless the runs are all unsharded, or distinct shards of one ``K/N`` split
    with none missing (``allow_partial`` lets shards be missing)."""
    shards = [h.get("shard") for _, h, _, _, _ in runs]
    if not any(shards):
        return
    if not all(shards):
        raise MergeError("merge: some runs are shards (--shard K/N) and some are not")
    try:
        parsed = [parse_shard(str(s)) for s in shards]
    except ValueError as exc:
        raise MergeError(f"merge: a run header's shard is not K/N: {exc}") from None
    totals = {n for _, n in parsed}
    if len(totals) != 1:
        raise MergeError(f"merge: runs come from different splits: {safe(sorted(set(shards)))}")
    total = totals.pop()
    present = sorted(k for k, _ in parsed)
    if len(set(present)) != len(present):
        raise MergeError(f"merge: a shard is given twice: {safe(sorted(shards))}")
    missing_count = total - len(present)  # N comes from a file: never build range(1, N + 1)
    if missing_count and not allow_partial:
        given = set(present)
        first = [k for k in range(1, len(present) + 11) if k not in given and k <= total][:10]
        more = f" and {missing_count - len(first)} more" if missing_count > len(first) else ""
        raise MergeError(f"merge: shard(s) {', '.join(f'{k}/{total}' for k in first)}{more} missing "
                         "(pass --allow-partial to merge anyway)")
