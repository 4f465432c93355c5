"""The operator registry: one record per DirectML operator, the only list of operators, and the
contract every operator's modules keep.

An operator is one ``OpSpec`` record (``register(OpSpec(...))``) and three modules:

* its reference module (this folder, named by the record's callables): the desc dataclass
  (``Desc``: ``TYPE``, ``FEATURE_LEVEL``, ``INPUTS``, ``OUTPUTS``, ``dml_field`` fields), its
  data-type tables (``tensor_support``), ``validate``, ``execute``, ``random_inputs``; optionally
  ``bounded`` (rounding bounds), ``check_values`` (a memory guard on input values),
  ``index_outputs`` / ``index_rule`` (tie-aware index outputs), ``regions`` (outputs whose rows
  are independent, computed for some rows alone);
* its mapper module (``graphs``, named by string so that the reference never imports ONNX),
  providing every hook of ``MAPPER_HOOKS``: ``to_onnx``, ``import_node``, ``input_flags``,
  ``DML_EP`` (and, optionally, ``ONNX_BACKEND_DIFFERENCES`` and ``OLDEST_OPSET``);
* its cases module (``cases``, ``"module:function"``), providing every hook of ``CASES_HOOKS``:
  the catalog function, ``make_inputs``, ``SMOKE``, ``stress_cases``, ``fuzz_strategy`` (and,
  optionally, ``PROBE`` and ``shrink_moves``).

The record also says what model runs attribute: ``onnx_ops`` (the ONNX op types whose nodes read
back as this desc) and ``onnx_input_roles`` (what each input of such a node is, so that a model
run can generate sensible inputs: ``INPUT_ROLES``).

``register`` checks the record (``check_record``); the mapper and cases modules are checked the
first time they are loaded (``checked_module``, called by ``graphs.ops.mapper_of`` and
``graphs.cases.common.cases_module``). Either check raises ``OperatorContractError`` naming the
operator, the module or field, what is missing and what is expected. Everything else asks the
registry: ``execute`` and ``validate`` find a desc's record by its class, ``to_onnx`` /
``from_onnx`` its mapper, the catalog, tiers and fuzz drawer its cases module, model runs the ONNX
op types and input roles, the DirectML EP predictor the mapper's ``DML_EP``, the comparison its
index outputs, the CLI and the pytest plugin the operator names.

Adding an operator touches four source files and nothing else: ``reference/<op>.py``,
``graphs/ops/<op>.py``, ``graphs/cases/<op>.py`` and one ``register(OpSpec(...))`` line below (or in
your own code: ``tests/registry/toy_op.py`` plays all three parts in one file and registers
itself). DESIGN.md ("One operator, one place") lists what else it may want (tests, docs).
"""

from __future__ import annotations

import dataclasses
import inspect
import re
from dataclasses import dataclass, field
from types import ModuleType
from typing import Any, Callable, Mapping, Optional

import numpy as np

from . import max_pooling2, roi_align, roi_align_bounds, roi_pooling, roi_pooling_bounds
from .checks import TypeTable
from .descs import Desc
from .errors import DescError
from .precision import Expected, PrecisionModel
from .readings import Reading, ReadingError, combine


class OperatorContractError(ValueError):
    """An operator record, or one of its modules, breaks the registry's contract (the message
    names the operator, the field or module and hook, and what is expected)."""


@dataclass(frozen=True)
class Hook:
    """One thing an operator's mapper or cases module provides: its attribute ``name``, how the
    testbed uses it (``usage``) and what for (``meaning``). ``params`` is the number of
    positional arguments a function hook is called with (None: a value hook, of ``kinds``)."""

    name: str
    usage: str
    meaning: str
    params: Optional[int] = None
    kinds: tuple[type, ...] = ()
    required: bool = True


#: What a mapper module (``OpSpec.graphs``) provides.
MAPPER_HOOKS: tuple[Hook, ...] = (
    Hook("to_onnx", "to_onnx(desc, opset: int) -> graphs.mapping.Mapping",
         "the ONNX model of a validated desc and one flag per field value", params=2),
    Hook("import_node", "import_node(node, shapes, types, mode: str, opset) -> graphs.common.Imported",
         "a node of one of the record's onnx_ops read back as a desc, in the 'spec' or the 'dml-ep' reading "
         "(raise graphs.common.OnnxImportError for a node with no desc)", params=5),
    Hook("input_flags", "input_flags(desc, tensors, opset=None) -> list[graphs.flags.Flag]",
         "the flags a case's input values raise (an empty list when none can)", params=3),
    Hook("DML_EP", "DML_EP: dict[str, graphs.dml_ep_facts.DmlEpOp]",
         "per ONNX op type the mapper's op nodes use: the DirectML EP's registration rows and the operator "
         "file its desc is built in (harness/eps/dml_ep.py predicts with them; {} predicts nothing)",
         kinds=(dict,)),
    Hook("ONNX_BACKEND_DIFFERENCES", "ONNX_BACKEND_DIFFERENCES: dict[str, str]",
         "ONNX backend test case name -> why ONNX's meaning and the nearest desc differ", kinds=(dict,),
         required=False),
    Hook("OLDEST_OPSET", "OLDEST_OPSET: tuple[int, str]",
         "the oldest opset the mapper's models need, and why: no operator's model is built at an older opset "
         "(graphs.common.choose_opset)", kinds=(tuple,), required=False),
)

#: What a cases module (``OpSpec.cases``) provides. The catalog function is the one the record's
#: ``cases`` names after the colon (``catalog`` when it names none).
CASES_HOOKS: tuple[Hook, ...] = (
    Hook("catalog", "catalog(seed: int) -> list[graphs.cases.common.Case]",
         "the operator's catalog cases for a seed (the default tier), ids '<op>/...' unique", params=1),
    Hook("make_inputs", "make_inputs(desc, recipe: str, rng: numpy.random.Generator) -> dict[str, numpy.ndarray]",
         "a case's input arrays by DML input member, for each recipe its cases name (fuzzed ones: 'fuzz:...')",
         params=3),
    Hook("SMOKE", "SMOKE: tuple[str, ...]",
         "fnmatch patterns over catalog case ids after '<op>/': the smoke tier (a few cases, seconds)",
         kinds=(tuple, list)),
    Hook("stress_cases", "stress_cases(op: str, seed: int) -> list[graphs.cases.common.Case]",
         "the stress tier: detection-, classifier- and GPU-boundary-sized cases, each tagged memory_mb "
         "(graphs.cases.common.stress_case)", params=2),
    Hook("fuzz_strategy", "fuzz_strategy(op: str, size: str) -> hypothesis strategy of graphs.cases.common.FuzzDraw",
         "valid descs over the operator's whole field space, simplest values first ('default' or 'large' sizes)",
         params=2),
    Hook("PROBE", "PROBE: str",
         "a catalog case id pattern (after '<op>/'): the one-node session `doctor` and `run` check an EP with "
         "(the first registered operator that names one is used)", kinds=(str,), required=False),
    Hook("probe", "probe(seed: int) -> graphs.cases.common.Case",
         "the PROBE case built without the catalog (equal to the catalog's), so that a command that runs no "
         "catalog does not draw one", params=1, required=False),
    Hook("shrink_moves", "shrink_moves(desc, arrays: dict[str, numpy.ndarray]) -> iterable of (desc, arrays)",
         "smaller variants of a case that keep part of its arrays as they are (one region, channel or image, a "
         "cropped input), the largest cut first: `fuzz` shrinks a failure through them (harness/fuzz/shrink.py)",
         params=2, required=False),
)

#: What a model run may generate for an input of an attributed node (``OpSpec.onnx_input_roles``)
#: when the user gives no inputs; ``any`` is an input with no role (seeded standard normal values).
INPUT_ROLES: Mapping[str, str] = {
    "any": "no role: seeded values of its type",
    "feature": "the N x C x H x W feature map the node reads; the other roles are placed on it",
    "boxes": "regions [x1, y1, x2, y2] inside the image the feature map covers (its size / the node's "
             "spatial_scale attribute), x1 < x2 and y1 < y2",
    "batch_index": "one batch index per region, inside the feature map's batch",
    "batch_boxes": "regions [batch, x1, y1, x2, y2], corners on whole pixels of the image",
}

_NAME = re.compile(r"^[a-z][a-z0-9_]*$")


@dataclass(frozen=True)
class OpSpec:
    """Everything about one DirectML operator (module docstring).

    ``validate(desc, types)`` raises DescError for a desc that breaks its page (``types``: the
    data types allowed at the feature level asked for); ``execute(desc, arrays)`` computes a
    validated desc on arrays keyed by DML input member, returning arrays keyed by DML output
    member; ``random_inputs(desc, rng)`` draws one valid input. ``graphs`` names the mapper
    module (``MAPPER_HOOKS``), ``cases`` the ``"module:function"`` of the cases module and its
    catalog function (``CASES_HOOKS``). ``onnx_ops`` are the ONNX op types whose nodes read back
    as this desc; ``onnx_input_roles`` says, per such op type, the role of each node input by
    position (``INPUT_ROLES``; inputs past the tuple have none). ``index_outputs`` maps an index
    output to the value output it locates and the input it indexes; ``index_rule(desc,
    output_positions, input_indices)`` says whether an index lies in its output's window (so a
    comparison can accept ties). ``bounded(desc, arrays, model)`` computes a validated desc under
    a precision model (``precision.Expected``: outputs, per-element rounding bounds, knife-edge
    alternatives), its outputs from the kernel ``execute`` runs (bit for bit ``execute``'s, never a
    second copy of the arithmetic); None means every output is a selection, exact under every model.
    ``check_values(desc, arrays)``, when given, runs before ``execute`` and ``bounded`` and raises
    DescError for input values whose computation would exceed the reference's limits
    (``checks.within_cap``). ``rules`` is the primary reading's instance of the operator's kernel
    rules (a frozen dataclass) and ``readings`` the departures other kernels compute
    (``reference/readings.py``); an operator with readings computes them through the same kernel:
    ``execute(desc, arrays, rules)`` and ``bounded(desc, arrays, model, rules)``.
    ``regions(desc, arrays, rows)``, when given, says that row ``r`` of every output (its first
    axis: an ROI operator's regions) depends on the inputs' row ``r`` alone, and returns the desc
    and inputs of ``rows`` alone: row ``i`` of what they compute (outputs, bounds, alternatives)
    is row ``rows[i]`` of the whole desc's, bit for bit, so a reading need only be computed where
    it is looked at (``execute.execute_regions``).
    """

    name: str
    desc: type[Any]
    page: str
    tensor_support: tuple[tuple[str, TypeTable], ...]
    validate: Callable[[Any, TypeTable], None]
    execute: Callable[[Any, dict[str, np.ndarray]], dict[str, np.ndarray]]
    random_inputs: Callable[[Any, np.random.Generator], dict[str, np.ndarray]]
    graphs: str
    cases: str
    onnx_ops: tuple[str, ...] = ()
    index_outputs: Mapping[str, tuple[str, str]] = field(default_factory=dict)
    index_rule: Optional[Callable[[Any, np.ndarray, np.ndarray], np.ndarray]] = None
    bounded: Optional[Callable[[Any, dict[str, np.ndarray], PrecisionModel], Expected]] = None
    check_values: Optional[Callable[[Any, dict[str, np.ndarray]], None]] = None
    onnx_input_roles: Mapping[str, tuple[str, ...]] = field(default_factory=dict)
    rules: Any = None
    readings: tuple[Reading, ...] = ()
    regions: Optional[Callable[[Any, dict[str, np.ndarray], np.ndarray], tuple[Any, dict[str, np.ndarray]]]] = None

    @property
    def dml_type(self) -> str:
        """DirectML's ``DML_OPERATOR_*`` name."""
        return self.desc.TYPE

    @property
    def cases_module(self) -> str:
        """The module name of ``cases``."""
        return self.cases.partition(":")[0]

    @property
    def catalog_function(self) -> str:
        """The name of the catalog function in the cases module (``catalog`` unless ``cases`` names one)."""
        return self.cases.partition(":")[2] or "catalog"


# --- checking the contract -----------------------------------------------------------------------

def _contract_error(spec_name: str, where: str, problem: str, note: str) -> OperatorContractError:
    """One message: the operator, where (field or module), the problem, and what to do (``Note:``)."""
    return OperatorContractError(f"operator {spec_name!r}: {where} {problem}\nNote: {note}")


def _takes(function: Callable[..., Any], count: int) -> bool:
    """Whether ``function`` accepts ``count`` positional arguments (True when Python cannot tell)."""
    try:
        inspect.signature(function).bind(*([None] * count))
    except TypeError:
        return False
    except ValueError:  # no signature to read (a builtin): it is called and fails there if wrong
        return True
    return True


_RECORD_FUNCTIONS = (("validate", 2, True), ("execute", 2, True), ("random_inputs", 2, True),
                     ("index_rule", 3, False), ("bounded", 3, False), ("check_values", 2, False),
                     ("regions", 3, False))


def check_record(spec: OpSpec) -> None:
    """Check what a record says by itself (``register`` calls this): its name, desc class, data-type
    tables, callables, module names, ONNX op types and input roles, index outputs;
    ``OperatorContractError`` naming the field otherwise."""
    name = spec.name if isinstance(spec.name, str) else repr(spec.name)
    if not isinstance(spec.name, str) or not _NAME.match(spec.name):
        raise _contract_error(name, "OpSpec.name", "is not a lower-case identifier",
                              "case ids start with '<name>/' (e.g. roi_align1/...): use letters, digits and _")
    desc = spec.desc
    if not (isinstance(desc, type) and issubclass(desc, Desc)
            and all(isinstance(getattr(desc, a, None), s) for a, s in (("TYPE", str), ("INPUTS", tuple),
                                                                       ("OUTPUTS", tuple)))):
        raise _contract_error(name, "OpSpec.desc", f"= {desc!r} is not a desc dataclass",
                              "give a dataclass deriving from reference.descs.Desc with TYPE, FEATURE_LEVEL, "
                              "INPUTS and OUTPUTS (reference/max_pooling2.py shows one)")
    if not spec.tensor_support or not all(isinstance(level, str) and isinstance(table, Mapping)
                                          for level, table in spec.tensor_support):
        raise _contract_error(name, "OpSpec.tensor_support", "is not a tuple of (feature level, type table)",
                              "give ((\"1.0\", {\"InputTensor\": (\"FLOAT32\",), ...}),), oldest level first")
    for attribute, count, required in _RECORD_FUNCTIONS:
        function = getattr(spec, attribute)
        if function is None and not required:
            continue
        if not callable(function) or not _takes(function, count):
            raise _contract_error(name, f"OpSpec.{attribute}", f"= {function!r} is not a function of {count} "
                                  "arguments", "see OpSpec's docstring for what it is called with")
    _check_module_names(spec)
    _check_onnx_side(spec)
    _check_index_outputs(spec)
    _check_readings(spec)


def _check_readings(spec: OpSpec) -> None:
    """Readings need the primary rules, unique names, changes to rules the kernel has, and an
    ``execute`` (and ``bounded``) that take the rules."""
    if not spec.readings:
        return
    if spec.rules is None or not dataclasses.is_dataclass(spec.rules):
        raise _contract_error(spec.name, "OpSpec.rules", f"= {spec.rules!r} is not a rules dataclass instance",
                              "give the primary reading's rules (e.g. roi_pooling.PRIMARY) with the readings")
    names_seen = [r.name for r in spec.readings]
    if len(set(names_seen)) != len(names_seen) or not all(isinstance(r, Reading) for r in spec.readings):
        raise _contract_error(spec.name, "OpSpec.readings", "holds a duplicate name or a non-Reading",
                              "give reference.readings.Reading records with unique names")
    for r in spec.readings:
        try:
            combine(spec.rules, [r])
        except ReadingError as exc:
            raise _contract_error(spec.name, f"OpSpec.readings[{r.name!r}]", str(exc),
                                  "a reading changes fields of the operator's rules dataclass") from None
    for attribute, count in (("execute", 3), ("bounded", 4)):
        function = getattr(spec, attribute)
        if function is not None and not _takes(function, count):
            raise _contract_error(spec.name, f"OpSpec.{attribute}", f"does not take the rules as argument {count}",
                                  "an operator with readings computes them through the same kernel")


def _check_module_names(spec: OpSpec) -> None:
    """``graphs`` and ``cases`` name importable-looking modules (they are loaded at first use)."""
    dotted = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*(\.[A-Za-z_][A-Za-z0-9_]*)*$")
    module, _, function = spec.cases.partition(":") if isinstance(spec.cases, str) else ("", "", "")
    if not isinstance(spec.graphs, str) or not dotted.match(spec.graphs):
        raise _contract_error(spec.name, "OpSpec.graphs", f"= {spec.graphs!r} is not a module name",
                              "name the mapper module by its dotted name, e.g. \"ep_testbed.graphs.ops.roi_align\"")
    if not dotted.match(module) or (function and not function.isidentifier()):
        raise _contract_error(spec.name, "OpSpec.cases", f"= {spec.cases!r} is not \"module\" or \"module:function\"",
                              "name the cases module and its catalog function, e.g. "
                              "\"ep_testbed.graphs.cases.roi_align:catalog_v1\"")


def _check_onnx_side(spec: OpSpec) -> None:
    """``onnx_ops`` are op type names; ``onnx_input_roles`` covers only those, with known roles."""
    if not isinstance(spec.onnx_ops, tuple) or not all(isinstance(o, str) and o.isidentifier()
                                                       for o in spec.onnx_ops):
        raise _contract_error(spec.name, "OpSpec.onnx_ops", f"= {spec.onnx_ops!r} is not a tuple of ONNX op types",
                              "give e.g. (\"RoiAlign\",), or () when no ONNX node reads back as this desc")
    for op_type, roles in spec.onnx_input_roles.items():
        if op_type not in spec.onnx_ops:
            raise _contract_error(spec.name, f"OpSpec.onnx_input_roles[{op_type!r}]",
                                  f"names an op type that is not in onnx_ops {spec.onnx_ops!r}",
                                  "give roles only for the op types the record reads back")
        unknown = [r for r in roles if r not in INPUT_ROLES] if isinstance(roles, tuple) else [roles]
        if unknown:
            raise _contract_error(spec.name, f"OpSpec.onnx_input_roles[{op_type!r}]",
                                  f"holds {unknown[0]!r}, not a role", "give a tuple, one role per node input, each "
                                  f"one of {', '.join(INPUT_ROLES)} (reference.registry.INPUT_ROLES)")
        if roles.count("feature") != (0 if set(roles) <= {"any"} else 1):
            raise _contract_error(spec.name, f"OpSpec.onnx_input_roles[{op_type!r}]",
                                  f"= {roles!r} places regions without exactly one 'feature' input",
                                  "name the input the regions sit on 'feature' (once), or give only 'any'")


def _check_index_outputs(spec: OpSpec) -> None:
    """Each index output, its value output and its indexed input are members of the desc."""
    for index, pair in spec.index_outputs.items():
        ok = (index in spec.desc.OUTPUTS and isinstance(pair, tuple) and len(pair) == 2
              and pair[0] in spec.desc.OUTPUTS and pair[1] in spec.desc.INPUTS)
        if not ok:
            raise _contract_error(spec.name, f"OpSpec.index_outputs[{index!r}]", f"= {pair!r} does not name members "
                                  f"of {spec.desc.__name__}", "map an index output to (the value output it locates, "
                                  f"the input it indexes): outputs {spec.desc.OUTPUTS}, inputs {spec.desc.INPUTS}")
    if spec.index_outputs and spec.index_rule is None:
        raise _contract_error(spec.name, "OpSpec.index_rule", "is missing while index_outputs is given",
                              "give index_rule(desc, output_positions, input_indices): whether each index lies in "
                              "its output's window")


_CHECKED: set[tuple[str, str, str]] = set()
_PARTS = {"graphs": ("mapper module", MAPPER_HOOKS), "cases": ("cases module", CASES_HOOKS)}


def checked_module(spec: OpSpec, part: str, module: ModuleType) -> ModuleType:
    """``module`` (the record's ``part``: ``"graphs"`` or ``"cases"``) once it provides every
    required hook of ``MAPPER_HOOKS`` / ``CASES_HOOKS`` in the right form (a function taking the
    arguments it is called with, or a value of the right type), checked once per process;
    ``OperatorContractError`` naming the operator, the module and the hook otherwise."""
    key = (spec.name, part, module.__name__)
    if key in _CHECKED:
        return module
    role, hooks = _PARTS[part]
    for hook in hooks:
        name = spec.catalog_function if hook.name == "catalog" and part == "cases" else hook.name
        value = getattr(module, name, None)
        problem = _hook_problem(hook, value)
        if problem and (hook.required or value is not None):
            required = ", ".join(h.name for h in hooks if h.required)
            raise _contract_error(spec.name, f"{role} {module.__name__}", f"{problem} {name}: {hook.usage} "
                                  f"({hook.meaning})", f"every {role} provides {required} (reference/registry.py, "
                                  f"{'MAPPER_HOOKS' if part == 'graphs' else 'CASES_HOOKS'})")
    _CHECKED.add(key)
    return module


def _hook_problem(hook: Hook, value: Any) -> str:
    """What is wrong with ``value`` as ``hook`` ("" when nothing is)."""
    if value is None:
        return "lacks"
    if hook.params is not None:
        if not callable(value) or not _takes(value, hook.params):
            return f"has a {type(value).__name__} that does not take {hook.params} positional arguments as"
        return ""
    if not isinstance(value, hook.kinds):
        return f"has a {type(value).__name__} (not {' or '.join(k.__name__ for k in hook.kinds)}) as"
    return ""


# --- the registry -------------------------------------------------------------------------------------

_SPECS: dict[str, OpSpec] = {}


def register(spec: OpSpec) -> OpSpec:
    """Add an operator after checking its record (``check_record``); a second record with the same
    name or desc class replaces the first."""
    check_record(spec)
    for name, existing in list(_SPECS.items()):
        if existing.desc is spec.desc and name != spec.name:
            del _SPECS[name]
    _SPECS[spec.name] = spec
    for key in [k for k in _CHECKED if k[0] == spec.name]:
        _CHECKED.discard(key)  # a new record may name other modules: check them again
    return spec


def unregister(name: str) -> None:
    """Remove an operator (tests that register a toy one clean up with this)."""
    _SPECS.pop(name, None)


def specs() -> tuple[OpSpec, ...]:
    """Every registered operator, in registration order."""
    return tuple(_SPECS.values())


def names() -> tuple[str, ...]:
    """The short names of the registered operators, in registration order."""
    return tuple(_SPECS)


def spec_named(name: str) -> OpSpec:
    """The record of a short name; a ValueError listing the names otherwise."""
    try:
        return _SPECS[name]
    except KeyError:
        raise ValueError(f"operator {name!r}: one of {', '.join(_SPECS)}") from None


def spec_of_type(dml_type: str) -> Optional[OpSpec]:
    """The record of a ``DML_OPERATOR_*`` name, or None."""
    return next((s for s in _SPECS.values() if s.desc.TYPE == dml_type), None)


def spec_for(desc: Any) -> OpSpec:
    """The record of a desc (by its exact class); DescError for anything else."""
    for spec in _SPECS.values():
        if type(desc) is spec.desc:
            return spec
    raise DescError("Type", type(desc).__name__, f"a desc dataclass of a registered operator "
                    f"({', '.join(s.desc.__name__ for s in _SPECS.values())})")


def specs_for_onnx(op_type: str) -> tuple[OpSpec, ...]:
    """The records whose desc an ONNX node of ``op_type`` reads back as."""
    return tuple(s for s in _SPECS.values() if op_type in s.onnx_ops)


def index_output_names() -> frozenset[str]:
    """Every output member some registered operator declares an index output (``index_outputs``)."""
    return frozenset(name for s in _SPECS.values() for name in s.index_outputs)


# --- the four DirectML operators ------------------------------------------------------------

register(OpSpec(
    name="roi_pooling", desc=roi_pooling.RoiPoolingDesc, page=roi_pooling.PAGE,
    tensor_support=roi_pooling.TENSOR_SUPPORT, validate=roi_pooling.validate_desc,
    execute=roi_pooling.execute_desc, random_inputs=roi_pooling.random_inputs,
    graphs="ep_testbed.graphs.ops.roi_pooling", cases="ep_testbed.graphs.cases.roi_pooling:catalog",
    onnx_ops=("MaxRoiPool",), onnx_input_roles={"MaxRoiPool": ("feature", "batch_boxes")},
    bounded=roi_pooling_bounds.execute_bounded, rules=roi_pooling.PRIMARY, readings=roi_pooling.READINGS,
    regions=roi_pooling.select_regions))
register(OpSpec(
    name="max_pooling2", desc=max_pooling2.MaxPooling2Desc, page=max_pooling2.PAGE,
    tensor_support=max_pooling2.TENSOR_SUPPORT, validate=max_pooling2.validate_desc,
    execute=max_pooling2.execute_desc, random_inputs=max_pooling2.random_inputs,
    graphs="ep_testbed.graphs.ops.max_pooling2", cases="ep_testbed.graphs.cases.max_pooling2:catalog",
    onnx_ops=("MaxPool",), index_outputs=max_pooling2.INDEX_OUTPUTS, index_rule=max_pooling2.window_contains,
    rules=max_pooling2.PRIMARY, readings=max_pooling2.READINGS))
register(OpSpec(
    name="roi_align", desc=roi_align.RoiAlignDesc, page=roi_align.PAGE_V0,
    tensor_support=roi_align.TENSOR_SUPPORT_V0, validate=roi_align.validate_desc,
    execute=roi_align.execute_desc, random_inputs=roi_align.random_inputs,
    graphs="ep_testbed.graphs.ops.roi_align", cases="ep_testbed.graphs.cases.roi_align:catalog_v0",
    bounded=roi_align_bounds.execute_bounded, check_values=roi_align.check_values, rules=roi_align.PRIMARY,
    readings=roi_align.READINGS, regions=roi_align.select_regions))
register(OpSpec(
    name="roi_align1", desc=roi_align.RoiAlign1Desc, page=roi_align.PAGE_V1,
    tensor_support=roi_align.TENSOR_SUPPORT_V1, validate=roi_align.validate_desc,
    execute=roi_align.execute_desc, random_inputs=roi_align.random_inputs,
    graphs="ep_testbed.graphs.ops.roi_align", cases="ep_testbed.graphs.cases.roi_align:catalog_v1",
    onnx_ops=("RoiAlign",), onnx_input_roles={"RoiAlign": ("feature", "boxes", "batch_index")},
    bounded=roi_align_bounds.execute_bounded, check_values=roi_align.check_values, rules=roi_align.PRIMARY,
    readings=roi_align.READINGS, regions=roi_align.select_regions))

#: The operators importing this module registers (every process has them; a spawned process must
#: be handed the records of any other: ``harness.fuzz.engine.Drawer``).
BUILT_IN: tuple[str, ...] = names()
