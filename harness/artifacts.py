"""Case folders: everything needed to reproduce one case without the testbed.

``RUN_DIR/cases/<safe-id>/`` holds ``model.onnx``, ``inputs.npz`` (keyed by ONNX input name,
ready for ``session.run``), ``desc.json`` (the desc in DirectML's spelling), ``expected.npz``
(the reference) and ``actual.npz`` (what the EP returned), both keyed by DML output name.
A file is left out when it does not exist (no model for an inexpressible case, no actual
outputs for a crash).
"""

from __future__ import annotations

import hashlib
import json
import os
import re
from typing import Any, Mapping

import numpy as np

CASES_DIR = "cases"


def safe_id(case_id: str) -> str:
    """A folder name for a case id, portable to Windows, unique via a short hash of the id."""
    readable = re.sub(r"[^A-Za-z0-9._+=-]+", "_", case_id).strip("._")[:120]
    return f"{readable}-{hashlib.sha1(case_id.encode()).hexdigest()[:8]}"


def case_dir(case_id: str) -> str:
    """The artifacts path of a case relative to the run folder (as written in result lines)."""
    return f"{CASES_DIR}/{safe_id(case_id)}"


def write_artifacts(run_dir: str, case_id: str, *, desc: Any = None, model: Any = None,
                    feeds: Mapping[str, np.ndarray] | None = None,
                    expected: Mapping[str, np.ndarray] | None = None,
                    actual: Mapping[str, np.ndarray] | None = None,
                    extra: Mapping[str, Any] | None = None) -> str:
    """Write whatever is given into the case's folder; returns its relative path."""
    relative = case_dir(case_id)
    folder = os.path.join(run_dir, relative)
    os.makedirs(folder, exist_ok=True)
    if desc is not None:
        from ep_testbed.reference import desc_to_dml

        _write_json(os.path.join(folder, "desc.json"), desc_to_dml(desc))
    if model is not None:
        data = model if isinstance(model, (bytes, bytearray)) else model.SerializeToString()
        with open(os.path.join(folder, "model.onnx"), "wb") as f:
            f.write(data)
    for name, arrays in (("inputs.npz", feeds), ("expected.npz", expected), ("actual.npz", actual)):
        if arrays is not None:
            np.savez(os.path.join(folder, name), **{k: np.asarray(v) for k, v in arrays.items()})
    if extra:
        _write_json(os.path.join(folder, "case.json"), {"id": case_id, **extra})
    return relative


def _write_json(path: str, data: Any) -> None:
    with open(path, "w", encoding="utf-8") as f:
        json.dump(data, f, indent=2, default=str)
        f.write("\n")
