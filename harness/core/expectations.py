"""Known divergences as data: ``harness/expectations/<ep-alias>.json``.

A file holds a list of expectations, each::

    {"id": "roi_pooling/*",            # fnmatch pattern over case ids (case-sensitive)
     "tags": {"dtype": "float32"},     # optional: every listed tag must equal the case's
     "flags": [{"field": "ReductionFunction", "value": "MAX", "kind": "diverges"}],
                                       # optional: the mapper must have raised each of these flags
                                       # (only the keys given are compared)
     "predicted": [{"field": "PooledSize", "kind": "diverges"}],
                                       # optional: the EP's predictor (below) must predict each of
                                       # these for the case (only the keys given are compared)
     "onnxruntime": ">=1.29",          # optional: the ONNX Runtime versions the entry holds for
     "applies_to": ["onnxruntime-kernels", "OpenVINOExecutionProvider"],
                                       # optional: where the cause applies (below)
     "shows_when": {"flags": [{"field": "ReductionFunction", "shows": true}]},
                                       # optional: when the cause can show (below)
     "ep_package": "onnxruntime-ep-webgpu>=0.4",
                                       # optional: the package providing the EP (a plugin package,
                                       # else the onnxruntime wheel) and its versions; or a list
                                       # of such, any of which will do
     "outcome": "fail",                # or a list, e.g. ["fail", "crash"]
     "strict": true,                   # optional, default true (see below)
     "reason": "one sentence: what differs and why",
     "link": "https://github.com/... (the public issue, or the source line when there is none)",
     "predicted_from": "file Lnn: ...",
                                       # optional: the entry is a prediction read from that source line
     "observed_on": {"device": "llvmpipe (LLVM 15.0.6, 256 bits)", "emulated": true,
                     "directml": "1.15.4", "onnxruntime-directml": "1.24.4"},
                                       # optional: where the cause was seen (the device, whether it
                                       # is emulated, and the versions that matter), with
     "evidence": "what the EP returned against the reference, and the smallest case that shows it",
     "emulated_device": true}          # optional: the cause is the emulated device, not the EP (below)

The first expectation that matches a case applies. A case whose outcome is one it expects
becomes ``known``; one that passes (``pass``/``tie-only``) becomes ``fixed`` -- counted as a
failure, like a strict xfail, so a fix is noticed and the entry removed -- unless the entry
says ``"strict": false`` (a divergence that only some inputs reveal), where a pass stays a
pass. Any other outcome stays as it is (a crash where a numeric failure was expected is news).

``onnxruntime`` is a comma-separated list of ``>=``, ``>``, ``<=``, ``<``, ``==``, ``!=``
clauses over release numbers (``">=1.24,<1.29"``); an entry whose range excludes the ONNX
Runtime in use is inactive (``Expectations.inactive``), as if absent. ``ep_package`` is a
distribution name followed by the same clauses (``"onnxruntime-ep-webgpu>=0.4"``,
``"onnxruntime-openvino<1.25"``; no clause: any version): the entry holds only when that package
provides the EP under test (the caller says which: ``harness.eps.adapters.ep_package``, a plugin
package or else the onnxruntime wheel); when the caller names none, such entries are inactive.

An entry names its cause once and says where it applies: ``applies_to`` lists provider names
(``CUDAExecutionProvider``), ``--ep`` aliases (``cuda``) and classes of EPs (``EP_CLASSES``: e.g.
``onnxruntime-kernels``, ONNX Runtime's own kernels, which follow the ONNX spec: the CPU EP and
its CUDA, ROCm and WebGPU counterparts; DirectML and OpenVINO map nodes to libraries with their
own semantics and are in no class). Without it an entry applies to its file's ``"ep"`` (to any
EP when the file names none). ``for_ep`` reads the EP's own file, then ``shared.json``, whose
entries all say where they apply; an entry that does not apply to the EP is left out.

``emulated_device: true`` scopes an entry to an emulated device (``--ep dml-wine``: DirectML on
vkd3d and lavapipe): it is inactive unless the caller says the device is emulated, and a case it
explains is reported ``emulation-gap`` (not tested: the emulation, not the EP, decided it), never
``known``. ``observed_on`` and ``evidence`` are recorded on the case line with the rest of the entry.

``shows_when`` says when the cause can show, so that a case whose inputs cannot trigger it is
judged like any other case (no ``known``, no ``fixed``; the message says why): ``{"flags":
[...]}`` patterns over the line's flags, where the case runner gives a ``diverges`` flag whose ONNX
meaning it can compute ``"shows": true/false`` (``graphs.Mapping.meanings``: does that meaning
differ from the reference on these inputs?); or ``{"signature": {...}}``, keys of the raw failure's
signature (``harness.core.signature``: ``outcome``, ``kind``, ``outputs``, ``values``,
``diverging``) that must equal, so that only a failure of that shape is this cause (a pass has
no signature: a strict entry makes it ``fixed``, a ``"strict": false`` one leaves it alone, as
does any entry a case not tested, such as ``not-on-ep`` or ``emulation-gap``); a list of such
objects is any of them (``[{"values": "inf -> nan"}, {"values": "-inf -> nan"}]``); and/or
``{"inputs": [...]}``, classes of ``harness.core.signature.INPUT_CLASSES`` (``nan``, ``inf``,
``-inf``, ``huge``) of which the case's inputs must hold one (the line's ``input_extremes``), for a
cause only such values can trigger: a failure of its shape on other inputs is not that cause.

Entries with ``flags`` can only be decided once the case has been mapped, i.e. on its result
line; ``match`` without flags treats them as not matching. Entries with ``predicted`` need the
case itself (``match_case``): the predictor of the file's EP (``PREDICTORS``, e.g. the DirectML
EP's in ``harness.eps.dml_ep``) reads what that EP will do with the case's ONNX model from the EP's
public source; a predictor's answer is a list of dicts with ``node``, ``op_type``, ``field``,
``kind`` (``declined``: the EP does not take the node; ``diverges``: it builds a different
desc), ``value``, ``reason`` and ``source``.
"""

from __future__ import annotations

import fnmatch
import hashlib
import json
import os
import re
from dataclasses import dataclass
from typing import Any, Callable, Iterable, Mapping, Sequence

from .installed import ort_version as installed_ort_version
from .results import OUTCOMES, PASSING
from .signature import INPUT_CLASSES
from .signature import signature as failure_signature
from .untrusted_files import FileRefused, read_json

EXPECTATIONS_DIR = os.path.join(os.path.dirname(os.path.dirname(__file__)), "expectations")

#: Provider name -> "module:function" of its predictor (case -> list of prediction dicts).
PREDICTORS: dict[str, str] = {"DmlExecutionProvider": "ep_testbed.harness.eps.dml_ep:predict_case",
                              "WebGpuExecutionProvider": "ep_testbed.harness.eps.webgpu_ep:predict_case"}

#: Classes of EPs an entry's ``applies_to`` may name: class -> (what it is, its providers). An EP
#: joins a class only on evidence that it computes the class's semantics.
EP_CLASSES: dict[str, tuple[str, tuple[str, ...]]] = {
    "onnxruntime-kernels": (
        "ONNX Runtime's own kernels, which follow the ONNX spec (and the ONNX reference implementation): the CPU "
        "EP's, and their CUDA, ROCm and WebGPU counterparts in the same source tree",
        ("CPUExecutionProvider", "CUDAExecutionProvider", "ROCMExecutionProvider", "WebGpuExecutionProvider")),
}
#: The bundled file of causes several EPs share (every entry says where it applies).
SHARED_FILE = "shared.json"
#: The keys a ``shows_when`` signature pattern may name (``harness.core.signature.Signature``).
SIGNATURE_KEYS = ("outcome", "kind", "outputs", "values", "diverging")

Patterns = tuple[tuple[tuple[str, Any], ...], ...]


def _all_found(wanted: Patterns, found: list[Mapping[str, Any]]) -> bool:
    """Each pattern (key/value pairs) equals some item of ``found`` on the keys it gives."""
    return all(any(all(item.get(k) == v for k, v in pattern) for item in found) for pattern in wanted)


@dataclass(frozen=True)
class Expectation:
    """One entry of an expectations file."""

    id: str
    outcome: tuple[str, ...]
    reason: str
    link: str
    tags: tuple[tuple[str, str], ...] = ()
    flags: Patterns = ()
    strict: bool = True
    predicted: Patterns = ()
    onnxruntime: str = ""
    predicted_from: str = ""
    ep_package: tuple[str, ...] = ()
    applies_to: tuple[str, ...] = ()
    shows_flags: Patterns = ()
    shows_signature: tuple[tuple[tuple[str, Any], ...], ...] = ()
    shows_inputs: tuple[str, ...] = ()
    observed_on: tuple[tuple[str, Any], ...] = ()
    evidence: str = ""
    emulated_device: bool = False

    def applies(self, provider: str, alias: str) -> bool:
        """Whether the entry's cause applies to the EP ``provider`` (``--ep`` alias ``alias``):
        always without ``applies_to``; else when it names the provider, the alias or a class
        (``EP_CLASSES``) that holds the provider."""
        if not self.applies_to:
            return True
        return any(item == provider or item.lower() == alias.lower()
                   or provider in EP_CLASSES.get(item, ("", ()))[1] for item in self.applies_to)

    def shows(self, line: Mapping[str, Any]) -> bool:
        """Whether the cause can show on the case of the raw result ``line`` (module docstring,
        ``shows_when``): always without a condition."""
        if self.shows_flags and not _all_found(self.shows_flags, list(line.get("flags") or [])):
            return False
        if not self.inputs_can_show(line):
            return False  # only such inputs can show the cause: a failure on any other is not this one
        if self.shows_signature:
            shape = self._failure_has_shape(line)
            if shape is not None:
                return shape
            # a case that was not tested (not on the EP, inexpressible, an emulation gap) cannot show
            # a failure of that shape; a pass shows it only to a strict entry (which makes it fixed)
            return line.get("outcome") in PASSING and self.strict
        return True

    def _failure_has_shape(self, line: Mapping[str, Any]) -> bool | None:
        """Whether the case's failure has one of the ``shows_when.signature`` shapes (None: no
        failure signature to compare)."""
        found = failure_signature(dict(line))
        if found is None:
            return None
        data = found.to_json()
        return any(all(data.get(k) == (list(v) if isinstance(v, tuple) else v) for k, v in pattern)
                   for pattern in self.shows_signature)

    def came_near(self, line: Mapping[str, Any]) -> bool:
        """Whether a case this entry did not explain came near its cause, so that a note saying why
        it does not apply helps: its inputs could trigger it, or its failure has the cause's shape.
        A failure with neither (another op's bug on moderate inputs) gets no note: it is no news."""
        return self.inputs_can_show(line) or (bool(self.shows_signature) and bool(self._failure_has_shape(line)))

    def inputs_can_show(self, line: Mapping[str, Any]) -> bool:
        """Whether the case's inputs hold what ``shows_when.inputs`` needs (always without it)."""
        return not self.shows_inputs or bool(set(self.shows_inputs) & set(line.get("input_extremes") or ()))

    def shows_text(self) -> str:
        """The ``shows_when`` condition in words (for the note on a case it cannot show on)."""
        parts = [", ".join(f"{k}={v!r}" for k, v in p) for p in self.shows_flags]
        if self.shows_inputs:
            parts.append("inputs holding " + " or ".join(self.shows_inputs))
        if self.shows_signature:
            parts.append("a failure with " + " or ".join(", ".join(f"{k}={v!r}" for k, v in pattern)
                                                          for pattern in self.shows_signature))
        return "; ".join(parts)

    def matches(self, case_id: str, tags: Mapping[str, str] | None = None,
                flags: list[Mapping[str, Any]] | None = None,
                predicted: list[Mapping[str, Any]] | None = None) -> bool:
        """Whether the entry applies: id glob, tags, and (when it names any) flags and predictions;
        an entry that names flags or predictions never matches without them."""
        return self.has_flags_of(flags) and self.matches_case(case_id, tags, predicted)

    def matches_case(self, case_id: str, tags: Mapping[str, str] | None = None,
                     predicted: list[Mapping[str, Any]] | None = None) -> bool:
        """``matches`` but for the flags, which are known only once the case is mapped."""
        if not fnmatch.fnmatchcase(case_id, self.id):
            return False
        tags = tags or {}
        if not all(str(tags.get(k)) == v for k, v in self.tags):
            return False
        if self.predicted and (predicted is None or not _all_found(self.predicted, predicted)):
            return False
        return True

    def has_flags_of(self, flags: list[Mapping[str, Any]] | None) -> bool:
        """Whether a case mapped with ``flags`` (a result line's) holds every flag the entry names."""
        return not self.flags or (flags is not None and _all_found(self.flags, flags))

    def to_json(self) -> dict[str, Any]:
        """What a result line records as its ``expected_outcome``."""
        outcome: Any = self.outcome[0] if len(self.outcome) == 1 else list(self.outcome)
        data = {"outcome": outcome, "reason": self.reason, "link": self.link, "pattern": self.id,
                "strict": self.strict}
        if self.onnxruntime:
            data["onnxruntime"] = self.onnxruntime
        if self.ep_package:
            data["ep_package"] = self.ep_package[0] if len(self.ep_package) == 1 else list(self.ep_package)
        if self.predicted_from:
            data["predicted_from"] = self.predicted_from
        if self.applies_to:
            data["applies_to"] = list(self.applies_to)
        if self.observed_on:
            data["observed_on"] = dict(self.observed_on)
        if self.evidence:
            data["evidence"] = self.evidence
        if self.emulated_device:
            data["emulated_device"] = True
        return data


class Expectations:
    """The expectations of one EP, in file order (``inactive``: those outside their ``onnxruntime``
    range); ``predictor`` turns a case into the EP's predictions, for entries with ``predicted``."""

    def __init__(self, entries: Iterable[Expectation] = (), source: str | None = None,
                 inactive: Iterable[Expectation] = (), predictor: Callable[[Any], list] | None = None,
                 digest: str | None = None):
        """``entries`` in file order; ``source`` the file; ``inactive`` the entries outside their
        ``onnxruntime`` range; ``predictor`` the EP's (None: predicted entries never match);
        ``digest`` a sha256 of the file's content (recorded in run headers, so ``--resume``
        notices an edited file)."""
        self.entries = list(entries)
        self.source = source
        self.inactive = list(inactive)
        self.predictor = predictor
        self.digest = digest
        self._predictions: dict[tuple[str, Any], list] = {}

    def match(self, case_id: str, tags: Mapping[str, str] | None = None,
              flags: list[Mapping[str, Any]] | None = None,
              predicted: list[Mapping[str, Any]] | None = None) -> Expectation | None:
        """The first entry that applies to the case (``Expectation.matches``), or None."""
        for entry in self.entries:
            if entry.matches(case_id, tags, flags, predicted):
                return entry
        return None

    def match_case(self, case: Any, flags: list[Mapping[str, Any]] | None = None) -> Expectation | None:
        """``match`` for a case object (``id``, ``tags``, ``desc``, ``opset``), with the predictor's
        answer for it when some entry needs one (computed once per case id and seed)."""
        tags = getattr(case, "tags", None)
        return self.match(case.id, tags, flags, self.predictions(case))

    def settle(self, case: Any, line: dict[str, Any]) -> None:
        """Apply the case's expectation to its raw result ``line`` in place: ``expected_outcome``
        and the reported outcome (``apply``). The first entry that matches the case (id, tags,
        the line's flags, predictions) and whose cause can show on it (``Expectation.shows``)
        applies; when entries match but none can show, the case is judged like any other and the
        message says which known divergence these inputs cannot trigger."""
        flags = list(line.get("flags") or [])
        matched = [entry for entry in self.candidates(case) if entry.has_flags_of(flags)]
        chosen = settling(matched, line)
        quiet = [entry for entry in matched[:matched.index(chosen) if chosen else None] if entry.came_near(line)]
        line["expected_outcome"] = chosen.to_json() if chosen else None
        line["outcome"] = apply(line["outcome"], chosen)
        if line["outcome"] == "emulation-gap" and chosen is not None and chosen.emulated_device:
            line["message"] = (f"{line.get('message') or ''}; Note: not a result of the EP: the emulated device "
                               f"causes this ({chosen.reason[:200]})")
        # inputs a flag says cannot show the cause, or a numeric failure of another shape, are worth
        # a note; a pass, a crash or an untested case that a failure-shaped cause missed is not
        if chosen is None and quiet and (line["outcome"] == "fail" or any(e.shows_flags for e in quiet)):
            first = quiet[0]
            line["message"] = (f"{line.get('message') or ''}; Note: the known divergence {first.id!r} cannot show on "
                               f"these inputs ({first.shows_text()} does not hold), so the case is judged like any "
                               f"other: {first.reason[:160]}")

    def candidates(self, case: Any) -> tuple[Expectation, ...]:
        """The entries that may apply to ``case`` once it is mapped and run, in file order: those
        whose id, tags and predictions match it (``Expectation.matches_case``). A worker given
        them knows from a raw line alone whether ``settle`` will explain it (``settling``)."""
        tags, predicted = getattr(case, "tags", None), self.predictions(case)
        return tuple(entry for entry in self.entries if entry.matches_case(case.id, tags, predicted))

    def predictions(self, case: Any) -> list | None:
        """The predictor's answer for ``case`` (None without a predictor or predicted entries)."""
        if self.predictor is None or not any(e.predicted for e in self.entries):
            return None
        key = (case.id, getattr(case, "seed", None))
        if key not in self._predictions:
            self._predictions[key] = self.predictor(case)
        return self._predictions[key]

    def __len__(self) -> int:
        """The number of active entries."""
        return len(self.entries)


def settling(candidates: Sequence[Expectation], line: Mapping[str, Any]) -> Expectation | None:
    """The entry ``Expectations.settle`` applies to the raw ``line`` of a case whose candidates
    (``Expectations.candidates``) these are: the first that the line's flags match and whose cause
    can show on it; None when none does."""
    flags = list(line.get("flags") or [])
    return next((entry for entry in candidates if entry.has_flags_of(flags) and entry.shows(line)), None)


def apply(outcome: str, expectation: Expectation | None) -> str:
    """The reported outcome of a case whose raw outcome is ``outcome``: ``known`` when the entry
    expects it (``emulation-gap`` when the entry's cause is the emulated device)."""
    if expectation is None:
        return outcome
    if outcome in expectation.outcome:
        return "emulation-gap" if expectation.emulated_device else "known"
    if outcome in PASSING:
        return "fixed" if expectation.strict else outcome
    return outcome


_CLAUSE = re.compile(r"^\s*(>=|<=|==|!=|>|<)\s*(\d+(?:\.\d+)*)\s*$")
_COMPARE: dict[str, Callable[[tuple, tuple], bool]] = {
    ">=": lambda a, b: a >= b, "<=": lambda a, b: a <= b, ">": lambda a, b: a > b, "<": lambda a, b: a < b,
    "==": lambda a, b: a == b, "!=": lambda a, b: a != b}


def release(version: str) -> tuple[int, ...]:
    """``"1.24.4"`` -> ``(1, 24, 4)``; a local or pre-release suffix (``1.25.0.dev1``, ``1.24.4+cpu``)
    is ignored. ValueError when it starts with no number."""
    match = re.match(r"\d+(?:\.\d+)*", version.strip())
    if not match:
        raise ValueError(f"{version!r} is not a version number")
    return tuple(int(p) for p in match.group(0).split("."))


def parse_range(spec: str) -> list[tuple[str, tuple[int, ...]]]:
    """``">=1.24,<1.29"`` -> ``[(">=", (1, 24)), ("<", (1, 29))]``; ValueError saying the form."""
    clauses = []
    for clause in spec.split(","):
        found = _CLAUSE.match(clause)
        if not found:
            raise ValueError(f"onnxruntime {spec!r}: {clause.strip()!r} is not OP VERSION with OP one of "
                             f"{', '.join(_COMPARE)} (e.g. \">=1.24,<1.29\")")
        clauses.append((found.group(1), release(found.group(2))))
    return clauses


def in_range(version: str, spec: str) -> bool:
    """Whether ``version`` satisfies ``spec`` (module docstring); ValueError for a malformed spec."""
    have = release(version)
    for op, want in parse_range(spec):
        width = max(len(have), len(want))
        if not _COMPARE[op](have + (0,) * (width - len(have)), want + (0,) * (width - len(want))):
            return False
    return True


_PACKAGE = re.compile(r"^\s*([A-Za-z0-9][A-Za-z0-9._-]*)\s*(.*)$")


def parse_package(spec: str) -> tuple[str, str]:
    """``"onnxruntime-ep-webgpu>=0.4"`` -> ``("onnxruntime-ep-webgpu", ">=0.4")`` (name normalised to
    lower case with ``-``); ValueError saying the form."""
    found = _PACKAGE.match(spec)
    if not found:
        raise ValueError(f"ep_package {spec!r}: expected a distribution name and optional version clauses, "
                         "e.g. \"onnxruntime-ep-webgpu>=0.4\"")
    name, clauses = found.group(1).lower().replace("_", "-"), found.group(2).strip()
    if clauses:
        parse_range(clauses)
    return name, clauses


def package_holds(specs: Iterable[str], package: tuple[str, str] | None) -> bool:
    """Whether one of an entry's ``ep_package`` specs holds for the EP's ``(distribution, version)``
    (None: unknown, so none holds)."""
    if package is None:
        return False
    for spec in specs:
        name, clauses = parse_package(spec)
        if name != package[0].lower().replace("_", "-"):
            continue
        try:
            if not clauses or in_range(package[1], clauses):
                return True
        except ValueError:  # a version with no number (e.g. "unknown"): the range cannot be said to hold
            continue
    return False


def _package_specs(value: Any, where: str) -> tuple[str, ...]:
    """An entry's ``ep_package`` (one spec or a list of them) as a tuple, each checked; ValueError naming ``where``."""
    specs = [value] if isinstance(value, str) else value
    if not isinstance(specs, list) or not specs or not all(isinstance(v, str) and v for v in specs):
        raise ValueError(f'{where}: ep_package must be a string like "onnxruntime-ep-webgpu>=0.4" or a list of them')
    for spec in specs:
        try:
            parse_package(spec)
        except ValueError as exc:
            raise ValueError(f"{where}: {exc}") from None
    return tuple(specs)


#: Every key an entry may have (the module docstring says what each means).
ENTRY_KEYS = ("id", "tags", "flags", "predicted", "onnxruntime", "ep_package", "applies_to", "shows_when", "outcome",
              "strict", "reason", "link", "predicted_from", "observed_on", "evidence", "emulated_device")
#: What an entry's ``observed_on`` must say: on which device the cause was seen, and whether that
#: device is emulated (a result of an emulated device is never taken for a hardware one).
OBSERVED_ON_REQUIRED = ("device", "emulated")


def _patterns(item: dict[str, Any], key: str, where: str, example: str) -> Patterns:
    """The list of objects under ``item[key]`` as sorted key/value pairs; ValueError naming the entry."""
    value = item.get(key) or []
    if not isinstance(value, list) or not all(isinstance(f, dict) and f for f in value):
        raise ValueError(f"{where}: {key} must be a list of objects like {example}")
    return tuple(tuple(sorted(f.items())) for f in value)


def _check_fields(item: Any, where: str) -> tuple[str, ...]:
    """The entry's outcomes, once every field's type is checked; ValueError naming the field."""
    if not isinstance(item, dict):
        raise ValueError(f"{where}: expected an object")
    unknown = sorted(str(k) for k in item if k not in ENTRY_KEYS)
    if unknown:
        raise ValueError(f"{where}: unknown key {unknown[0]!r} (allowed: {', '.join(ENTRY_KEYS)})")
    missing = [k for k in ("id", "outcome", "reason", "link") if not item.get(k)]
    if missing:
        raise ValueError(f"{where}: missing {', '.join(missing)} (id, outcome, reason and link are required)")
    for key in ("id", "reason", "link", "onnxruntime", "predicted_from", "evidence"):
        if key in item and not isinstance(item[key], str):
            raise ValueError(f"{where}: {key} must be a string" + (' like ">=1.24,<1.29"' if key == "onnxruntime" else ""))
    outcome = item["outcome"]
    outcomes = tuple(outcome) if isinstance(outcome, list) else (outcome,)
    bad = [o for o in outcomes if not isinstance(o, str) or o not in EXPECTABLE]
    if bad or not outcomes:
        raise ValueError(f"{where}: outcome {bad[0] if bad else outcome!r} is not one of {', '.join(EXPECTABLE)}")
    tags = item.get("tags") or {}
    if not isinstance(tags, dict) or not all(isinstance(v, (str, int, float, bool)) for v in tags.values()):
        raise ValueError(f"{where}: tags must be an object of tag -> value, e.g. {{\"dtype\": \"float32\"}}")
    for key in ("strict", "emulated_device"):
        if not isinstance(item.get(key, key == "strict"), bool):
            raise ValueError(f"{where}: {key} must be true or false")
    if "observed_on" in item:
        _observed_on(item["observed_on"], where)
    if item.get("onnxruntime"):
        try:
            parse_range(item["onnxruntime"])
        except ValueError as exc:
            raise ValueError(f"{where}: {exc}") from None
    if "ep_package" in item:
        _package_specs(item["ep_package"], where)
    return outcomes


def _applies_to(item: dict[str, Any], where: str) -> tuple[str, ...]:
    """The entry's ``applies_to`` (default: every EP the file is used for); ValueError naming a bad item."""
    value = item.get("applies_to")
    if value is None:
        return ()
    if not isinstance(value, list) or not value or not all(isinstance(v, str) and v for v in value):
        raise ValueError(f"{where}: applies_to must be a non-empty list of provider names, --ep aliases or classes "
                         f"({', '.join(EP_CLASSES)})")
    for name in value:
        if name not in EP_CLASSES and not re.fullmatch(r"[A-Za-z0-9_]+ExecutionProvider|[a-z0-9_]+", name):
            raise ValueError(f"{where}: applies_to item {name!r} is not a provider name (e.g. CUDAExecutionProvider), "
                             f"an --ep alias (e.g. cuda) or a class ({', '.join(EP_CLASSES)})")
    return tuple(value)


def _shows_when(item: dict[str, Any], where: str
                ) -> tuple[Patterns, tuple[tuple[tuple[str, Any], ...], ...], tuple[str, ...]]:
    """The entry's ``shows_when`` as (flag patterns, signature patterns: any of them, input
    classes: any of them); ValueError naming the field."""
    value = item.get("shows_when")
    if value is None:
        return (), (), ()
    example = ('{"flags": [{"field": "ReductionFunction", "shows": true}]} or {"signature": {"values": "nan -> number"}, '
               '"inputs": ["nan", "inf"]}')
    if not isinstance(value, dict) or not value or set(value) - {"flags", "signature", "inputs"}:
        raise ValueError(f"{where}: shows_when must be an object with flags, signature and/or inputs, e.g. {example}")
    inputs = value.get("inputs", [])
    if not isinstance(inputs, list) or not all(isinstance(c, str) and c in INPUT_CLASSES for c in inputs):
        raise ValueError(f"{where}: shows_when.inputs must be a list of {', '.join(INPUT_CLASSES)} (the inputs hold "
                         "any of them), e.g. [\"nan\", \"inf\", \"-inf\"]")
    flags = _patterns(value, "flags", f"{where}: shows_when", '{"field": "ReductionFunction", "shows": true}')
    sig = value.get("signature") or {}
    patterns = sig if isinstance(sig, list) else [sig]
    if not patterns or not all(isinstance(p, dict) and not set(p) - set(SIGNATURE_KEYS) for p in patterns):
        raise ValueError(f"{where}: shows_when.signature must be an object with keys among {', '.join(SIGNATURE_KEYS)}, "
                         "or a list of such objects (any of them)")
    pairs = tuple(tuple(sorted((k, tuple(v) if isinstance(v, list) else v) for k, v in p.items()))
                  for p in patterns if p)
    return flags, pairs, tuple(inputs)


def _observed_on(value: Any, where: str) -> tuple[tuple[str, Any], ...]:
    """An entry's ``observed_on`` as sorted pairs; ValueError naming what it must hold."""
    example = '{"device": "llvmpipe (LLVM 15.0.6, 256 bits)", "emulated": true, "directml": "1.15.4"}'
    if not isinstance(value, dict) or not all(isinstance(v, (str, int, float, bool)) for v in value.values()):
        raise ValueError(f"{where}: observed_on must be an object of names to versions or words, e.g. {example}")
    missing = [k for k in OBSERVED_ON_REQUIRED if k not in value]
    if missing or not isinstance(value["emulated"], bool):
        raise ValueError(f"{where}: observed_on must say {' and '.join(OBSERVED_ON_REQUIRED)} (emulated: true or "
                         f"false), e.g. {example}")
    return tuple(sorted(value.items()))


def _entry(item: Any, where: str) -> Expectation:
    """One entry of the file, checked; ValueError naming the entry and the field."""
    outcomes = _check_fields(item, where)
    applies_to = _applies_to(item, where)
    shows_flags, shows_signature, shows_inputs = _shows_when(item, where)
    return Expectation(
        id=item["id"], outcome=outcomes, reason=item["reason"], link=item["link"],
        tags=tuple(sorted((str(k), str(v)) for k, v in (item.get("tags") or {}).items())),
        flags=_patterns(item, "flags", where, '{"field": "ReductionFunction", "value": "MAX", "kind": "diverges"}'),
        predicted=_patterns(item, "predicted", where, '{"field": "PooledSize", "kind": "diverges"}'),
        strict=item.get("strict", True), onnxruntime=item.get("onnxruntime") or "",
        predicted_from=item.get("predicted_from") or "", applies_to=applies_to, shows_flags=shows_flags,
        shows_signature=shows_signature, shows_inputs=shows_inputs,
        ep_package=_package_specs(item["ep_package"], where) if "ep_package" in item else (),
        observed_on=_observed_on(item["observed_on"], where) if "observed_on" in item else (),
        evidence=item.get("evidence") or "", emulated_device=item.get("emulated_device", False))


def parse(data: Any, source: str = "<expectations>", ort_version: str | None = None,
          ep_package: tuple[str, str] | None = None, provider: str | None = None,
          alias: str | None = None, emulated: bool = False) -> Expectations:
    """Expectations from the decoded JSON of a file; ValueError naming the entry and field on bad data.

    Entries outside their ``onnxruntime`` range for ``ort_version`` (default: the installed ONNX
    Runtime's), whose ``ep_package`` does not hold for ``ep_package`` (the EP's
    ``(distribution, version)``; None: unknown), or scoped to an emulated device
    (``emulated_device``) when ``emulated`` is false, are inactive. The file's ``"ep"`` (a provider
    name) picks its predictor. Given ``provider`` (and its ``--ep`` ``alias``), entries whose
    ``applies_to`` leaves it out are dropped (an entry without ``applies_to`` applies wherever its
    file is used)."""
    items = data.get("expectations") if isinstance(data, dict) else data
    if not isinstance(items, list):
        raise ValueError(f"{source}: expected {{\"expectations\": [...]}}")
    ep = data.get("ep") if isinstance(data, dict) else None
    file_ep = ep if isinstance(ep, str) and ep else None
    entries = [_entry(item, f"{source}: expectations[{n}]") for n, item in enumerate(items)]
    if provider is not None:
        entries = [e for e in entries if e.applies(provider, alias or provider)]
    if any(e.onnxruntime for e in entries) and ort_version is None:
        ort_version = installed_ort_version()  # imports onnxruntime: only when a range needs it
    active = [e for e in entries if (not e.onnxruntime or in_range(str(ort_version), e.onnxruntime))
              and (not e.ep_package or package_holds(e.ep_package, ep_package))
              and (emulated or not e.emulated_device)]
    inactive = [e for e in entries if e not in active]
    predictor = _predictor(PREDICTORS[file_ep]) if file_ep in PREDICTORS else None
    digest = hashlib.sha256(json.dumps(data, sort_keys=True).encode()).hexdigest()
    return Expectations(active, source, inactive, predictor, digest)


def _predictor(spec: str) -> Callable[[Any], list]:
    """The function ``"module:function"`` names, imported on its first call (it loads onnx)."""
    def predict(case: Any) -> list:
        """The named predictor's answer for ``case``."""
        import importlib

        module, _, name = spec.partition(":")
        return getattr(importlib.import_module(module), name)(case)

    return predict


def load(path: str, ort_version: str | None = None, ep_package: tuple[str, str] | None = None,
         provider: str | None = None, alias: str | None = None, shared: bool = False,
         emulated: bool = False) -> Expectations:
    """The expectations in ``path``, read through ``untrusted_files``; ``FileRefused`` naming the
    file (and the entry and field) when it is not an expectations file. ``provider``/``alias``:
    keep the entries that apply to that EP (``parse``); ``shared``: the file is one of causes
    several EPs share, so every entry must say where it applies; ``emulated``: the EP runs on an
    emulated device (entries scoped to one hold)."""
    data = read_json(path, "expectations file")
    try:
        if shared:
            _require_applies_to(data, path)
        return parse(data, path, ort_version, ep_package, provider, alias, emulated)
    except ValueError as exc:
        raise FileRefused(path, f"not an expectations file: {str(exc).removeprefix(f'{path}: ')}",
                          hint='each entry is {"id": GLOB, "outcome": ..., "reason": ..., "link": ...}') from None


def _require_applies_to(data: Any, path: str) -> None:
    """ValueError naming the first entry of a shared file without ``applies_to``."""
    items = data.get("expectations") if isinstance(data, dict) else None
    for n, item in enumerate(items if isinstance(items, list) else []):
        if isinstance(item, dict) and not item.get("applies_to"):
            raise ValueError(f"{path}: expectations[{n}]: a shared cause must say where it applies (applies_to: "
                             f"provider names, --ep aliases or classes: {', '.join(EP_CLASSES)})")


def for_ep(alias: str, ort_version: str | None = None, ep_package: tuple[str, str] | None = None,
           provider: str | None = None, emulated: bool = False) -> Expectations:
    """The bundled expectations of an EP: its own file's (``<alias>.json``) first, then the shared
    causes of ``shared.json`` that apply to it; empty when neither has any. ``provider`` (the EP's
    ONNX Runtime name) decides what applies (default: the own file's ``"ep"``, else ``alias``);
    ``ep_package`` the entries scoped by package and ``emulated`` those scoped to an emulated
    device (``parse``)."""
    own_path = os.path.join(EXPECTATIONS_DIR, f"{alias}.json")
    provider = provider or _file_ep(own_path) or alias
    own = load(own_path, ort_version, ep_package, provider, alias, emulated=emulated) if os.path.exists(own_path) \
        else Expectations((), None)
    shared_path = os.path.join(EXPECTATIONS_DIR, SHARED_FILE)
    shared = load(shared_path, ort_version, ep_package, provider, alias, shared=True, emulated=emulated) \
        if os.path.exists(shared_path) else None
    if shared is None or not (shared.entries or shared.inactive):
        return own
    sources = [p for p in (own.source, shared.source) if p]
    digest = hashlib.sha256(f"{own.digest}:{shared.digest}".encode()).hexdigest()
    return Expectations(own.entries + shared.entries, " + ".join(sources), own.inactive + shared.inactive,
                        own.predictor, digest)


def _file_ep(path: str) -> str | None:
    """The ``"ep"`` an expectations file names (None when it has none or cannot be read)."""
    try:
        data = read_json(path, "expectations file") if os.path.exists(path) else None
    except FileRefused:
        return None
    ep = data.get("ep") if isinstance(data, dict) else None
    return ep if isinstance(ep, str) and ep else None


#: Outcomes an expectation may name: raw outcomes other than a plain pass (``known`` and ``fixed``
#: are what applying one produces, not inputs; ``inexpressible`` is decided before any EP runs).
EXPECTABLE = tuple(o for o in OUTCOMES if o not in ("pass", "inexpressible", "known", "fixed"))
