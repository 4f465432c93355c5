"""Rebuild the repro folder of every corpus case found on one EP, from a fresh run of the corpus there.

    python tools/refresh_corpus_repros.py tests/corpus --ep cpu
    .venv-openvino/bin/python tools/refresh_corpus_repros.py tests/corpus --ep openvino

For each case folder whose ``case.json`` says it was found on ``--ep``, the corpus runs on that EP
(``ep-testbed run --corpus DIR --tier smoke -k corpus-<ep>``), the case's repro bundle is built
from the run's case folder exactly as ``ep-testbed fuzz --corpus-out`` builds it (the report's
bundle: it applies the run's tolerance rule and exits 1 on a failure), replaces ``repro/``, and
``repro.py`` runs once so that ``case.json``'s ``repro.prints`` records what it prints. Use it
when the bundle format changes; ``tests/corpus/test_corpus.py`` then checks each folder alone.
"""

from __future__ import annotations

import argparse
import json
import shutil
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from ep_testbed.harness.cli import main as cli_main  # noqa: E402
from ep_testbed.harness.fuzz.corpus import CASE_FILE, REPRO_DIR, _write_bundle, load_corpus  # noqa: E402
from ep_testbed.harness.results import read_run  # noqa: E402


def main(argv: list[str] | None = None) -> int:
    """Refresh the repro folders (module docstring); 0 when every one was rebuilt."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("corpus")
    parser.add_argument("--ep", required=True, help="EP alias the cases were found on (cpu, openvino, ...)")
    args = parser.parse_args(argv)
    entries = [e for e in load_corpus(args.corpus) if e.found.get("ep_alias") == args.ep]
    with tempfile.TemporaryDirectory(prefix="corpus-refresh-") as root:
        run_dir = str(Path(root) / "run")
        cli_main(["run", "--ep", args.ep, "--corpus", args.corpus, "--tier", "smoke", "-k", f"corpus-{args.ep}-",
                  "--out", run_dir, "--no-progress", "--jobs", "1"])
        header, lines, _ = read_run(run_dir)
        by_id = {line["id"]: line for line in lines}
        missing = 0
        for entry in entries:
            line = by_id.get(entry.case.id)
            if line is None or not line.get("artifacts"):
                print(f"{entry.case.id}: the run kept no case folder; left as it was")
                missing += 1
                continue
            shutil.rmtree(Path(entry.path) / REPRO_DIR, ignore_errors=True)
            prints = _write_bundle(entry.path, entry.case.id, header or {}, run_dir, line)
            meta_path = Path(entry.path) / CASE_FILE
            meta = json.loads(meta_path.read_text(encoding="utf-8"))
            meta["repro"] = {"provider": str((header or {}).get("ep")), "prints": prints}
            meta_path.write_text(json.dumps(meta, indent=2, default=str) + "\n", encoding="utf-8")
            print(f"{entry.case.id}: {line['outcome']}; repro.py prints {prints.splitlines()[0] if prints else '-'}")
    return 1 if missing else 0


if __name__ == "__main__":
    sys.exit(main())
