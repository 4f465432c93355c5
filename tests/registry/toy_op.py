"""A toy operator, registered through the operator registry alone (nothing else in the testbed
is edited): ``TOY_SCALE``, ``OutputTensor = InputTensor * Scale`` on FLOAT32 tensors.

Importing this module registers it; worker processes import it when they unpickle a toy case
(its desc class lives here), so they register it too. The same module plays all three parts a
real operator splits over ``reference/``, ``graphs/ops/`` and ``graphs/cases/``.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar, Optional

import numpy as np

from ep_testbed.graphs.builder import GraphBuilder
from ep_testbed.graphs.cases.common import Case
from ep_testbed.graphs.common import Imported, OnnxImportError
from ep_testbed.graphs.flags import Flag
from ep_testbed.graphs.mapping import Mapping, Port
from ep_testbed.reference import DescError, OpSpec, register
from ep_testbed.reference.checks import check_tensor, expect_sizes, finite
from ep_testbed.reference.descs import Desc, TensorDesc, dml_field

NAME = "toy_scale"


@dataclass(frozen=True)
class ToyScaleDesc(Desc):
    TYPE: ClassVar[str] = "DML_OPERATOR_TOY_SCALE"
    FEATURE_LEVEL: ClassVar[str] = "1.0"
    INPUTS: ClassVar[tuple[str, ...]] = ("InputTensor",)
    OUTPUTS: ClassVar[tuple[str, ...]] = ("OutputTensor",)

    input_tensor: TensorDesc = dml_field("InputTensor")
    output_tensor: TensorDesc = dml_field("OutputTensor")
    scale: float = dml_field("Scale")


def validate(d: ToyScaleDesc, types) -> None:
    check_tensor(d.TYPE, "InputTensor", d.input_tensor, types, [1, 2, 3, 4])
    check_tensor(d.TYPE, "OutputTensor", d.output_tensor, types, [1, 2, 3, 4])
    expect_sizes(d.TYPE, "OutputTensor", d.output_tensor.sizes, d.input_tensor.sizes, "the input's sizes")
    finite(d.TYPE, "Scale", d.scale)
    if d.scale == 0:
        raise DescError("Scale", 0, "must not be 0", d.TYPE)


def execute(d: ToyScaleDesc, tensors) -> dict[str, np.ndarray]:
    x = tensors["InputTensor"]
    return {"OutputTensor": (x.astype(np.float64) * np.float32(d.scale)).astype(np.float32)}


def random_inputs(d: ToyScaleDesc, rng: np.random.Generator) -> dict[str, np.ndarray]:
    return {"InputTensor": (rng.integers(-32, 33, size=d.input_tensor.sizes) / 8).astype(np.float32)}


# --- the mapper part (graphs/ops/<op>.py for a real operator) ------------------------------

def to_onnx(d: ToyScaleDesc, opset: int) -> Mapping:
    g = GraphBuilder("toy_scale")
    x = g.input("InputTensor", np.float32, d.input_tensor.sizes)
    y = g.node("Mul", [x, g.const("scale", np.array(d.scale, np.float32))], role="op", name="ToyScale")[0]
    g.rename(y, "OutputTensor")
    g.output("OutputTensor", np.float32, d.output_tensor.sizes)
    flags = [Flag("Scale", d.scale, "composed", "a Mul by the scale")]
    return Mapping(desc=d, model=g.model(opset), flags=flags, op_nodes=g.op_nodes, helper_nodes=g.helper_nodes,
                   inputs=[Port("InputTensor", "InputTensor")], output_ports=[Port("OutputTensor", "OutputTensor")],
                   opset=opset, input_flagger=input_flags)


def input_flags(d: ToyScaleDesc, tensors, opset: Optional[int] = None) -> list[Flag]:
    return []


def import_node(node, shapes, types, mode, opset) -> Imported:
    raise OnnxImportError("the toy operator reads no ONNX node back")


# --- the cases part (graphs/cases/<op>.py for a real operator) -----------------------------

def catalog(seed: int) -> list[Case]:
    descs = [("small", (2, 3), 0.5), ("4d", (1, 2, 3, 4), -3.0), ("vector", (7,), 1.25)]
    return [Case(id=f"{NAME}/{name}", op=ToyScaleDesc.TYPE, seed=seed, tags={"dtype": "float32", "family": "toy"},
                 desc=ToyScaleDesc(TensorDesc("FLOAT32", sizes), TensorDesc("FLOAT32", sizes), scale))
            for name, sizes, scale in descs]


def make_inputs(d: ToyScaleDesc, recipe: str, rng: np.random.Generator) -> dict[str, np.ndarray]:
    return random_inputs(d, rng)


SPEC = register(OpSpec(
    name=NAME, desc=ToyScaleDesc, page="https://example.invalid/toy-scale", tensor_support=(
        ("1.0", {"InputTensor": ("FLOAT32",), "OutputTensor": ("FLOAT32",)}),),
    validate=validate, execute=execute, random_inputs=random_inputs, graphs=__name__, cases=f"{__name__}:catalog"))
