"""Model baselines: a run's outputs stored as plain files, and the check against them.

A baseline folder holds three files, readable with NumPy and any JSON tool:

- ``manifest.json``: format, model sha256 and name, the inputs' seed and source, EP and alias,
  the device (the run header's one-line identity), ONNX Runtime flavour and version, the
  tolerances in force, each output's dtype and shape, time;
- ``outputs.npz``: the EP's outputs by graph output name;
- ``inputs.npz``: the exact inputs fed, so a later run compares like with like even if input
  generation changes.

``save_baseline`` writes them (into a folder that holds nothing yet, unless ``overwrite``);
``Baseline.load`` reads them back through ``harness.core.untrusted_files`` (regular files inside the
folder, no pickles, sizes capped), holds the manifest to ``MANIFEST_SCHEMA``, and refuses a
folder that is incomplete, tampered with or was recorded for another model (``BaselineError``);
``Baseline.compare`` judges new outputs with the harness's tolerance rule and reports ``match``
or ``regression`` per output. ``model run --baseline`` uses the tolerances recorded in the
manifest unless ``--tol`` / ``--tolerances`` are given. A baseline is the regression gate of the
EP it was saved on: ``check_ep`` refuses one saved on another EP (that difference is drift
between EPs, judged by ``--drift-tol``), and a different recorded device is named in the result.
"""

from __future__ import annotations

import datetime as _dt
import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Mapping

import numpy as np

from ..core.results import INT, LIST, NULL, OBJECT, STR, a_kind, kind_of
from ..core.tolerances import Tolerances
from ..core.untrusted_files import (
    FileRefused,
    inside,
    output_folder,
    read_arrays,
    read_json,
    write_arrays,
    write_output,
)
from .outputs import compare_named

FORMAT = "ep-testbed-model-baseline/1"
MANIFEST = "manifest.json"
OUTPUTS = "outputs.npz"
INPUTS = "inputs.npz"


class BaselineError(ValueError):
    """A baseline folder that cannot be used for this model; the message says why."""


#: Where in the manifest (dotted path) -> the JSON kinds allowed there (``results.kind_of``).
MANIFEST_SCHEMA: dict[str, tuple[str, ...]] = {
    "format": (STR,), "created": (STR, NULL), "model": (OBJECT,), "model.name": (STR, NULL), "model.sha256": (STR,),
    "inputs": (OBJECT, NULL), "inputs.seed": (INT, NULL), "inputs.source": (STR, NULL), "inputs.names": (LIST, NULL),
    "ep": (STR, NULL), "ep_alias": (STR, NULL), "ort_flavour": (STR, NULL), "ort_version": (STR, NULL),
    "tolerances": (OBJECT, NULL), "outputs": (OBJECT, NULL), "device": (STR, NULL),
}


def check_manifest(manifest: Any, path: Any) -> None:
    """``BaselineError`` naming the manifest and the key whose value is not of a kind
    ``MANIFEST_SCHEMA`` allows (a tampered or foreign file)."""
    if not isinstance(manifest, dict) or manifest.get("format") != FORMAT:
        raise BaselineError(f"--baseline {path}: not a {FORMAT} manifest")
    for where, kinds in MANIFEST_SCHEMA.items():
        parent, _, key = where.rpartition(".")
        holder = manifest.get(parent) if parent else manifest
        value = holder.get(key) if isinstance(holder, dict) else None
        found = kind_of(value)
        if found not in kinds:
            raise BaselineError(f"--baseline {path}: {where} is {a_kind(found)}, it must be {' or '.join(kinds)} "
                                "(the manifest was edited or is not a baseline's); save the baseline again")


def save_baseline(folder: str | Path, result: Mapping[str, Any], inputs: Mapping[str, np.ndarray],
                  outputs: Mapping[str, np.ndarray], seed: int | None, inputs_source: str) -> Path:
    """Write ``manifest.json``, ``outputs.npz`` and ``inputs.npz`` for a finished model run (the
    caller has checked that ``folder`` holds nothing it would overwrite: ``run_folder``)."""
    out = output_folder(folder)
    for name, arrays in ((OUTPUTS, outputs), (INPUTS, inputs)):
        write_arrays(out / name, arrays)
    manifest = {
        "format": FORMAT,
        "created": _dt.datetime.now(_dt.timezone.utc).isoformat(timespec="seconds"),
        "model": {"name": result["model"]["name"], "sha256": result["model"]["sha256"]},
        "inputs": {"seed": seed, "source": inputs_source, "names": list(inputs)},
        "ep": result["ep"]["provider"], "ep_alias": result["ep"]["alias"],
        "device": (result.get("gpu") or {}).get("summary") if isinstance(result.get("gpu"), dict) else None,
        "ort_flavour": result.get("ort_flavour"), "ort_version": result.get("ort_version"),
        "tolerances": result["tolerances"],
        "outputs": {k: {"dtype": np.asarray(v).dtype.name, "shape": list(np.shape(v))} for k, v in outputs.items()},
    }
    write_output(out / MANIFEST, json.dumps(manifest, indent=2) + "\n")
    return out


@dataclass
class Baseline:
    """A loaded baseline folder."""

    folder: Path
    manifest: dict[str, Any]
    outputs: dict[str, np.ndarray]
    inputs: dict[str, np.ndarray]

    def check_ep(self, provider: str) -> None:
        """``BaselineError`` when the baseline was saved on another EP than ``provider``: a baseline
        gates regressions on the EP (and device) it was saved on; against another EP every
        difference would be drift between EPs, which ``--drift-tol`` judges, not a regression."""
        recorded = self.manifest.get("ep")
        if recorded and recorded != provider:
            raise BaselineError(f"--baseline {self.folder}: saved on {recorded}, this run tests {provider}; a baseline "
                                f"gates regressions on the EP it was saved on. Note: save one on {provider} with "
                                "--save-baseline DIR, and judge drift between the two EPs with --drift-tol")

    def device_note(self, device: str | None) -> str | None:
        """A note when the baseline's recorded device differs from ``device`` (None when it does not,
        or either is unknown): the outputs may then move with the device, not the software."""
        recorded = self.manifest.get("device")
        if not recorded or not device or recorded == device:
            return None
        return f"saved on device {recorded!r}, this run is on {device!r}: a regression may be the device's"

    def recorded_tolerances(self) -> Tolerances:
        """The tolerances the baseline was saved with (the harness defaults if it names none)."""
        table = self.manifest.get("tolerances")
        try:
            return Tolerances.from_json(table) if isinstance(table, dict) else Tolerances.defaults()
        except ValueError as exc:
            raise BaselineError(f"--baseline {self.folder}: the manifest's tolerances are not a tolerance table "
                                f"({exc})") from None

    @classmethod
    def load(cls, folder: str | Path, model_sha256: str | None = None) -> "Baseline":
        """Read the baseline in ``folder``; ``BaselineError`` naming the file when it is incomplete,
        unreadable, tampered with, or (given ``model_sha256``) recorded for another model file."""
        root = Path(folder)
        try:
            paths = {name: inside(root, name, "baseline file") for name in (MANIFEST, OUTPUTS, INPUTS)}
        except FileRefused as exc:
            raise BaselineError(f"--baseline {exc}") from None
        for name, path in paths.items():
            if not path.is_file():
                raise BaselineError(f"--baseline {root}: {name} is missing (a baseline folder holds {MANIFEST}, "
                                    f"{OUTPUTS} and {INPUTS}; write one with --save-baseline)")
        try:
            manifest = read_json(paths[MANIFEST], "baseline manifest")
        except FileRefused as exc:
            raise BaselineError(f"--baseline {exc}") from None
        check_manifest(manifest, root / MANIFEST)
        recorded = manifest["model"]["sha256"]
        if model_sha256 is not None and recorded != model_sha256:
            raise BaselineError(f"--baseline {root}: recorded for model sha256 {recorded[:80]}, this model is "
                                f"{model_sha256}; a baseline only applies to the exact model file it was saved for")
        return cls(root, manifest, _load_npz(paths[OUTPUTS]), _load_npz(paths[INPUTS]))

    def compare(self, outputs: Mapping[str, np.ndarray], tolerances: Tolerances,
                tolerances_from: str = "command line") -> dict[str, Any]:
        """Per output: the stored value vs ``outputs`` under ``tolerances``; ``regression`` if any differs."""
        rows = compare_named(self.outputs, outputs, tolerances)
        for name in outputs:
            if name not in self.outputs:
                rows.append({"name": name, "outcome": "fail", "message": "not in the baseline", "errors": {},
                             "mismatches": None, "ties": 0, "worst": []})
        regressed = [r["name"] for r in rows if r["outcome"] == "fail"]
        return {
            "dir": str(self.folder), "outcome": "regression" if regressed else "match", "regressed": regressed,
            "tolerances": tolerances.to_json(), "tolerances_from": tolerances_from,
            "outputs": rows,
            "recorded": {k: self.manifest.get(k) for k in ("created", "ep", "device", "ort_flavour", "ort_version")}
            | {"seed": (self.manifest.get("inputs") or {}).get("seed")},
        }


def _load_npz(path: Path) -> dict[str, np.ndarray]:
    """The arrays of an ``.npz`` (``untrusted_files.read_arrays``); ``BaselineError`` naming the file otherwise."""
    try:
        return read_arrays(path, "baseline arrays")
    except FileRefused as exc:
        raise BaselineError(f"--baseline {exc}") from None
