"""MAX_POOLING2 cases: a pairwise grid (every data type, 4-D and 5-D, windows, strides, pads,
dilations, indices), per-opset cases, edges, random ones.

Inputs are a permutation of distinct integer-valued numbers (unique maxima, so indices are
unambiguous) except in the ``ties`` recipe (integer values in [0, 3]) and where a type is too
narrow to hold distinct values (int8/uint8).
"""

from __future__ import annotations

from dataclasses import replace
from typing import Any, Iterator

import numpy as np

from ...reference.descs import TensorDesc
from ...reference.dtypes import numpy_dtype
from ...reference.max_pooling2 import MaxPooling2Desc, output_sizes
from .common import (
    FUZZ_RECIPE,
    Case,
    FuzzDraw,
    Variant,
    Variation,
    fuzz_recipe,
    fuzz_values,
    grid,
    is_valid,
    kept_spans,
    kept_subsets,
    make_case,
    sized,
    stress_case,
)


def catalog(seed: int) -> list[Case]:
    """The MAX_POOLING2 cases (registry ``cases``)."""
    return _max_pooling2_cases(seed)


def make_inputs(desc: MaxPooling2Desc, recipe: str, rng: np.random.Generator) -> dict[str, np.ndarray]:
    """A case's inputs by recipe (``random``, ``ties``, ``extremes``, ``int64-large``, ``nan-inf``,
    ``minus-inf``; a fuzzed case's ``fuzz:<value kind>``, see ``common.fuzz_values``)."""
    if recipe.startswith(FUZZ_RECIPE + ":"):
        values, _ = fuzz_recipe(recipe)
        return {"InputTensor": fuzz_values(desc.input_tensor.sizes, desc.input_tensor.data_type, values, rng)}
    return {"InputTensor": _maxpool_input(desc, recipe, rng)}


def fuzz_strategy(op: str = "max_pooling2", size: str = "default") -> Any:
    """A Hypothesis strategy of ``FuzzDraw``s over MAX_POOLING2's whole field space: every data
    type, 4-D and 5-D, windows from 1 to the whole input, strides, dilations, padding up to and
    past the window (every window still sees an input element, as the page requires), with or
    without indices of either type, any opset MaxPool changed in; simplest values first."""
    from hypothesis import assume
    from hypothesis import strategies as st

    from . import fuzzing

    bounds = fuzzing.limits(size)
    axis = {2: _fuzz_axis(bounds.spatial), 3: _fuzz_axis(bounds.spatial_3d)}  # built once: a composite is costly

    @st.composite
    def draw(draw: Any) -> FuzzDraw:
        """One MAX_POOLING2 draw (the enclosing docstring)."""
        dims = draw(fuzzing.choice([2, 3]))
        axes = [draw(axis[dims]) for _ in range(dims)]
        room = max(1, bounds.elements // int(np.prod([a["spatial"] for a in axes])))
        batch = draw(fuzzing.bounded(1, min(bounds.batch, room)))
        channels = draw(fuzzing.bounded(1, min(bounds.channels, room // batch)))
        row = dict(dtype=draw(fuzzing.choice(MAXPOOL_TYPES)), indices=draw(fuzzing.choice([None, "UINT64", "UINT32"])),
                   dims=dims, batch=batch, channels=channels,
                   **{key: tuple(a[key] for a in axes) for key in ("window", "stride", "start", "end", "dilation",
                                                                    "spatial")})
        desc = max_pooling2_desc(**row)
        assume(desc.output_tensor.element_count <= bounds.elements and is_valid(desc))
        values = draw(fuzzing.value_kind())
        opset = draw(fuzzing.weighted([(None, 4), (12, 1), (11, 1), (10, 1), (8, 1)]))
        if opset == 8 and any(d != 1 for d in desc.dilations):
            opset = 10  # MaxPool has dilations from opset 10 (the mapper refuses them at 8)
        return FuzzDraw(desc, fuzzing.recipe(values), draw(fuzzing.value_seed()), opset)

    return draw()


def shrink_moves(desc: MaxPooling2Desc, arrays: dict[str, np.ndarray]) -> Iterator[Variant]:
    """Smaller variants of a MAX_POOLING2 case (registry ``CASES_HOOKS``), the largest cut first:
    one image or channel (then halves), then each spatial axis cropped (halves, one stride less at
    either end; every begin a multiple of the stride, so the windows kept see what they saw), the
    output sizes recomputed by the page's formula (a crop the window no longer fits is left out).
    Each keeps part of the case as it was; the shrinker runs them on the EP and keeps one that
    fails as the case did."""
    x = arrays["InputTensor"]

    def variant(x: np.ndarray) -> Variant | None:
        out = output_sizes(x.shape, desc.window_size, desc.strides, desc.start_padding, desc.end_padding,
                           desc.dilations)
        if min(out) < 1:
            return None
        indices = desc.output_indices_tensor
        smaller = replace(desc, input_tensor=sized(desc.input_tensor, x.shape), output_tensor=sized(desc.output_tensor, out),
                          output_indices_tensor=None if indices is None else sized(indices, out))
        return smaller, {"InputTensor": x}

    def moves() -> Iterator[np.ndarray]:
        yield from (x[keep] for keep in kept_subsets(x.shape[0]))
        yield from (x[:, keep] for keep in kept_subsets(x.shape[1]))
        for axis in range(2, x.ndim):
            for begin, end in kept_spans(x.shape[axis], desc.strides[axis - 2]):
                yield np.take(x, range(begin, end), axis=axis)

    yield from (v for v in map(variant, moves()) if v is not None)


def _fuzz_axis(max_spatial: int) -> Any:
    """One spatial axis: window, stride, dilation, padding (up to the dilated window), size."""
    from hypothesis import strategies as st

    from . import fuzzing

    @st.composite
    def axis(draw: Any) -> dict:
        """One axis's window, stride, dilation, padding and size."""
        whole = draw(fuzzing.weighted([(False, 6), (True, 1)]))  # a window as large as the input
        window = draw(fuzzing.bounded(1, 5))
        dilation, stride = draw(fuzzing.bounded(1, 3)), draw(fuzzing.bounded(1, 4))
        dilated = (window - 1) * dilation + 1
        # Padding up to the dilated window (pads >= WindowSize: the page allows it, ONNX Runtime's
        # CPU EP refuses it) on one axis in six; below the window otherwise.
        big = draw(fuzzing.weighted([(False, 5), (True, 1)]))
        most = dilated - 1 if big else window - 1
        start, end = draw(fuzzing.bounded(0, most)), draw(fuzzing.bounded(0, most))
        low = max(1, dilated - start - end)
        spatial = draw(fuzzing.bounded(low, max_spatial))
        if whole:
            window, dilation, start, end = spatial, 1, min(start, spatial - 1), min(end, spatial - 1)
        return dict(window=window, stride=stride, dilation=dilation, start=start, end=end, spatial=spatial)

    return axis()


MAXPOOL_TYPES = ["FLOAT32", "FLOAT16", "INT8", "UINT8", "INT16", "UINT16", "INT32", "UINT32", "INT64", "UINT64"]


def max_pooling2_desc(dtype="FLOAT32", dims=2, window=2, stride=1, start=0, end=0, dilation=1, indices="UINT64",
                      batch=2, channels=3, spatial=None):
    spatial = tuple(spatial or ((7, 9) if dims == 2 else (4, 5, 6)))
    def per(v):
        return tuple(v) if isinstance(v, (tuple, list)) else (v,) * dims
    w, s, ps, pe, dl = per(window), per(stride), per(start), per(end), per(dilation)
    in_sizes = (batch, channels, *spatial)
    out = output_sizes(in_sizes, w, s, ps, pe, dl)
    return MaxPooling2Desc(
        input_tensor=TensorDesc(dtype, in_sizes), output_tensor=TensorDesc(dtype, out),
        output_indices_tensor=None if indices is None else TensorDesc(indices, out), dimension_count=dims,
        strides=s, window_size=w, start_padding=ps, end_padding=pe, dilations=dl)


def _mp_name(row) -> str:
    def t(v):
        return "x".join(str(x) for x in v) if isinstance(v, (tuple, list)) else str(v)
    return (f"{row['dtype'].lower()}-{row['dims']}d-w{t(row['window'])}-s{t(row['stride'])}-p{t(row['start'])}"
            f"_{t(row['end'])}-d{t(row['dilation'])}-idx{(row['indices'] or 'none').lower()}")


def _max_pooling2_cases(seed: int) -> list[Case]:
    return _grid_cases(seed) + _edge_cases(seed) + _random_cases(seed)


_GRID = [("dtype", MAXPOOL_TYPES), ("dims", [2, 3]), ("indices", [None, "UINT32", "UINT64"]),
         ("window", [1, 2, 3, (2, 3)]), ("stride", [1, 2, 3]), ("start", [0, 1]), ("end", [0, 1, 2]),
         ("dilation", [1, 2])]


def _widen(row: dict) -> dict:
    """A grid row with every per-axis tuple widened to ``dims`` values (the last one repeated)."""
    row = dict(row)
    for key in ("window", "stride", "start", "end", "dilation"):
        if isinstance(row[key], tuple) and len(row[key]) != row["dims"]:
            row[key] = row[key] + (row[key][-1],) * (row["dims"] - len(row[key]))
    return row


def _grid_valid(row: dict) -> bool:
    row = _widen(row)
    w = row["window"] if isinstance(row["window"], tuple) else (row["window"],) * row["dims"]
    if max(row["start"], row["end"]) >= min(w):   # ORT CPU refuses pads >= kernel: an edge case, not grid
        return False
    return is_valid(max_pooling2_desc(**row))


def _grid_cases(seed: int) -> list[Case]:
    """The pairwise grid, then one case per opset where MaxPool changed (8, 10 dilations, 11, 12 int8/uint8)."""
    op = "max_pooling2"
    cases = []
    for row in grid(op, _GRID, _grid_valid):
        row = _widen(row)
        cases.append(make_case(op, "grid-" + _mp_name(row), max_pooling2_desc(**row), seed, "grid"))
    for opset, dtype in ((8, "FLOAT32"), (10, "FLOAT16"), (11, "INT8"), (12, "UINT8")):
        row = dict(dtype=dtype, dims=2, window=3, stride=2, start=1, end=1, dilation=1 if opset < 10 else 2,
                   indices="UINT64")
        cases.append(make_case(op, f"grid-opset{opset}-" + _mp_name(row), max_pooling2_desc(**row), seed, "grid",
                               opset=opset))
    return cases


_EDGES: list[Variation] = [("ties", dict(window=3, stride=1), "ties"), ("ties-int8", dict(dtype="INT8", window=3, stride=2), "ties"),
          ("ties-3d-fp16", dict(dtype="FLOAT16", dims=3, window=2), "ties"),
          ("window-equals-input", dict(window=(7, 9), stride=1, spatial=(7, 9)), "random"),
          ("window-larger-than-input-padded", dict(window=(4, 4), start=(2, 2), end=(1, 1), spatial=(3, 3)), "random"),
          ("pads-ge-kernel", dict(window=2, dilation=3, start=2, end=2, stride=2), "random"),
          ("nan-inf", dict(window=2, stride=2), "nan-inf"),
          ("minus-inf-window", dict(window=2, stride=2), "minus-inf"),
          ("int64-large", dict(dtype="INT64", window=2), "int64-large"),
          ("uint64-extremes", dict(dtype="UINT64", window=3, stride=2), "extremes"),
          ("int8-extremes", dict(dtype="INT8", window=2), "extremes"),
          ("large-batch", dict(batch=32, channels=8, spatial=(12, 12), window=2, stride=2), "random"),
          ("dilation-padding-5d", dict(dims=3, window=2, dilation=2, start=1, end=1), "random"),
          # every field different per axis, so a kernel that applies one to the wrong axis fails
          ("every-field-per-axis", dict(window=(2, 3), stride=(1, 2), dilation=(2, 1), start=(1, 0), end=(0, 2),
                                        spatial=(8, 11)), "random")]

#: Edge cases that exist to show a known difference: the tags say which and why.
_EDGE_TAGS = {
    "nan-inf": {"expect": "diverges", "why": "NaN inputs: ORT's indexed MaxPool lets a NaN that comes first in a "
                "window win, the reference ignores NaN"},
    "uint64-extremes": {"expect": "inexpressible", "why": "UINT64 values near 2^64 collide in the float64 the "
                        "composition pools in"},
    "pads-ge-kernel": {"expect": "diverges", "why": "pads >= kernel_shape: ORT's CPU kernel refuses the model"},
}


def _edge_cases(seed: int) -> list[Case]:
    return [make_case("max_pooling2", f"edge-{name}", max_pooling2_desc(**over), seed, f"edge-{recipe}",
                      recipe=recipe, **_EDGE_TAGS.get(name, {})) for name, over, recipe in _EDGES]


def _random_cases(seed: int, count: int = 16) -> list[Case]:
    """``count`` valid descs drawn from ``seed`` (pads below the window, as ORT's CPU EP needs)."""
    rng = np.random.default_rng([seed, 3])
    cases: list[Case] = []
    while len(cases) < count:
        dims = int(rng.integers(2, 4))
        row: dict[str, Any] = dict(dtype=MAXPOOL_TYPES[rng.integers(len(MAXPOOL_TYPES))], dims=dims,
                   window=tuple(int(v) for v in rng.integers(1, 4, dims)),
                   stride=tuple(int(v) for v in rng.integers(1, 4, dims)),
                   start=tuple(int(v) for v in rng.integers(0, 2, dims)),
                   end=tuple(int(v) for v in rng.integers(0, 2, dims)),
                   dilation=tuple(int(v) for v in rng.integers(1, 3, dims)),
                   indices=[None, "UINT32", "UINT64"][rng.integers(3)], batch=int(rng.integers(1, 4)),
                   channels=int(rng.integers(1, 4)),
                   spatial=tuple(int(v) for v in rng.integers(3, 10 if dims == 2 else 7, dims)))
        if any(p >= w for p, w in zip(row["start"] + row["end"], row["window"] * 2)):
            continue
        desc = max_pooling2_desc(**row)
        if is_valid(desc):
            cases.append(make_case("max_pooling2", f"random-s{seed}-{len(cases):03d}", desc, seed, "random"))
    return cases


#: The one-node session ``doctor`` and ``run`` check an EP with: a float32 2-D MaxPool (every EP
#: under test runs one; ``graphs.cases.common.probe_case``).
PROBE = "grid-float32-2d-w1-s1-p0_0-d1-idxnone"


def probe(seed: int) -> Case:
    """The ``PROBE`` catalog case, built alone: the same grid row, id, desc and seed (a test
    holds it equal to the catalog's)."""
    row = {"dtype": "FLOAT32", "dims": 2, "indices": None, "window": 1, "stride": 1, "start": 0, "end": 0,
           "dilation": 1}
    return make_case("max_pooling2", "grid-" + _mp_name(row), max_pooling2_desc(**row), seed, "grid")
#: The smoke tier: catalog cases (id patterns after ``max_pooling2/``) a pre-commit check runs.
SMOKE = ("edge-ties", "edge-window-equals-input", "edge-minus-inf-window", "edge-dilation-padding-5d",
         "edge-int8-extremes", "random-s*-000", "random-s*-001")

#: The stress tier: ``(name, max_pooling2_desc arguments, recipe)``. Classifier stems, a 5-D
#: pool, a window as large as the input, output counts one 64-thread group below, at and
#: above 65,535 groups and around 2^24 (with UINT32 indices past 2^24, where float index
#: arithmetic loses whole numbers), and UINT32 indices past 2^31 and up to 2^32 - 2 (INT8
#: inputs of 2^31 + 32,768 and 2^32 - 1 elements: the largest offsets UINT32 represents).
STRESS: list[Variation] = [
    ("classifier-1x64x112x112-3x3-s2-p1-fp32", dict(batch=1, channels=64, spatial=(112, 112), window=3, stride=2,
                                                    start=1, end=1), "random"),
    ("classifier-1x64x112x112-3x3-s2-p1-fp16", dict(dtype="FLOAT16", batch=1, channels=64, spatial=(112, 112),
                                                    window=3, stride=2, start=1, end=1), "random"),
    ("classifier-1x64x112x112-3x3-s2-p1-idxuint32", dict(batch=1, channels=64, spatial=(112, 112), window=3, stride=2,
                                                         start=1, end=1, indices="UINT32"), "random"),
    ("5d-1x16x32x56x56-3x3x3-s1x2x2-p1-d2", dict(dims=3, batch=1, channels=16, spatial=(32, 56, 56), window=3,
                                                 stride=(1, 2, 2), start=1, end=1, dilation=2), "random"),
    ("window-as-input-1x64x112x112", dict(batch=1, channels=64, spatial=(112, 112), window=112), "random"),
    *[(f"out-64x{h}-groups-of-64", dict(batch=1, channels=64, spatial=(h, 2), window=(1, 2), indices="UINT32"),
       "random") for h in (65534, 65535, 65536)],
    *[(f"out-4096x{w}-around-2^24-idxuint32", dict(batch=1, channels=1, spatial=(4096, w), window=1, indices="UINT32"),
       "random") for w in (4095, 4096, 4097)],
    ("int8-idxuint32-past-2^31", dict(dtype="INT8", batch=1, channels=1, spatial=(32768, 65537), window=(1, 64),
                                      stride=(1, 64), indices="UINT32"), "pattern"),
    ("int8-idxuint32-2^32-1-elements", dict(dtype="INT8", batch=1, channels=1, spatial=(65535, 65537),
                                            window=(1, 64), stride=(1, 64), indices="UINT32"), "pattern"),
]


def stress_cases(op: str, seed: int) -> list[Case]:
    """The MAX_POOLING2 stress tier (``STRESS``), each case tagged with its memory need (the
    reference copies the padded input once; measured up to 44 bytes per output element)."""
    return [stress_case(op, name, desc, seed, recipe, input_copies=2, per_output=48,
                        reference_values=window_values(desc))
            for name, row, recipe in STRESS for desc in [max_pooling2_desc(**row)]]


def window_values(desc: MaxPooling2Desc) -> int:
    """The window elements the reference reads for ``desc`` (each output's window), counted in
    4-byte values: its passes over them are memory-bound, an INT8 one a quarter of a FLOAT32 one."""
    size = numpy_dtype(desc.input_tensor.data_type).itemsize
    return desc.output_tensor.element_count * int(np.prod(desc.window_size)) * size // 4


def _pattern(desc: MaxPooling2Desc) -> np.ndarray:
    """Inputs of billions of elements, made without a random draw per element: along the last
    axis ``(i * 37) % 127`` (shifted to the type), the same in every row, so any 127
    consecutive elements of a row are distinct and a window along it has one maximum."""
    sizes = desc.input_tensor.sizes
    dtype = numpy_dtype(desc.input_tensor.data_type)
    low = 0 if np.issubdtype(dtype, np.unsignedinteger) or np.issubdtype(dtype, np.floating) else -63
    row = ((np.arange(sizes[-1], dtype=np.int64) * 37) % 127 + low).astype(dtype)
    return np.ascontiguousarray(np.broadcast_to(row, sizes))


def _maxpool_input(desc: MaxPooling2Desc, recipe: str, rng) -> np.ndarray:
    sizes = desc.input_tensor.sizes
    dtype = numpy_dtype(desc.input_tensor.data_type)
    count = int(np.prod(sizes))
    if recipe == "pattern":
        return _pattern(desc)
    if recipe == "ties":
        return rng.integers(0, 4, size=sizes).astype(dtype)
    if recipe == "extremes":
        info = np.iinfo(dtype)
        return rng.choice(np.array([info.min, info.min + 1, 0, info.max - 1, info.max], dtype=dtype), size=sizes)
    if recipe == "int64-large":
        values = rng.permutation(count).astype(np.int64) * (2**40) - 2**52
        return values.reshape(sizes).astype(dtype)
    if np.issubdtype(dtype, np.integer):
        info = np.iinfo(dtype)
        lo, hi = max(int(info.min), -count), min(int(info.max), count)
        if hi - lo + 1 >= count:
            values = rng.permutation(np.arange(lo, lo + count))       # distinct: unique maxima
        else:
            values = rng.integers(lo, hi + 1, size=count)            # int8/uint8: ties unavoidable
        return values.reshape(sizes).astype(dtype)
    # floats: distinct multiples of 1/8 (exact in float16 up to 256)
    span = min(count, 2048)
    values = (rng.permutation(count) % span - span // 2) / 8
    x = values.reshape(sizes).astype(dtype)
    if recipe == "nan-inf":
        flat = x.reshape(-1)
        picks = rng.choice(flat.size, size=max(3, flat.size // 20), replace=False)
        flat[picks] = np.array([np.nan, np.inf, -np.inf], dtype=dtype)[np.arange(picks.size) % 3]
        x[(0, 0) + (0,) * (x.ndim - 2)] = np.nan    # a NaN first in the first window
    if recipe == "minus-inf":
        x[..., :2, :2] = -np.inf
    return x
