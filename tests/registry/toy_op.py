"""A toy operator, registered through the operator registry alone (nothing else in the testbed is
edited): ``TOY_LEAKY_RELU``, ``OutputTensor = InputTensor >= 0 ? InputTensor : Alpha * InputTensor``
on FLOAT32 tensors of 1 to 4 dimensions, mapped to ONNX's ``LeakyRelu`` (so that a model run
attributes ``LeakyRelu`` nodes to it and judges them against its reference).

This one module plays all three parts a real operator splits over ``reference/<op>.py``,
``graphs/ops/<op>.py`` and ``graphs/cases/<op>.py``, and provides every hook of the contract
(``reference.registry``: ``OpSpec``'s fields, ``MAPPER_HOOKS``, ``CASES_HOOKS``, optional ones
included). Importing it registers it; worker processes import it when they unpickle a toy case
(its desc class lives here), so they register it too, and the fuzz drawer is handed the record.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, ClassVar, Optional

import numpy as np
import onnx

from ep_testbed.graphs.builder import GraphBuilder
from ep_testbed.graphs.cases.common import FUZZ_RECIPE, Case, FuzzDraw, fuzz_recipe, fuzz_values, stress_case
from ep_testbed.graphs.common import Imported, OnnxImportError, node_attributes, strides_flag
from ep_testbed.graphs.dml_ep_facts import FLOAT16TO32, DmlEpOp, Registration
from ep_testbed.graphs.flags import Flag
from ep_testbed.graphs.mapping import Mapping, Port
from ep_testbed.reference import DescError, OpSpec, register
from ep_testbed.reference.checks import check_tensor, expect_sizes, finite
from ep_testbed.reference.descs import Desc, TensorDesc, dml_field

NAME = "toy_leaky_relu"
#: ONNX's LeakyRelu default alpha (https://onnx.ai/onnx/operators/onnx__LeakyRelu.html).
ONNX_DEFAULT_ALPHA = 0.01


@dataclass(frozen=True)
class ToyLeakyReluDesc(Desc):
    TYPE: ClassVar[str] = "DML_OPERATOR_TOY_LEAKY_RELU"
    FEATURE_LEVEL: ClassVar[str] = "1.0"
    INPUTS: ClassVar[tuple[str, ...]] = ("InputTensor",)
    OUTPUTS: ClassVar[tuple[str, ...]] = ("OutputTensor",)

    input_tensor: TensorDesc = dml_field("InputTensor")
    output_tensor: TensorDesc = dml_field("OutputTensor")
    alpha: float = dml_field("Alpha")


# --- the reference part (reference/<op>.py for a real operator) ----------------------------

def validate(d: ToyLeakyReluDesc, types: Any) -> None:
    """DescError for a desc the toy's "page" refuses: FLOAT32, 1-4 dims, same sizes, finite Alpha."""
    check_tensor(d.TYPE, "InputTensor", d.input_tensor, types, [1, 2, 3, 4])
    check_tensor(d.TYPE, "OutputTensor", d.output_tensor, types, [1, 2, 3, 4])
    expect_sizes(d.TYPE, "OutputTensor", d.output_tensor.sizes, d.input_tensor.sizes, "the input's sizes")
    finite(d.TYPE, "Alpha", d.alpha)
    if isinstance(d.alpha, bool):
        raise DescError("Alpha", d.alpha, "a number", d.TYPE)


def execute(d: ToyLeakyReluDesc, tensors: Any) -> dict[str, np.ndarray]:
    """The output in float32: x where x >= 0, else float32(Alpha) * x (NaN stays NaN), as ORT's
    CPU kernel computes ``(x >= 0).select(x, alpha * x)`` (LeakyRelu in
    https://github.com/microsoft/onnxruntime/blob/main/onnxruntime/core/providers/cpu/activation/activations.h)."""
    x = np.asarray(tensors["InputTensor"], np.float32)
    return {"OutputTensor": np.where(x >= 0, x, x * np.float32(d.alpha)).astype(np.float32)}


def random_inputs(d: ToyLeakyReluDesc, rng: np.random.Generator) -> dict[str, np.ndarray]:
    """Multiples of 1/8 in [-4, 4]."""
    return {"InputTensor": (rng.integers(-32, 33, size=d.input_tensor.sizes) / 8).astype(np.float32)}


# --- the mapper part (graphs/ops/<op>.py for a real operator) ------------------------------

#: The DML EP's LeakyRelu rows: ``REG_INFO(7, LeakyRelu)`` and ``REG_INFO(16, LeakyRelu)``, both
#: ``supportedTypeListFloat16to32``, in Operators/OperatorRegistration.cpp (line numbers at the
#: pinned commit not checked for the toy, hence no lines). A toy fact, used only by its tests.
DML_EP = {"LeakyRelu": DmlEpOp(rows=(Registration((7, 16), {"T": FLOAT16TO32}, ""),),
                               operator_file="Operators/DmlOperatorActivation.cpp")}
#: LeakyRelu-6 is the first without the legacy consumed_inputs attribute
#: (https://onnx.ai/onnx/operators/text_diff_LeakyRelu_1_6.html).
OLDEST_OPSET = (6, "LeakyRelu-6 is the first LeakyRelu without consumed_inputs")
#: No ONNX backend case of LeakyRelu means something the toy does not.
ONNX_BACKEND_DIFFERENCES: dict[str, str] = {}


def to_onnx(d: ToyLeakyReluDesc, opset: int) -> Mapping:
    """One LeakyRelu node; every field exact."""
    g = GraphBuilder("toy_leaky_relu")
    x = g.input("InputTensor", np.float32, d.input_tensor.sizes)
    g.node("LeakyRelu", [x], role="op", name="ToyLeakyRelu", outputs=["OutputTensor"], alpha=float(d.alpha))
    g.output("OutputTensor", np.float32, d.output_tensor.sizes)
    flags = [Flag("Alpha", d.alpha, "exact", "LeakyRelu's alpha"),
             strides_flag("InputTensor", d.input_tensor), strides_flag("OutputTensor", d.output_tensor)]
    return Mapping(desc=d, model=g.model(opset), flags=flags, op_nodes=g.op_nodes, helper_nodes=g.helper_nodes,
                   inputs=[Port("InputTensor", "InputTensor")], output_ports=[Port("OutputTensor", "OutputTensor")],
                   opset=opset, input_flagger=input_flags)


def input_flags(d: ToyLeakyReluDesc, tensors: Any, opset: Optional[int] = None) -> list[Flag]:
    """No input value changes what the node means."""
    return []


def import_node(node: onnx.NodeProto, shapes: list[tuple[int, ...]], types: list[np.dtype], mode: str,
                opset: Optional[int]) -> Imported:
    """A float32 LeakyRelu of 1 to 4 dimensions as the toy desc (both readings agree)."""
    if types[0] != np.dtype(np.float32) or not 1 <= len(shapes[0]) <= 4:
        raise OnnxImportError(f"LeakyRelu of {types[0]} with {len(shapes[0])} dimensions: the toy takes float32, "
                              "1 to 4 dimensions")
    alpha = float(node_attributes(node).get("alpha", ONNX_DEFAULT_ALPHA))
    tensor = TensorDesc("FLOAT32", tuple(shapes[0]))
    desc = ToyLeakyReluDesc(tensor, tensor, alpha)
    return Imported(desc, [Flag("Alpha", alpha, "exact", "LeakyRelu's alpha")],
                    lambda arrays: {"InputTensor": np.asarray(arrays[0])}, lambda out: [out["OutputTensor"]])


# --- the cases part (graphs/cases/<op>.py for a real operator) -----------------------------

def _desc(sizes: tuple[int, ...], alpha: float) -> ToyLeakyReluDesc:
    return ToyLeakyReluDesc(TensorDesc("FLOAT32", sizes), TensorDesc("FLOAT32", sizes), alpha)


def catalog(seed: int) -> list[Case]:
    """Three cases: 2-D, 4-D and 1-D, with positive, negative and fractional Alpha."""
    rows = [("small", (2, 3), 0.5), ("4d", (1, 2, 3, 4), -3.0), ("vector", (7,), 1.25)]
    return [Case(id=f"{NAME}/{name}", op=ToyLeakyReluDesc.TYPE, seed=seed, tags={"dtype": "float32", "family": "toy"},
                 desc=_desc(sizes, alpha)) for name, sizes, alpha in rows]


def make_inputs(d: ToyLeakyReluDesc, recipe: str, rng: np.random.Generator) -> dict[str, np.ndarray]:
    """``random`` inputs, or a fuzzed case's ``fuzz:<value kind>``."""
    if recipe.startswith(FUZZ_RECIPE + ":"):
        values, _ = fuzz_recipe(recipe)
        return {"InputTensor": fuzz_values(d.input_tensor.sizes, "FLOAT32", values, rng)}
    return random_inputs(d, rng)


SMOKE = ("small",)
PROBE = "small"


def stress_cases(op: str, seed: int) -> list[Case]:
    """One classifier-sized activation (1 x 32 x 128 x 128), tagged with its memory need."""
    return [stress_case(op, "1x32x128x128", _desc((1, 32, 128, 128), 0.1), seed, "random")]


def fuzz_strategy(op: str = NAME, size: str = "default") -> Any:
    """Descs of 1 to 4 dimensions within the size's element bound, Alpha from a short list
    (simplest first), any input value kind."""
    from hypothesis import assume
    from hypothesis import strategies as st

    from ep_testbed.graphs.cases import fuzzing

    bounds = fuzzing.limits(size)

    @st.composite
    def draw(draw: Any) -> FuzzDraw:
        """One toy draw (the enclosing docstring)."""
        rank = draw(fuzzing.bounded(1, 4))
        sizes = tuple(draw(fuzzing.bounded(1, 8)) for _ in range(rank))
        assume(int(np.prod(sizes)) <= bounds.elements)
        alpha = draw(fuzzing.choice([0.01, 0.5, -1.0, 0.0, 2.0, 1e-3]))
        return FuzzDraw(_desc(sizes, alpha), fuzzing.recipe(draw(fuzzing.value_kind())), draw(fuzzing.value_seed()))

    return draw()


SPEC = register(OpSpec(
    name=NAME, desc=ToyLeakyReluDesc, page="https://example.invalid/toy-leaky-relu", tensor_support=(
        ("1.0", {"InputTensor": ("FLOAT32",), "OutputTensor": ("FLOAT32",)}),),
    validate=validate, execute=execute, random_inputs=random_inputs, graphs=__name__, cases=f"{__name__}:catalog",
    onnx_ops=("LeakyRelu",), onnx_input_roles={"LeakyRelu": ("any",)}))
