"""``ep-testbed findings RUN_DIR [--out DIR]``: a run's failures as distinct findings, ready to file.

Groups the failing cases of a run folder (``run``, ``fuzz``, ``merge``) by how they fail -- the
operator, data type, failure signature and where it occurs (shared with the second EP or only on
this one) -- keeps the smallest case of each (for a fuzz run, the shrunk ``-min`` case when there
is one), and writes per finding a Markdown text an EP's maintainers can act on with a repro bundle
that needs numpy and onnxruntime alone (``reports.findings``), plus an index (``README.md``,
``findings.json``). Nothing is run.

Exit codes: 0 written (also when the run has no failing case: the index says so), 2 bad input
(no readable results.jsonl, a file in the way, ``--out`` holding files without ``--overwrite``).
"""

from __future__ import annotations

import argparse
import os
import re
import shutil
import sys
from pathlib import Path

from ...reports import ResultsError
from ...reports.findings import FINDINGS_DIR, INDEX_JSON, write_findings
from ..core import exit_codes
from ..core.terminal import safe, safe_message
from ..core.untrusted_files import FileRefused, read_json
from ..run.run_folder import FolderBusy, refuse_overwrite
from .common import usage_error
from .options import add_out, add_overwrite

#: The folder names ``reports.findings.Finding.slug`` gives: the only ones ``--overwrite`` removes.
_SLUG = re.compile(r"^\d{2,}-[a-z0-9_]+-[a-z0-9]+-[0-9a-f]{8}$")


def add(subparsers: argparse._SubParsersAction) -> None:
    """Register ``findings RUN_DIR [--out DIR] [--overwrite]``."""
    p = subparsers.add_parser("findings", help="group a run's failures into distinct findings, each ready to file",
                              description="Group the failing cases of RUN_DIR by operator, data type, how they fail "
                                          "and where (shared with the second EP or only on this one); keep the "
                                          "smallest case of each (a fuzz run's shrunk case when there is one); write "
                                          "per finding FINDING.md (versions, device, expected vs got, what the "
                                          "reference expects and why, how to reproduce it) with a repro bundle that "
                                          "needs numpy and onnxruntime alone. Nothing is run.",
                              epilog="exit codes: 0 written (also when nothing failed), 2 bad input")
    p.add_argument("run_dir", type=Path, metavar="RUN_DIR", help="a run folder (run, fuzz, merge)")
    add_out(p.add_argument, f"RUN_DIR/{FINDINGS_DIR}", what="where to write the findings", type=Path)
    add_overwrite(p.add_argument, "what --out already holds (the findings written there before are replaced)")
    p.set_defaults(func=findings_command)


def findings_command(args: argparse.Namespace) -> int:
    """Write the findings of ``args.run_dir`` (module docstring); print where; 0, or 2 with one message."""
    out = args.out if args.out is not None else args.run_dir / FINDINGS_DIR
    if not (args.run_dir / "results.jsonl").is_file():
        return usage_error(f"findings: {args.run_dir / 'results.jsonl'} does not exist.\nNote: pass a folder written "
                           "by `ep-testbed run`, `fuzz` or `merge`")
    try:
        refuse_overwrite(out, args.overwrite)
        _clear_previous(out)
        written = write_findings(args.run_dir, out)
    except (FolderBusy, ResultsError, FileRefused) as exc:
        return usage_error(f"findings: {exc}")
    except OSError as exc:  # a full disk, a read-only folder: every file is whole or absent (core.atomic_files)
        return usage_error(f"findings: writing into {out} failed ({exc.strerror or exc}); results.jsonl is untouched."
                           f"\nNote: make room, then run `ep-testbed findings {args.run_dir} --out {out} --overwrite`")
    grouped = written.grouped
    for note in written.skipped:  # a case on a skipped line is in no finding: say so before the count
        print(f"ep-testbed findings: note: {safe(args.run_dir / 'results.jsonl')}: {note}", file=sys.stderr)
    if not grouped.findings:
        print(f"no finding: no case of {safe(args.run_dir)} failed (fail, crash, timeout, error); "
              f"{grouped.known} known, {grouped.fixed} fixed")
    else:
        print(f"{grouped.failing} failing case(s) of {safe(args.run_dir)} in {len(grouped.findings)} distinct "
              f"finding(s):")
        for folder, finding in zip(written.folders, grouped.findings):
            print(f"  {safe(folder.name)}: {safe(finding.title(), 300)}: {finding.count} case(s), smallest "
                  f"{safe(finding.case_id, 200)}")
    if written.unbundled:
        print(f"note: {len(written.unbundled)} finding(s) have no repro bundle (their cases kept no case folder): "
              f"{', '.join(safe(i, 120) for i in written.unbundled[:5])}", file=sys.stderr)
    print(f"index: {safe_message(str(written.index))}")
    return exit_codes.OK


def _clear_previous(out: Path) -> None:
    """Remove the finding folders an earlier ``findings`` wrote into ``out`` (named in its
    findings.json, of the form its folders take, real folders inside ``out``), so the index and
    the folders agree; nothing else in ``out`` is touched."""
    index = out / INDEX_JSON
    if not index.is_file() or index.is_symlink():
        return
    try:
        listed = read_json(index, "findings index").get("findings") or []
    except (FileRefused, AttributeError):
        return
    for entry in listed if isinstance(listed, list) else []:
        name = entry.get("folder") if isinstance(entry, dict) else None
        folder = out / name if isinstance(name, str) and _SLUG.match(name) else None
        if folder is not None and folder.is_dir() and not folder.is_symlink():
            shutil.rmtree(folder)
    os.remove(index)
