"""What every operator's case generators share: the ``Case`` record, naming, the pairwise grid,
and the float inputs of the ROI operators.

Inputs are derived from ``(id, seed)`` and drawn well conditioned, so that a mismatch means a
different computation, not a rounding accident: floats are multiples of 1/8 in [-4, 4] (exact
in float16; sums and bilinear weights of them stay far from float16 rounding ties in practice).
"""

from __future__ import annotations

import functools
import importlib
import zlib
from dataclasses import dataclass, field
from typing import Any, Callable, Optional

import numpy as np

from ...reference import DescError, validate
from ...reference.dtypes import filled, numpy_dtype
from ...reference.registry import checked_module, spec_named, spec_of_type, specs
from ..input_flags import input_flags
from ..pairwise import all_pairs

UINT32_MAX = 2**32 - 1
SHORT_DTYPE = {"FLOAT32": "fp32", "FLOAT16": "fp16"}


@dataclass(frozen=True)
class Case:
    """One named case: a desc, a seed, tags. ``op`` is the operator's ``DML_OPERATOR_*`` name
    (as result lines carry it); ``inputs()`` is deterministic in ``(id, seed)``; ``recipe`` names the input generator of the
    operator's cases module (``random``, ``outside-partly``, ``nan-inf``, ...)."""

    id: str
    op: str
    desc: Any
    seed: int
    opset: Optional[int] = None
    tags: dict = field(default_factory=dict, hash=False, compare=False)
    recipe: str = "random"

    def inputs(self) -> dict[str, np.ndarray]:
        """The input arrays by DML member name (as ``reference.execute`` takes them)."""
        rng = np.random.default_rng([zlib.crc32(self.id.encode()), self.seed])
        return cases_module(self.op).make_inputs(self.desc, self.recipe, rng)


def cases_module(op_type: str) -> Any:
    """The cases module of an operator (``DML_OPERATOR_*`` name), checked against
    ``registry.CASES_HOOKS`` once per process (``registry.OperatorContractError`` naming the
    operator, module and missing hook)."""
    spec = spec_of_type(op_type)
    if spec is None:
        raise ValueError(f"op = {op_type!r}: no registered operator has this DML_OPERATOR_* name")
    return checked_module(spec, "cases", importlib.import_module(spec.cases_module))


def cases_builder(op: str) -> Callable[[int], list[Case]]:
    """The function that lists an operator's catalog cases for a seed."""
    spec = spec_named(op)
    return getattr(cases_module(spec.dml_type), spec.catalog_function)


def catalog_cases(op: str, seed: int) -> list[Case]:
    """An operator's catalog for a seed (``cases_builder``), built once per process: a run's
    catalog and its preflight's probe case (``probe_case``) share it (building MAX_POOLING2's
    covering array takes most of a second)."""
    return list(_built(cases_builder(op), seed))


@functools.lru_cache(maxsize=64)
def _built(builder: Callable[[int], list[Case]], seed: int) -> tuple[Case, ...]:
    """``builder(seed)``, kept (cases are frozen: sharing them changes nothing)."""
    return tuple(builder(seed))


def num(v: float) -> str:
    """A number as it appears in a case id (``-0.5`` -> ``m0.5``)."""
    return f"{v:g}".replace("-", "m")


def make_case(op: str, name: str, desc: Any, seed: int, family: str, recipe: str = "random", opset=None,
              **extra: str) -> Case:
    """A case ``<op>/<name>`` tagged with its dtype and family (``grid``, ``random``, ``edge-*``)."""
    tags = {"dtype": desc.input_tensor.data_type.lower(), "family": family, **extra}
    return Case(id=f"{op}/{name}", op=spec_named(op).dml_type, desc=desc, seed=seed, opset=opset, tags=tags, recipe=recipe)


_GRID_ROWS: dict[str, list[dict]] = {}


def grid(key: str, params, valid=None) -> list[dict]:
    """``all_pairs`` rows, computed once per process (the grid does not depend on the seed)."""
    if key not in _GRID_ROWS:
        _GRID_ROWS[key] = all_pairs(params, valid=valid)
    return [dict(row) for row in _GRID_ROWS[key]]


def is_valid(desc) -> bool:
    """Whether ``desc`` obeys its page."""
    try:
        validate(desc)
    except DescError:
        return False
    return True


def float_values(rng: np.random.Generator, shape, dtype) -> np.ndarray:
    """Multiples of 1/8 in [-4, 4], allocated in ``dtype`` directly (``dtypes.filled``)."""
    return filled(tuple(shape), dtype, lambda n: rng.integers(-32, 33, size=n) / 8)


def roi_op_inputs(desc: Any, recipe: str, rng: np.random.Generator,
                  regions: Callable[[Any, str, np.random.Generator], dict[str, np.ndarray]]) -> dict[str, np.ndarray]:
    """Inputs of an ROI operator: the feature map for ``recipe`` (``ties``: integers in [0, 3];
    ``nan-inf``: a twentieth NaN/+inf/-inf, X[:, :, 0, 0] kept finite; ``near-flt-max``: values from
    2**126 to 2**127), then regions drawn by
    ``regions`` until none raises an input flag (50 tries; ``nan-inf``, ``float32-bins`` and
    ``count-knife-edge`` exist to raise one)."""
    x_dtype = numpy_dtype(desc.input_tensor.data_type)
    x = float_values(rng, desc.input_tensor.sizes, x_dtype)
    if recipe == "ties":
        x = filled(desc.input_tensor.sizes, x_dtype, lambda n: rng.integers(0, 4, size=n))
    if recipe == "near-flt-max":  # 2**126 to 2**127: a float32 sum of a few overflows, their exact mean does not
        x = ((np.abs(x.astype(np.float64)) + 4) * 2.0**124).astype(x_dtype)
    if recipe in ("nan-inf", "nan"):  # "nan": NaN alone, so that only a rule for NaN can show
        flat = x.reshape(-1)
        picks = rng.choice(flat.size, size=max(3, flat.size // 20), replace=False)
        specials = [np.nan, np.inf, -np.inf] if recipe == "nan-inf" else [np.nan]
        flat[picks] = np.array(specials, dtype=x_dtype)[np.arange(picks.size) % len(specials)]
        x[:, :, 0, 0] = 1  # ORT reads X[b, c, 0, 0] for out-of-range samples (input_flags); keep it finite
    tensors = {"InputTensor": x}
    for _ in range(50):
        tensors.update(regions(desc, recipe, rng))
        if recipe in ("nan-inf", "nan", "float32-bins", "count-knife-edge") or not input_flags(desc, tensors):
            break
    return tensors


# --- fuzzed and literal cases -----------------------------------------------------------------

#: A named variation of an operator's base desc: ``(name, the desc builder's overrides, recipe)``.
Variation = tuple[str, dict[str, Any], str]

#: The random stream a fuzzed case's input values come from, with its ``value_seed``.
FUZZ_STREAM = 0xF022
#: The prefix of a fuzzed case's recipe: ``fuzz:<value kind>[:<region kind>]``.
FUZZ_RECIPE = "fuzz"


@dataclass(frozen=True)
class FuzzDraw:
    """What an operator's fuzz strategy draws: a valid desc, an input recipe
    (``fuzz:<value kind>[:<region kind>]``), the seed of its input values and an opset (None:
    the mapper's default). ``ep-testbed fuzz`` names it and turns it into a ``FuzzCase``."""

    desc: Any
    recipe: str
    value_seed: int
    opset: Optional[int] = None


@dataclass(frozen=True)
class FuzzCase(Case):
    """A fuzzed case: its inputs come from ``value_seed`` (not from its id), so a shrunk
    variant with another id keeps the values its draw says."""

    value_seed: int = 0

    def inputs(self) -> dict[str, np.ndarray]:
        """The input arrays by DML member name, deterministic in ``(recipe, value_seed)``."""
        rng = np.random.default_rng([FUZZ_STREAM, self.value_seed])
        return cases_module(self.op).make_inputs(self.desc, self.recipe, rng)


@dataclass(frozen=True)
class LiteralCase(Case):
    """A case whose inputs are given arrays (keyed by DML member name): a shrunk failure or a
    corpus case."""

    arrays: dict = field(default_factory=dict, hash=False, compare=False)

    def inputs(self) -> dict[str, np.ndarray]:
        """Copies of the given arrays (a run may not change the case)."""
        return {name: np.array(array, copy=True) for name, array in self.arrays.items()}


def desc_elements(desc: Any) -> int:
    """Elements of every input and output tensor of ``desc`` together: the size a shrink reduces."""
    total = 0
    for member in (*desc.INPUTS, *desc.OUTPUTS):
        tensor = getattr(desc, _attribute(desc, member))
        total += tensor.element_count if tensor is not None else 0
    return total


def _attribute(desc: Any, member: str) -> str:
    """The dataclass attribute that holds DML member ``member`` of ``desc``."""
    from ...reference.descs import attribute_of

    return attribute_of(type(desc), member)


#: Input value kinds of fuzzed cases, simplest first (a shrink moves towards the first).
VALUE_KINDS = ("small", "distinct", "ties", "specials", "ulp-neighbours", "near-rounding", "extremes", "minus-inf")
#: Region placements of fuzzed ROI cases, simplest first; ``mixed`` draws one kind per region.
REGION_KINDS = ("inside", "whole-image", "one-pixel", "outside-partly", "outside-wholly", "degenerate", "inverted",
                "tiny", "huge", "near-half", "mixed")


def fuzz_values(sizes: tuple[int, ...], data_type: str, kind: str, rng: np.random.Generator) -> np.ndarray:
    """Input values of one ``VALUE_KINDS`` kind: ``small`` integers in [-3, 3] ([0, 6] unsigned),
    ``distinct`` (unique maxima where the type has room), ``ties`` (integers in [0, 3]),
    ``specials`` (NaN, +-inf, -0, denormals, the largest finite values among small ones; the
    type's extremes for integers), ``ulp-neighbours`` (values a few ULPs apart), ``near-rounding``
    (every mantissa bit used), ``extremes`` (the type's range ends) and ``minus-inf`` (a block
    of -inf or the type's minimum)."""
    dtype = numpy_dtype(data_type)
    count = int(np.prod(sizes)) if len(sizes) else 1
    if kind in ("distinct", "near-rounding", "extremes") or np.issubdtype(dtype, np.floating):
        make = _FLOAT_KINDS if np.issubdtype(dtype, np.floating) else _INT_KINDS
        return make.get(kind, make["small"])(count, dtype, rng).reshape(sizes)
    return _INT_KINDS.get(kind, _INT_KINDS["small"])(count, dtype, rng).reshape(sizes)


def _small(count: int, dtype: np.dtype, rng: np.random.Generator) -> np.ndarray:
    """Integers in [-3, 3] ([0, 6] for unsigned types)."""
    low = 0 if np.issubdtype(dtype, np.unsignedinteger) else -3
    return rng.integers(low, low + 7, size=count).astype(dtype)


def _distinct_floats(count: int, dtype: np.dtype, rng: np.random.Generator) -> np.ndarray:
    """Distinct multiples of 1/8 (repeating past 2048 values)."""
    span = min(count, 2048)  # multiples of 1/8 below 256: exact in float16
    return ((rng.permutation(count) % span - span // 2) / 8).astype(dtype)


def _specials(count: int, dtype: np.dtype, rng: np.random.Generator) -> np.ndarray:
    """Distinct values with a fifth of them NaN, +-inf, -0, +-denormal, +-max or the smallest normal."""
    info = np.finfo(dtype)
    pool = np.array([np.nan, np.inf, -np.inf, -0.0, info.smallest_subnormal, -info.smallest_subnormal,
                     info.max, -info.max, info.tiny], dtype=dtype)
    x = _distinct_floats(count, dtype, rng)
    picks = rng.random(count) < 0.2
    x[picks] = rng.choice(pool, size=int(picks.sum()))
    return x


def _ulp_neighbours(count: int, dtype: np.dtype, rng: np.random.Generator) -> np.ndarray:
    """One base value and its neighbours up to three ULPs away on either side."""
    base = np.array(rng.choice([1.0, -2.5, 1000.0, 0.0]), dtype=dtype)
    steps = rng.integers(-3, 4, size=count)
    up, down = np.nextafter(base, dtype.type(np.inf)), np.nextafter(base, dtype.type(-np.inf))
    x = np.full(count, base, dtype=dtype)
    x[steps > 0], x[steps < 0] = up, down
    for _ in range(2):  # a second and third step away, so neighbours of neighbours occur too
        x[steps > 1] = np.nextafter(x[steps > 1], dtype.type(np.inf))
        x[steps < -1] = np.nextafter(x[steps < -1], dtype.type(-np.inf))
        steps = steps - np.sign(steps)
    return x


def _near_rounding(count: int, dtype: np.dtype, rng: np.random.Generator) -> np.ndarray:
    """Uniform values in [-4, 4] using every mantissa bit (sums land near rounding boundaries)."""
    return rng.uniform(-4, 4, size=count).astype(dtype)


def _float_extremes(count: int, dtype: np.dtype, rng: np.random.Generator) -> np.ndarray:
    """The largest finite values, half of them, the smallest normals, +-1 and 0."""
    info = np.finfo(dtype)
    pool = np.array([info.max, -info.max, info.max / 2, -info.tiny, info.tiny, 1.0, -1.0, 0.0], dtype=dtype)
    return rng.choice(pool, size=count)


def _minus_inf_block(count: int, dtype: np.dtype, rng: np.random.Generator) -> np.ndarray:
    """Distinct values with a quarter of them, in one block, -inf (the type's minimum for integers)."""
    x = _distinct_floats(count, dtype, rng) if np.issubdtype(dtype, np.floating) else _int_distinct(count, dtype, rng)
    lowest = -np.inf if np.issubdtype(dtype, np.floating) else np.iinfo(dtype).min
    start = int(rng.integers(0, count))
    x[start:start + max(1, count // 4)] = lowest
    return x


def _int_distinct(count: int, dtype: np.dtype, rng: np.random.Generator) -> np.ndarray:
    """A permutation of distinct integers where the type has room, uniform ones otherwise."""
    info = np.iinfo(dtype)
    lo, hi = max(int(info.min), -count), min(int(info.max), count)
    if hi - lo + 1 >= count:
        return rng.permutation(np.arange(lo, lo + count)).astype(dtype)
    return rng.integers(lo, hi + 1, size=count).astype(dtype)  # 8-bit types: ties unavoidable


def _int_uniform(count: int, dtype: np.dtype, rng: np.random.Generator) -> np.ndarray:
    """Integers uniform over the whole type."""
    info = np.iinfo(dtype)
    return rng.integers(int(info.min), int(info.max), size=count, endpoint=True, dtype=dtype)


def _int_extremes(count: int, dtype: np.dtype, rng: np.random.Generator) -> np.ndarray:
    """The type's minimum and maximum, their neighbours, 0 and 1."""
    info = np.iinfo(dtype)
    pool = np.array(sorted({int(info.min), int(info.min) + 1, 0, 1, int(info.max) - 1, int(info.max)}), dtype=dtype)
    return rng.choice(pool, size=count)


_FLOAT_KINDS = {"small": lambda n, d, r: _small(n, d, r), "distinct": _distinct_floats,
                "ties": lambda n, d, r: r.integers(0, 4, size=n).astype(d), "specials": _specials,
                "ulp-neighbours": _ulp_neighbours, "near-rounding": _near_rounding, "extremes": _float_extremes,
                "minus-inf": _minus_inf_block}
_INT_KINDS = {"small": _small, "distinct": _int_distinct, "ties": lambda n, d, r: r.integers(0, 4, size=n).astype(d),
              "specials": _int_extremes, "ulp-neighbours": lambda n, d, r: (_small(n, d, r) // 3).astype(d),
              "near-rounding": _int_uniform, "extremes": _int_extremes, "minus-inf": _minus_inf_block}


def fuzz_regions(kind: str, count: int, height: int, width: int, rng: np.random.Generator) -> np.ndarray:
    """``count`` regions ``[x1, y1, x2, y2]`` (float64, in scaled input pixels) of one
    ``REGION_KINDS`` placement over a ``height`` x ``width`` input; ``mixed`` draws a kind per region."""
    if kind == "mixed":
        kinds = rng.choice([k for k in REGION_KINDS if k != "mixed"], size=count)
        return np.stack([fuzz_regions(str(k), 1, height, width, rng)[0] for k in kinds]) if count else \
            np.zeros((0, 4))
    h, w = float(height), float(width)
    x1, y1 = _grid(rng, -1, w - 1, count), _grid(rng, -1, h - 1, count)
    x2, y2 = x1 + _grid(rng, 0.5, w, count), y1 + _grid(rng, 0.5, h, count)
    if kind == "whole-image":
        x1, y1, x2, y2 = np.zeros(count), np.zeros(count), np.full(count, w), np.full(count, h)
    elif kind == "one-pixel":
        x1, y1 = _grid(rng, 0, w - 1, count), _grid(rng, 0, h - 1, count)
        x2, y2 = x1 + 1, y1 + 1
    elif kind == "outside-partly":
        x1, y1 = _grid(rng, -4, w / 2, count), _grid(rng, -4, h / 2, count)
        x2, y2 = x1 + _grid(rng, w / 2, w + 4, count), y1 + _grid(rng, h / 2, h + 4, count)
    elif kind == "outside-wholly":
        x1, y1 = _grid(rng, w + 1, w + 6, count), _grid(rng, -8, -3, count)
        x2, y2 = x1 + _grid(rng, 1, 4, count), y1 + _grid(rng, 1, 2, count)
    elif kind == "degenerate":
        x2, y2 = x1.copy(), np.where(rng.random(count) < 0.5, y1, y2)
    elif kind == "inverted":
        x1, x2, y1, y2 = x2, x1, y2, y1
    elif kind == "tiny":
        x2, y2 = x1 + _grid(rng, 0, 0.5, count), y1 + _grid(rng, 0, 0.5, count)
    elif kind == "huge":
        x1, y1 = -_grid(rng, 2 * w, 4 * w + 64, count), -_grid(rng, 2 * h, 4 * h + 64, count)
        x2, y2 = _grid(rng, 2 * w, 4 * w + 64, count), _grid(rng, 2 * h, 4 * h + 64, count)
    elif kind == "near-half":
        x1, y1 = rng.integers(0, width, count) + 0.5, rng.integers(0, height, count) + 0.5
        x2 = x1 + rng.integers(0, width, count) + rng.choice([-1e-6, 0.0, 1e-6], count)
        y2 = y1 + rng.integers(0, height, count) + rng.choice([-1e-6, 0.0, 1e-6], count)
    return np.stack([x1, y1, x2, y2], axis=1)


def _grid(rng: np.random.Generator, lo: float, hi: float, count: int) -> np.ndarray:
    """Multiples of 1/16 in [lo, hi]: exact in float16 for |v| < 128."""
    return np.round(rng.uniform(lo, max(lo, hi), count) * 16) / 16


def fuzz_recipe(recipe: str) -> tuple[str, str]:
    """``"fuzz:<values>[:<regions>]"`` -> ``(values, regions)`` (regions ``"inside"`` when absent)."""
    _, values, regions = (recipe.split(":") + ["inside"])[:3]
    return values, regions


# --- shrink moves: smaller variants of a case (the cases modules' ``shrink_moves``) -------------

#: What a cases module's ``shrink_moves(desc, arrays)`` yields: a smaller desc and its input arrays.
Variant = tuple[Any, dict[str, np.ndarray]]


def sized(tensor: Any, sizes: Any) -> Any:
    """``tensor`` (a ``TensorDesc``) with other sizes, packed (strides change no value: DECISIONS.md)."""
    return type(tensor)(tensor.data_type, tuple(int(s) for s in sizes))


def kept_subsets(count: int) -> list[list[int]]:
    """Which of ``count`` items (regions, channels, images) a smaller variant keeps, the largest
    cut first: each one alone, then each half; none for a single item."""
    if count <= 1:
        return []
    halves = [list(range(count // 2)), list(range(count // 2, count))] if count > 2 else []
    return [[i] for i in range(count)] + halves


def kept_spans(size: int, step: int = 1) -> list[tuple[int, int]]:
    """Spans ``[begin, end)`` of an axis of ``size`` a smaller variant keeps, the largest cut
    first: each half, then all but the last or the first ``step``; every begin a multiple of
    ``step`` (a pooling window's stride: the windows kept see what they saw)."""
    half = -(-size // 2)
    spans = [(0, half), ((size // 2) // step * step, size), (0, size - step), (step, size)]
    seen: list[tuple[int, int]] = []
    for begin, end in spans:
        if 0 <= begin < end <= size and end - begin < size and (begin, end) not in seen:
            seen.append((begin, end))
    return seen


def image_moves(batch: int, indices: np.ndarray) -> list[tuple[np.ndarray, np.ndarray]]:
    """``(images kept, regions kept)`` of the smaller variants of an ROI case whose regions read
    the images ``indices`` of a batch of ``batch``: every region with only the images they read
    (when they leave some unread), then each read image alone with its regions; none when a
    region reads past the batch (the case is about that)."""
    if indices.size == 0 or bool(np.any(indices >= batch)) or bool(np.any(indices < 0)):
        return []
    read = np.unique(indices)
    moves = [(read, np.arange(indices.size))] if read.size < batch else []
    return moves + ([(read[i:i + 1], np.flatnonzero(indices == read[i])) for i in range(read.size)]
                    if read.size > 1 else [])


def shifted(values: np.ndarray, by: float) -> np.ndarray:
    """``values + by`` computed in float64 and rounded once to ``values``'s type (ROI corners moved
    with a crop of the feature map)."""
    return (values.astype(np.float64) + by).astype(values.dtype)


# --- tiers ---------------------------------------------------------------------------------

#: What ``build_catalog(tier=...)`` offers: a few cases per operator for a pre-commit check, the
#: catalog, detection-, classifier- and GPU-boundary-sized cases, and those of them that a CPU
#: machine runs in a CI job (``CPU_TIER_SECONDS``, ``CPU_TIER_MB``).
TIERS = ("smoke", "default", "stress", "stress-cpu")
#: A worker process with NumPy and ONNX Runtime loaded, before any case.
PROCESS_BASELINE_BYTES = 150 * 2**20
#: ``stress-cpu`` holds the stress cases whose stated cost (``seconds``, ``memory_mb``) is at most
#: these: each runs in a second or two on a 2-core CPU machine, beside the rest of a CI job's tests.
CPU_TIER_SECONDS = 2.0
CPU_TIER_MB = 1024


def tier_cases(op: str, seed: int, tier: str) -> list[Case]:
    """The cases of ``op`` in ``tier``: its catalog, the catalog cases its cases module's
    ``SMOKE`` patterns pick (``smoke``), its ``stress_cases(op, seed)`` (``stress``), or those of
    them whose stated cost fits a CPU machine's CI job (``stress-cpu``, ``fits_cpu_tier``)."""
    if tier not in TIERS:
        raise ValueError(f"tier = {tier!r}: one of {', '.join(TIERS)}")
    if tier.startswith("stress"):
        cases = cases_module(spec_named(op).dml_type).stress_cases(op, seed)
        return cases if tier == "stress" else [c for c in cases if fits_cpu_tier(c)]
    cases = catalog_cases(op, seed)
    if tier == "default":
        return cases
    import fnmatch

    patterns = cases_module(spec_named(op).dml_type).SMOKE
    return [c for c in cases if any(fnmatch.fnmatchcase(c.id, f"{op}/{p}") for p in patterns)]


def probe_case(seed: int = 0) -> Case:
    """The case ``doctor`` and ``run`` check an EP's session with: the first catalog case matching
    the ``PROBE`` pattern (after ``<op>/``) of the first registered operator whose cases module
    names one, built by the module's ``probe(seed)`` where it has one (a ``fuzz`` would otherwise
    draw a catalog it never runs); ValueError when none does."""
    import fnmatch

    for spec in specs():
        module = cases_module(spec.dml_type)
        pattern = getattr(module, "PROBE", None)
        if pattern and getattr(module, "probe", None) is not None:
            return module.probe(seed)  # the one case, without drawing the whole catalog
        if pattern:
            found = (c for c in catalog_cases(spec.name, seed) if fnmatch.fnmatchcase(c.id, f"{spec.name}/{pattern}"))
            case = next(found, None)
            if case is not None:
                return case
    raise ValueError("no registered operator names a PROBE catalog case (reference.registry.CASES_HOOKS): give one "
                     "operator's cases module PROBE = '<case id pattern>'")


def memory_need(desc: Any, input_copies: float = 3, per_output: int = 100) -> int:
    """Bytes a worker needs at most to run one case of ``desc``, estimated: ``input_copies``
    times the inputs (the arrays, their feeds, the reference's padded or gathered copy) and
    ``per_output`` bytes per output element (the reference's work arrays, the expected and
    actual outputs, the comparison's float64 differences and masks), over the process's own
    ``PROCESS_BASELINE_BYTES``. The defaults hold for the ROI operators (measured: up to 90
    bytes per output element with 10,000 regions, and a failing case, whose error statistics
    take more, 4 MiB over 96 bytes per element on 4.2M elements); ROI_POOLING states six input
    copies, MAX_POOLING2 its own factors (2 and 48).
    ``benchmarks/bench_stress_memory.py`` prints the measured peak of every stress case next to it."""
    inputs = tensors_bytes(desc, desc.INPUTS)
    outputs = sum(_tensor(desc, m).element_count for m in desc.OUTPUTS if _tensor(desc, m) is not None)
    return int(input_copies * inputs) + per_output * outputs + PROCESS_BASELINE_BYTES


def tensors_bytes(desc: Any, members: tuple[str, ...]) -> int:
    """Bytes the arrays of DML members ``members`` of ``desc`` hold (absent optional ones: 0):
    what a case allocates at the least before any work."""
    return sum(t.element_count * numpy_dtype(t.data_type).itemsize
               for t in (_tensor(desc, m) for m in members) if t is not None)


def _tensor(desc: Any, member: str) -> Any:
    """The tensor desc of DML member ``member`` (None for an absent optional output)."""
    return getattr(desc, _attribute(desc, member))


#: The stated time of a case (``time_need``), in seconds on a 2-core CPU machine with the CPU EP:
#: a fixed part (mapping, session, process work), the reference's, per value its kernel touches
#: (a sample value, a window element: each cases module counts them), and judging, per output
#: element of a case that passes. A case whose comparison fails takes about four times as long to
#: judge (compared again against the reading that explains it, its errors summarized, its operator
#: node re-checked). Fitted to ``ep-testbed run --ep cpu --tier stress`` on such a machine at a
#: load of 2 to 6, where the estimates held every passing case's measured time;
#: ``benchmarks/bench_stress_memory.py`` prints every stress case's measured time next to its
#: stated one, and ``run --tier stress`` both in its table of where each case's time went. They are
#: upper bounds, and generous ones since the reference's bounds got faster: passing cases now
#: measure 3 to 14 times under them on a 2-core machine. They are kept, not refitted, because
#: ``stress-cpu`` (what a CPU machine's CI job runs) is chosen by them: tighter figures would move
#: cases into it, one of them ``known`` on the CPU EP.
CASE_SECONDS = 0.3
SECONDS_PER_REFERENCE_VALUE = 30e-9
SECONDS_PER_JUDGED_OUTPUT = 0.8e-6


def time_need(desc: Any, reference_values: Optional[int] = None) -> float:
    """Seconds one passing case of ``desc`` takes, estimated (the constants above): the reference
    touching ``reference_values`` values (default: one per output element) and the judging of
    every output element."""
    outputs = sum(_tensor(desc, m).element_count for m in desc.OUTPUTS if _tensor(desc, m) is not None)
    values = outputs if reference_values is None else reference_values
    return CASE_SECONDS + SECONDS_PER_REFERENCE_VALUE * values + SECONDS_PER_JUDGED_OUTPUT * outputs


def stress_case(op: str, name: str, desc: Any, seed: int, recipe: str, input_copies: float = 3,
                per_output: int = 100, reference_values: Optional[int] = None) -> Case:
    """A stress-tier case ``<op>/stress-<name>`` that states its cost: its memory need
    (``memory_mb``, ``memory_need`` with the operator's factors) and its time (``seconds``,
    ``time_need`` with the values its reference touches)."""
    case = make_case(op, f"stress-{name}", desc, seed, "stress", recipe=recipe)
    case.tags["memory_mb"] = str(-(-memory_need(desc, input_copies, per_output) // 2**20))
    case.tags["seconds"] = f"{time_need(desc, reference_values):.1f}"
    return case


def fits_cpu_tier(case: Case) -> bool:
    """Whether a stress case's stated cost fits the ``stress-cpu`` tier (``CPU_TIER_SECONDS``,
    ``CPU_TIER_MB``)."""
    return float(case.tags["seconds"]) <= CPU_TIER_SECONDS and int(case.tags["memory_mb"]) <= CPU_TIER_MB


def detection_regions(count: int, height: int, width: int, scale: float, half: bool, rng: np.random.Generator,
                      quantum: tuple[float, float] = (1 / 16, 1 / 16)) -> np.ndarray:
    """``count`` regions ``[x1, y1, x2, y2]`` in ROITensor units, as a detector's proposals on a
    feature map ``1/scale`` times smaller than the image: with ``half`` False corners in the first
    80% of the image and sides up to 40% of it, with ``half`` True (``scale`` 1) sides up to half
    the image. On the feature map, corners are multiples of 1/16 and sides multiples of
    ``quantum`` (x, y): a RoiAlign passes ``output size * samples / 16``, so that every sample
    position is a multiple of 1/16 and exact in float32 like the catalog's, and a mismatch means
    another computation, not float32 coordinates rounding on a steep input (which moves a
    bilinear sample by 1e-4 of a value at these sizes)."""
    (qx, qy), grid = quantum, 1 / 16
    if half:
        x1, y1 = rng.uniform(0, width / 2, count), rng.uniform(0, height / 2, count)
        w, h = rng.uniform(1, width / 2, count), rng.uniform(1, height / 2, count)
    else:
        x1, y1 = rng.uniform(0, width * 0.8, count), rng.uniform(0, height * 0.8, count)
        w, h = rng.uniform(1, width * 0.4, count), rng.uniform(1, height * 0.4, count)
    x1, y1 = np.round(x1 / grid) * grid, np.round(y1 / grid) * grid
    w, h = np.maximum(1, np.round(w / qx)) * qx, np.maximum(1, np.round(h / qy)) * qy
    return np.stack([x1, y1, x1 + w, y1 + h], axis=1) / scale
