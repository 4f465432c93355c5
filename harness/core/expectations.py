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
     "outcome": "fail",                # "fail" (with readings) or "not-on-ep" (a refusal)
     "readings": ["std-max-fold"],     # "fail": the reference's readings that compute what the EP
                                       # computes (reference/readings.py); every failing element
                                       # must lie within one of them (or a combination) for known
     "error": "80070057",              # "not-on-ep": a regular expression the EP's build or run
                                       # error must match (a refusal of a session it could not build)
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

An entry is one of three kinds, and each decides only what it can prove:

* **A known divergence of numbers** (``"outcome": "fail"``, ``"readings": [...]``): the reference's
  readings (``reference/readings.py``, DECISIONS.md READ-1) that compute what the EP computes. A
  case that fails is ``known`` only when *every* element outside the primary reading's tolerance
  lies within the same rule of one of the readings the matching entries name, or of a combination
  of them: the worker tries them on the case's own outputs (``harness.run.readings``) and records
  the evidence on the line (``readings``: what was tried, how many elements each reading or
  combination explains, how many none does). One element no reading explains and the case is
  ``fail``, its message naming the readings tried and the first such element. The entries whose
  readings explained elements are the case's causes, by evidence (``expected_outcome`` names the
  one that explained most, with the count per reading), never the first entry that matched.
* **A refusal** (``"outcome": "not-on-ep"``): the EP declines a node (the raw outcome is already
  ``not-on-ep``), or it cannot build or run the case's session and its error matches the entry's
  ``"error"`` (a regular expression over the failure message, e.g. ``"80070057"``). The case is
  ``not-on-ep`` with the entry's reason: it did not test the operator, it is no judged difference.
* **An emulated device's gap** (``"emulated_device": true``, below): ``emulation-gap``.

A case that passes (``pass``/``tie-only``) where a matching entry is ``strict`` (the default)
becomes ``fixed`` -- counted as a failure, like a strict xfail, so a fix is noticed and the entry
removed -- unless the entry says ``"strict": false`` (a divergence that only some inputs reveal),
where a pass stays a pass. Any other outcome stays as it is (a crash is never expected).

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
own semantics and are in no class). Which classes an EP belongs to is its record's
(``harness.eps.registry``): the caller passes the EP's ``classes``. Without it an entry applies to its file's ``"ep"`` (to any
EP when the file names none). ``for_ep`` reads the EP's own file, then ``shared.json``, whose
entries all say where they apply; an entry that does not apply to the EP is left out.

``emulated_device: true`` scopes an entry to an emulated device (``--ep dml-wine``: DirectML on
vkd3d and lavapipe): it is inactive unless the caller says the device is emulated, and a case it
explains is reported ``emulation-gap`` (not tested: the emulation, not the EP, decided it), never
``known``. ``observed_on`` and ``evidence`` are recorded on the case line with the rest of the entry.

``shows_when`` says when the cause can show, so that a case whose inputs cannot trigger it is
judged like any other case (no ``known``, no ``fixed``; the message says why; for an entry with
readings a precondition only, the readings decide the elements): ``{"flags":
[...]}`` patterns over the line's flags, where the case runner gives a ``diverges`` flag whose ONNX
meaning it can compute ``"shows": true/false`` (``graphs.Mapping.meanings``: does that meaning
differ from the reference on these inputs?); or ``{"signature": {...}}``, keys of the raw failure's
signature (``harness.core.signature``: ``outcome``, ``kind``, ``outputs``, ``values``,
``diverging``) that must equal, so that only a failure of that shape is this cause (refusal
entries only: an entry with readings proves its elements instead; a pass has
no signature: a strict entry makes it ``fixed``, a ``"strict": false`` one leaves it alone, as
does any entry a case not tested, such as ``not-on-ep`` or ``emulation-gap``); a list of such
objects is any of them (``[{"values": "inf -> nan"}, {"values": "-inf -> nan"}]``); and/or
``{"inputs": [...]}``, classes of ``harness.core.signature.INPUT_CLASSES`` (``nan``, ``inf``,
``-inf``, ``huge``) of which the case's inputs must hold one (the line's ``input_extremes``), for a
cause only such values can trigger: a failure of its shape on other inputs is not that cause.

Entries with ``flags`` can only be decided once the case has been mapped, i.e. on its result
line; ``match`` without flags treats them as not matching. Entries with ``predicted`` need the
case itself (``match_case``): the predictor of the file's EP (the caller's ``predictors``, provider
name -> predictor, from the EP records: e.g. the DirectML EP's, ``harness.eps.dml_ep``) reads what
that EP will do with the case's ONNX model from the EP's public source; a predictor's answer is a list of dicts with ``node``, ``op_type``, ``field``,
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
from .results import OUTCOMES, PASSING, CaseLine
from .signature import INPUT_CLASSES
from .signature import signature as failure_signature
from .untrusted_files import FileRefused, read_json

EXPECTATIONS_DIR = os.path.join(os.path.dirname(os.path.dirname(__file__)), "expectations")

#: A predictor: a case -> the EP's predictions for it (a list of prediction dicts).
Predictor = Callable[[Any], list]

#: Classes of EPs an entry's ``applies_to`` may name: class -> what it is. An EP joins a class only
#: on evidence that it computes the class's semantics; its record says which (``classes``).
EP_CLASSES: dict[str, str] = {
    "onnxruntime-kernels": (
        "ONNX Runtime's own kernels, which follow the ONNX spec (and the ONNX reference implementation): the CPU "
        "EP's, and their CUDA, ROCm and WebGPU counterparts in the same source tree"),
}
#: The bundled file of causes several EPs share (every entry says where it applies).
SHARED_FILE = "shared.json"
#: The keys a ``shows_when`` signature pattern may name (``harness.core.signature.Signature``).
SIGNATURE_KEYS = ("outcome", "kind", "outputs", "values", "diverging")

Patterns = tuple[tuple[tuple[str, Any], ...], ...]


def _all_found(wanted: Patterns, found: Sequence[Mapping[str, Any]]) -> bool:
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
    readings: tuple[str, ...] = ()
    error: str = ""

    @property
    def refusal(self) -> bool:
        """Whether the entry explains a refusal (``not-on-ep``), not numbers or an emulated device."""
        return not self.emulated_device and "not-on-ep" in self.outcome

    def refuses(self, line: Mapping[str, Any]) -> bool:
        """Whether a refusal entry explains the raw ``line``: a declined node (raw ``not-on-ep``)
        when the entry names no ``error`` or the message matches it; a session the EP could not
        build or run (raw ``fail`` of kind build or run) when its message matches ``error``."""
        message = str(line.get("message") or "")
        if line.get("outcome") == "not-on-ep":
            return not self.error or re.search(self.error, message) is not None
        if line.get("outcome") != "fail" or not self.error:
            return False
        found = failure_signature(dict(line))
        return found is not None and found.kind in ("build", "run") and re.search(self.error, message) is not None

    def applies(self, provider: str, alias: str, classes: Sequence[str] = ()) -> bool:
        """Whether the entry's cause applies to the EP ``provider`` (``--ep`` alias ``alias``, of
        the ``EP_CLASSES`` ``classes``): always without ``applies_to``; else when it names the
        provider, the alias or one of the classes."""
        if not self.applies_to:
            return True
        return any(item == provider or item.lower() == alias.lower() or item in classes for item in self.applies_to)

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

    def has_flags_of(self, flags: Sequence[Mapping[str, Any]] | None) -> bool:
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
        if self.readings:
            data["readings"] = list(self.readings)
        if self.error:
            data["error"] = self.error
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

    def settle(self, case: Any, line: CaseLine) -> None:
        """Apply the case's expectations to its raw result ``line`` in place: the reported outcome
        and ``expected_outcome`` (``verdict``: from the entries that match the case and whose
        cause can show on it, and for numbers from the line's ``readings`` evidence); the message
        says what decided it. When entries match but none can show, the case is judged like any
        other and the message says which known divergence these inputs cannot trigger."""
        flags = list(line.get("flags") or [])
        candidates = self.candidates(case)
        decided = verdict(candidates, line)
        matched = [entry for entry in candidates if entry.has_flags_of(flags)]
        line["expected_outcome"] = decided.record()
        raw, line["outcome"] = line["outcome"], decided.outcome
        line["message"] = (line.get("message") or "") + decided.note(raw)
        # inputs a flag says cannot show the cause, or a numeric failure of another shape, are worth
        # a note; a pass, a crash or an untested case that a failure-shaped cause missed is not
        quiet = [entry for entry in matched if entry not in decided.shown and entry.came_near(line)]
        if not decided.entries and quiet and (line["outcome"] == "fail" or any(e.shows_flags for e in quiet)) \
                and not decided.tried:
            first = quiet[0]
            line["message"] = (line.get("message") or "") + (f"; Note: the known divergence {first.id!r} cannot show on these inputs "
                                f"({first.shows_text()} does not hold), so the case is judged like any other: "
                                f"{first.reason[:160]}")

    def candidates(self, case: Any) -> tuple[Expectation, ...]:
        """The entries that may apply to ``case`` once it is mapped and run, in file order: those
        whose id, tags and predictions match it (``Expectation.matches_case``). A worker given
        them knows from a raw line alone whether ``settle`` will explain it (``settling``)."""
        tags, predicted = getattr(case, "tags", None), self.predictions(case)
        return tuple(entry for entry in self.entries if entry.matches_case(case.id, tags, predicted))

    def readings_for(self, op: str) -> tuple[str, ...]:
        """The readings the entries of numbers name for any case of operator ``op`` (an entry whose
        id matches ``"<op>/model"``), once each in file order: what a node of ``op`` in a whole
        model may be explained by (``harness.models.judge``), where no case id, flag or prediction
        narrows them (the readings still have to reproduce each element)."""
        names: dict[str, None] = {}
        for entry in self.entries:
            if entry.readings and fnmatch.fnmatchcase(f"{op}/model", entry.id):
                names.update(dict.fromkeys(entry.readings))
        return tuple(names)

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


def shown(candidates: Sequence[Expectation], line: Mapping[str, Any]) -> list[Expectation]:
    """The candidates (``Expectations.candidates``) that hold for the raw ``line``: its flags
    match and the cause can show on it (``Expectation.shows``), in file order."""
    flags = list(line.get("flags") or [])
    return [entry for entry in candidates if entry.has_flags_of(flags) and entry.shows(line)]


def readings_to_try(candidates: Sequence[Expectation], line: Mapping[str, Any]) -> tuple[str, ...]:
    """The readings that may explain the raw ``line``'s failing elements: those the entries that
    hold for it name (``shown``), in file order, once each; the worker tries exactly these."""
    names: dict[str, None] = {}
    for entry in shown(candidates, line):
        if not entry.emulated_device and "fail" in entry.outcome:
            names.update(dict.fromkeys(entry.readings))
    return tuple(names)


@dataclass(frozen=True)
class Verdict:
    """What the expectations make of a raw line: the reported ``outcome``, the ``entries`` that
    decided it (the first explains most), the entries that held (``shown``), and for a numeric
    failure the readings ``tried`` and what they ``explained`` (reading or combination -> elements)."""

    outcome: str
    entries: tuple[Expectation, ...] = ()
    shown: tuple[Expectation, ...] = ()
    tried: tuple[str, ...] = ()
    explained: tuple[tuple[str, int], ...] = ()
    unexplained: int = 0
    first_unexplained: Mapping[str, Any] | None = None
    could_not: Mapping[str, str] | None = None

    def record(self) -> dict[str, Any] | None:
        """The line's ``expected_outcome``: the deciding entry, the count per reading and the other
        entries that explained elements (None when no entry decided the outcome)."""
        if not self.entries:
            return None
        data = self.entries[0].to_json()
        if self.explained:
            data["explained_by"] = dict(self.explained)
        if len(self.entries) > 1:
            data["also"] = [{"pattern": e.id, "reason": e.reason, "link": e.link} for e in self.entries[1:]]
        return data

    def note(self, raw: str) -> str:
        """What the message adds: what made the outcome (a refusal's reason, the readings and their
        counts), or why readings left the case failing."""
        if self.outcome == "known":
            parts = ", ".join(f"{name} ({count})" for name, count in self.explained)
            return f"; known: every element outside tolerance is reproduced by a reading of the reference: {parts}"
        if self.outcome == "not-on-ep" and self.entries:
            how = "declined" if raw == "not-on-ep" else "refused to build or run the session"
            return f"; Note: a known refusal ({how}), not a judged difference: {self.entries[0].reason[:240]}"
        if self.outcome == "emulation-gap" and self.entries and self.entries[0].emulated_device:
            return f"; Note: not a result of the EP: the emulated device causes this ({self.entries[0].reason[:200]})"
        if self.outcome == "fail" and self.entries == () and self.shown and not self.tried and self.unexplained:
            names = sorted({r for e in self.shown for r in e.readings})
            return (f"; Note: none of the readings the known divergences that apply name ({', '.join(names)}) can "
                    "show on these inputs, so no reading explains the failure and the case fails")
        if self.outcome == "fail" and self.tried:
            where = _element_text(self.first_unexplained)
            broken = "".join(f"; the reading {name} could not be computed here ({error})"
                             for name, error in (self.could_not or {}).items())
            return (f"; Note: {self.unexplained} element(s) outside tolerance match none of the readings the known "
                    f"divergences that apply name ({tried_text(self.tried)}){where}{broken}, so the case "
                    "fails: a known divergence explains a case only element by element")
        return ""


#: A message lists the combinations of readings it tried up to this many; past it, it counts them
#: (a case can try dozens: the line's ``readings.tried`` keeps every one).
MAX_LISTED_COMBINATIONS = 3


def tried_text(tried: Sequence[str]) -> str:
    """What a failing case's message says was tried: ``"tried: a, b, a+b"``, or, with more than
    ``MAX_LISTED_COMBINATIONS`` combinations (``"a+b"``), the readings tried alone and how many
    combinations of them, pointing at the line's full list."""
    combined = [name for name in tried if "+" in name]
    if len(combined) <= MAX_LISTED_COMBINATIONS:
        return f"tried: {', '.join(tried)}"
    alone = [name for name in tried if "+" not in name]
    return (f"tried {len(tried)} sets: {', '.join(alone)}, each alone, and {len(combined)} combinations of them; "
            "the line's readings.tried lists every set")


def _element_text(element: Mapping[str, Any] | None) -> str:
    """``"; e.g. OutputTensor[0, 1]: expected 1, got 3 (closed-edge gives 2)"`` for an element record."""
    if not element:
        return ""
    others = ", ".join(f"{name} gives {value}" for name, value in (element.get("readings") or {}).items())
    return (f"; e.g. {element.get('output')}{element.get('index')}: expected {element.get('expected')}, got "
            f"{element.get('actual')}" + (f" ({others})" if others else ""))


def verdict(candidates: Sequence[Expectation], line: Mapping[str, Any]) -> Verdict:
    """The reported outcome of the raw ``line`` of a case whose candidate entries these are
    (module docstring): an emulated device's gap, a refusal, a numeric failure that the line's
    ``readings`` evidence proves element by element (``known``), ``fixed`` for a pass under a
    strict entry; else the raw outcome."""
    held = shown(candidates, line)
    raw = str(line.get("outcome"))
    emulated = next((e for e in held if e.emulated_device and raw in e.outcome), None)
    if emulated is not None:
        return Verdict("emulation-gap", (emulated,), tuple(held))
    if raw in PASSING:
        strict = next((e for e in held if e.strict), None)
        return Verdict("fixed" if strict else raw, (strict,) if strict else (), tuple(held))
    refusal = next((e for e in held if e.refusal and e.refuses(line)), None)
    if refusal is not None:
        return Verdict("not-on-ep", (refusal,), tuple(held))
    if raw != "fail" or not any(e.readings for e in held) or not line.get("mismatches"):
        return Verdict(raw, (), tuple(held))  # readings explain elements: a failure without any is not theirs
    return _proven(held, line)


def _proven(held: list[Expectation], line: Mapping[str, Any]) -> Verdict:
    """``known`` when the line's ``readings`` evidence has no element left unexplained, using only
    readings the held entries name; else ``fail`` saying what was tried."""
    evidence = line.get("readings") or {}
    allowed = set(readings_to_try(held, line))
    explained = {str(k): int(v) for k, v in (evidence.get("explained") or {}).items()}
    usable = {k: v for k, v in explained.items() if set(k.split("+")) <= allowed}
    tried = tuple(str(t) for t in evidence.get("tried") or ())
    left = int(evidence.get("unexplained", 0)) + sum(v for k, v in explained.items() if k not in usable)
    if not evidence or left or not usable:
        left = left if evidence else int(line.get("mismatches") or 0)
        if not tried and evidence:  # nothing could be tried: every reading named cannot show here
            return Verdict("fail", (), tuple(held), (), (), left)
        return Verdict("fail", (), tuple(held), tried or tuple(sorted(allowed)), tuple(usable.items()), left,
                       evidence.get("first_unexplained"), evidence.get("could_not"))
    per_entry = {e: sum(v for k, v in usable.items() if set(k.split("+")) & set(e.readings)) for e in held}
    causes = tuple(sorted((e for e in held if per_entry[e]), key=lambda e: -per_entry[e]))
    ranked = tuple(sorted(usable.items(), key=lambda kv: -kv[1]))
    return Verdict("known", causes, tuple(held), tried, ranked)


def settling(candidates: Sequence[Expectation], line: Mapping[str, Any]) -> Expectation | None:
    """The entry that decides the raw ``line``'s reported outcome (``verdict``), or None."""
    decided = verdict(candidates, line)
    return decided.entries[0] if decided.entries else None


def apply(outcome: str, expectation: Expectation | None) -> str:
    """What ``expectation`` would make of a raw ``outcome`` on its own, without evidence (the DML
    EP's first-run outlook): ``emulation-gap`` for an emulated device's entry, ``not-on-ep`` for a
    refusal, ``known`` for a numeric failure its readings would have to prove, ``fixed`` for a pass
    under a strict entry."""
    if expectation is None:
        return outcome
    if expectation.emulated_device and outcome in expectation.outcome:
        return "emulation-gap"
    if outcome in PASSING:
        return "fixed" if expectation.strict else outcome
    if expectation.refusal and outcome in ("not-on-ep", "fail"):
        return "not-on-ep"
    if outcome == "fail" and expectation.readings:
        return "known"
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
              "readings", "error", "strict", "reason", "link", "predicted_from", "observed_on", "evidence",
              "emulated_device")
#: The longest ``error`` pattern an entry may hold (a regular expression searched in a message).
MAX_ERROR_PATTERN = 500
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
    allowed = EXPECTABLE if item.get("emulated_device") else EXPLAINABLE
    bad = [o for o in outcomes if not isinstance(o, str) or o not in allowed]
    if bad or not outcomes:
        raise ValueError(f"{where}: outcome {bad[0] if bad else outcome!r} is not one of {', '.join(allowed)} (an entry "
                         "explains numbers, \"fail\" with readings, or a refusal, \"not-on-ep\"; a crash, a timeout or "
                         "an error is never expected)")
    _check_kind(item, outcomes, where)
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


def _check_kind(item: dict[str, Any], outcomes: tuple[str, ...], where: str) -> None:
    """An entry explaining numbers names readings (and no failure shape), a refusal's ``error`` is a
    regular expression; ValueError naming the field and what to do."""
    readings = item.get("readings")
    if readings is not None and (not isinstance(readings, list) or not readings
                                 or not all(isinstance(r, str) and re.fullmatch(r"[a-z0-9][a-z0-9-]*", r)
                                            for r in readings)):
        raise ValueError(f"{where}: readings must be a non-empty list of reading names (reference/readings.py), "
                         "e.g. [\"std-max-fold\"]")
    error = item.get("error")
    if error is not None:
        if not isinstance(error, str) or not error or len(error) > MAX_ERROR_PATTERN:
            raise ValueError(f"{where}: error must be a regular expression of 1 to {MAX_ERROR_PATTERN} characters")
        try:
            re.compile(error)
        except re.error as exc:
            raise ValueError(f"{where}: error {error!r} is not a regular expression ({exc})") from None
    if item.get("emulated_device"):
        return
    if "fail" in outcomes and not readings:
        raise ValueError(f"{where}: an entry expecting \"fail\" must name the readings that compute what the EP "
                         "computes (\"readings\": [...], reference/readings.py): a known divergence is proven element "
                         "by element, never by the shape of a failure; a session the EP refuses is \"outcome\": "
                         "\"not-on-ep\" with \"error\"")
    if readings and "fail" not in outcomes:
        raise ValueError(f"{where}: readings explain numbers: give them with \"outcome\": \"fail\"")
    if error is not None and "not-on-ep" not in outcomes:
        raise ValueError(f"{where}: error matches a refusal: give it with \"outcome\": \"not-on-ep\"")
    shows = item.get("shows_when")
    if readings and isinstance(shows, dict) and shows.get("signature"):
        raise ValueError(f"{where}: shows_when.signature is a failure's shape; an entry with readings proves its "
                         "elements instead: drop the signature (keep flags or inputs as a precondition)")


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
        evidence=item.get("evidence") or "", emulated_device=item.get("emulated_device", False),
        readings=tuple(item.get("readings") or ()), error=item.get("error") or "")


def parse(data: Any, source: str = "<expectations>", ort_version: str | None = None,
          ep_package: tuple[str, str] | None = None, provider: str | None = None,
          alias: str | None = None, emulated: bool = False, classes: Sequence[str] = (),
          predictors: Mapping[str, Predictor] | None = None) -> Expectations:
    """Expectations from the decoded JSON of a file; ValueError naming the entry and field on bad data.

    Entries outside their ``onnxruntime`` range for ``ort_version`` (default: the installed ONNX
    Runtime's), whose ``ep_package`` does not hold for ``ep_package`` (the EP's
    ``(distribution, version)``; None: unknown), or scoped to an emulated device
    (``emulated_device``) when ``emulated`` is false, are inactive. The file's ``"ep"`` (a provider
    name) picks its predictor among ``predictors`` (provider -> predictor, from the EP records;
    none given: predicted entries never match). Given ``provider`` (and its ``--ep`` ``alias``
    and its ``classes``), entries whose ``applies_to`` leaves it out are dropped (an entry without
    ``applies_to`` applies wherever its file is used)."""
    items = data.get("expectations") if isinstance(data, dict) else data
    if not isinstance(items, list):
        raise ValueError(f"{source}: expected {{\"expectations\": [...]}}")
    ep = data.get("ep") if isinstance(data, dict) else None
    file_ep = ep if isinstance(ep, str) and ep else None
    entries = [_entry(item, f"{source}: expectations[{n}]") for n, item in enumerate(items)]
    if provider is not None:
        entries = [e for e in entries if e.applies(provider, alias or provider, classes)]
    if any(e.onnxruntime for e in entries) and ort_version is None:
        ort_version = installed_ort_version()  # imports onnxruntime: only when a range needs it
    active = [e for e in entries if (not e.onnxruntime or in_range(str(ort_version), e.onnxruntime))
              and (not e.ep_package or package_holds(e.ep_package, ep_package))
              and (emulated or not e.emulated_device)]
    inactive = [e for e in entries if e not in active]
    predictor = (predictors or {}).get(file_ep) if file_ep else None
    digest = hashlib.sha256(json.dumps(data, sort_keys=True).encode()).hexdigest()
    return Expectations(active, source, inactive, predictor, digest)


def load(path: str, ort_version: str | None = None, ep_package: tuple[str, str] | None = None,
         provider: str | None = None, alias: str | None = None, shared: bool = False,
         emulated: bool = False, classes: Sequence[str] = (),
         predictors: Mapping[str, Predictor] | None = None) -> Expectations:
    """The expectations in ``path``, read through ``untrusted_files``; ``FileRefused`` naming the
    file (and the entry and field) when it is not an expectations file. ``provider``/``alias``:
    keep the entries that apply to that EP (``parse``); ``shared``: the file is one of causes
    several EPs share, so every entry must say where it applies; ``emulated``: the EP runs on an
    emulated device (entries scoped to one hold); ``classes``/``predictors``: the EP's classes and
    the EP records' predictors (``parse``)."""
    data = read_json(path, "expectations file")
    try:
        if shared:
            _require_applies_to(data, path)
        return parse(data, path, ort_version, ep_package, provider, alias, emulated, classes, predictors)
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
           provider: str | None = None, emulated: bool = False, classes: Sequence[str] = (),
           predictors: Mapping[str, Predictor] | None = None) -> Expectations:
    """The bundled expectations of an EP: its own file's (``<alias>.json``) first, then the shared
    causes of ``shared.json`` that apply to it; empty when neither has any. ``provider`` (the EP's
    ONNX Runtime name) decides what applies (default: the own file's ``"ep"``, else ``alias``);
    ``ep_package`` the entries scoped by package, ``emulated`` those scoped to an emulated device,
    ``classes`` the classes of EPs it belongs to and ``predictors`` the EP records' (``parse``)."""
    own_path = os.path.join(EXPECTATIONS_DIR, f"{alias}.json")
    provider = provider or _file_ep(own_path) or alias
    own = load(own_path, ort_version, ep_package, provider, alias, emulated=emulated, classes=classes,
               predictors=predictors) if os.path.exists(own_path) else Expectations((), None)
    shared_path = os.path.join(EXPECTATIONS_DIR, SHARED_FILE)
    shared = load(shared_path, ort_version, ep_package, provider, alias, shared=True, emulated=emulated,
                  classes=classes) if os.path.exists(shared_path) else None
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


#: Outcomes an emulated device's entry may name: raw outcomes other than a plain pass (``known``
#: and ``fixed`` are what applying one produces; ``inexpressible`` is decided before any EP runs).
EXPECTABLE = tuple(o for o in OUTCOMES if o not in ("pass", "inexpressible", "known", "fixed"))
#: Outcomes any other entry may name: numbers it proves with readings, or a refusal.
EXPLAINABLE = ("fail", "not-on-ep")
