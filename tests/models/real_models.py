"""The shipped torchvision corpus (tests/data/models/, described by its manifest.json) as the model
tests use it: the files, their recorded inputs as .npz files, and what the manifest says
attribution must find in each."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np

CORPUS = Path(__file__).resolve().parent.parent / "data" / "models"
MANIFEST = json.loads((CORPUS / "manifest.json").read_text())
ENTRIES = {e["file"]: e for e in MANIFEST["models"]}
ATTRIBUTED = ("RoiAlign", "MaxRoiPool", "MaxPool")
#: (file, recorded input) of every seeded run in the manifest.
RUNS = [(e["file"], r["input"]) for e in MANIFEST["models"] for r in e["seeded_runs"]]


def recorded_input(folder: Path, file: str, run_name: str) -> Path:
    """The manifest's recorded input of ``file`` for run ``run_name``, written as an .npz for
    ``model run --inputs`` (the recipe of tests/data/models/README.md)."""
    entry = ENTRIES[file]
    run = next(r for r in entry["seeded_runs"] if r["input"] == run_name)
    spec = entry["inputs"][0]
    image = np.random.default_rng(MANIFEST["input_seed"]).random(tuple(spec["shape"]), dtype=np.float32)
    path = folder / f"{Path(file).stem}-{run_name}.npz"
    np.savez(path, **{spec["name"]: image * np.float32(run["scale"])})
    return path


def expected_counts(file: str) -> tuple[int, int]:
    """``(top-level, in subgraphs)`` RoiAlign / MaxRoiPool / MaxPool nodes of ``file``, per the manifest."""
    nodes = ENTRIES[file]["nodes"]
    return (sum(nodes["top_level"][op] for op in ATTRIBUTED), sum(nodes["in_subgraphs"][op] for op in ATTRIBUTED))


def zero_roi_nodes(file: str, run_name: str) -> list[str]:
    """The RoiAlign nodes the manifest records as fed no ROI in that run."""
    run = next(r for r in ENTRIES[file]["seeded_runs"] if r["input"] == run_name)
    return list(run.get("zero_roi_nodes", []))
