"""Case folders: everything needed to reproduce one case without the testbed.

``RUN_DIR/cases/<safe-id>/`` (``harness.core.results.case_dir``: the folder name ``ep-testbed gen``
uses too) holds ``model.onnx``, ``inputs.npz`` (keyed by ONNX input name,
ready for ``session.run``), ``desc.json`` (the desc in DirectML's spelling), ``expected.npz``
(the reference) and ``actual.npz`` (what the EP returned), both keyed by DML output name.
A file is left out when it does not exist (no model for an inexpressible case, no actual
outputs for a crash). A run folder may hold planted links: the folders and files are made
with ``untrusted_files.output_folder`` / ``open_output``, which never write through a link.
"""

from __future__ import annotations

import json
import os
from typing import Any, Mapping

import numpy as np

from ...reference import desc_to_dml
from ..core.results import case_dir
from ..core.untrusted_files import open_output, output_folder, write_arrays


def write_artifacts(run_dir: str, case_id: str, *, desc: Any = None, model: Any = None,
                    feeds: Mapping[str, np.ndarray] | None = None,
                    expected: Mapping[str, np.ndarray] | None = None,
                    actual: Mapping[str, np.ndarray] | None = None,
                    allowance: Mapping[str, np.ndarray] | None = None,
                    extra: Mapping[str, Any] | None = None) -> str:
    """Write whatever is given into the case's folder (``case_dir(case_id)`` under ``run_dir``);
    returns that relative path, as result lines record it."""
    relative = case_dir(case_id)
    folder = str(output_folder(run_dir, relative))
    if desc is not None:
        _write_json(os.path.join(folder, "desc.json"), desc_to_dml(desc))
    if model is not None:
        data = model if isinstance(model, (bytes, bytearray)) else model.SerializeToString()
        with open_output(os.path.join(folder, "model.onnx")) as f:
            f.write(data)
    for name, arrays in (("inputs.npz", feeds), ("expected.npz", expected), ("actual.npz", actual),
                         ("allowance.npz", allowance)):
        if arrays is not None:
            write_arrays(os.path.join(folder, name), arrays)
    if extra:
        _write_json(os.path.join(folder, "case.json"), {"id": case_id, **extra})
    return relative


def _write_json(path: str, data: Any) -> None:
    """``data`` as indented JSON; values JSON lacks are written as their ``str``."""
    with open_output(path, "w") as f:
        json.dump(data, f, indent=2, default=str)
        f.write("\n")
