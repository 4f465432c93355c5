"""``Mapping``: the ONNX model of one desc, how to feed it, how to read it back, and its flags."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Callable, Optional, Sequence, Union
from typing import Mapping as MappingT

import numpy as np
import onnx

from ..reference.descs import Desc
from .flags import Flag, worst_kind


@dataclass
class Port:
    """One graph input or output: the DML member it carries, its ONNX name, and the
    conversion between the DML array and the ONNX array (a dtype change of the same values,
    or a reshape)."""

    member: str
    onnx_name: str
    to_onnx: Callable[[np.ndarray], np.ndarray] = lambda a: a
    from_onnx: Callable[[np.ndarray], np.ndarray] = lambda a: a


@dataclass
class Mapping:
    """What ``to_onnx(desc)`` returns.

    ``model`` is an ``onnx.ModelProto`` (``None`` when a flag is ``inexpressible``) in which
    every tensor the DML operator reads enters as a graph input, never as an initializer, so
    no node that implements the operator can be constant-folded away by ONNX Runtime (helper
    nodes may read small constant initializers besides a graph input). ``op_nodes`` are the
    names of the nodes that implement the DML operator (placement must be proven for these);
    ``helper_nodes`` the Cast/Reshape/Mul/... around them.
    """

    desc: Desc
    model: Optional[onnx.ModelProto]
    flags: list[Flag]
    op_nodes: list[str] = field(default_factory=list)
    helper_nodes: list[str] = field(default_factory=list)
    inputs: list[Port] = field(default_factory=list)
    output_ports: list[Port] = field(default_factory=list)
    opset: Optional[int] = None
    #: The operator's ``input_flags(desc, tensors, opset)`` (its mapper module's).
    input_flagger: Optional[Callable[..., list[Flag]]] = None
    #: For a ``diverges`` flag whose ONNX meaning the mapper can compute: feeds -> ``{field:
    #: DML outputs ONNX's graph means}`` (None when it cannot; see ``meanings``).
    meaning: Optional[Callable[[MappingT[str, np.ndarray]], Optional[dict]]] = None

    @property
    def expressible(self) -> bool:
        """False iff some flag is ``inexpressible``."""
        return not any(f.kind == "inexpressible" for f in self.flags)

    @property
    def kind(self) -> str:
        """The worst flag kind: the kind of the case as a whole."""
        return worst_kind(self.flags)

    def feeds(self, tensors: MappingT[str, np.ndarray]) -> dict[str, np.ndarray]:
        """ONNX input name -> array, from a dict of DML-named arrays as ``execute`` takes them."""
        self.require_model()
        missing = [p.member for p in self.inputs if p.member not in tensors]
        if missing:
            raise KeyError(f"feeds: missing DML input(s) {missing}; this desc reads "
                           f"{[p.member for p in self.inputs]}")
        return {p.onnx_name: np.ascontiguousarray(p.to_onnx(np.asarray(tensors[p.member]))) for p in self.inputs}

    def outputs(self, onnx_outputs: Union[Sequence[np.ndarray], MappingT[str, np.ndarray]]) -> dict[str, np.ndarray]:
        """DML member name -> array in the desc's data type and sizes, from a session's outputs
        (a list in session output order, i.e. the model's graph outputs, or a dict by ONNX name)."""
        self.require_model()
        if not isinstance(onnx_outputs, MappingT):
            onnx_outputs = list(onnx_outputs)
            if len(onnx_outputs) != len(self.output_ports):
                raise ValueError(f"outputs: expected {len(self.output_ports)} arrays "
                                 f"({[p.onnx_name for p in self.output_ports]}), got {len(onnx_outputs)}")
            onnx_outputs = {p.onnx_name: a for p, a in zip(self.output_ports, onnx_outputs)}
        return {p.member: p.from_onnx(np.asarray(onnx_outputs[p.onnx_name])) for p in self.output_ports}

    def input_flags(self, tensors: MappingT[str, np.ndarray]) -> list[Flag]:
        """``diverges`` flags for input values ONNX Runtime treats differently from the page
        (NaN, empty regions under an adaptive count, float32 bin ends...), and ``inexpressible``
        ones for values the composition cannot carry: the operator's ``input_flags``."""
        return list(self.input_flagger(self.desc, tensors, self.opset)) if self.input_flagger else []

    def meanings(self, tensors: MappingT[str, np.ndarray]) -> dict[str, dict[str, np.ndarray]]:
        """``{field: DML outputs}``: for each ``diverges`` field of the case (the desc's flags and
        ``input_flags``) whose ONNX meaning the mapper can compute (ONNX RoiAlign as ORT's CPU
        kernel computes it), what the model means for these DML inputs; a case whose expected
        outputs equal that meaning (within tolerance) cannot show the divergence. ``{}`` when
        there is none, or it would be too large to compute."""
        if self.meaning is None or self.model is None:
            return {}
        fields = {f.field for f in [*self.flags, *self.input_flags(tensors)] if f.kind == "diverges"}
        if not fields:
            return {}
        return {k: v for k, v in (self.meaning(self.feeds(tensors)) or {}).items() if k in fields}

    def with_carrier(self) -> Optional["Mapping"]:
        """A copy in which every graph output an operator node writes directly passes through an
        exact carrier node, ``Mul(y, 1)`` (``x * 1 == x`` for every value of every numeric type),
        with the same graph outputs, ports and flags; None when no operator node writes a graph
        output. For an EP that declines an operator node only when it is alone in a model (the
        OpenVINO EP takes no one-node RoiAlign model, though it runs RoiAlign inside any larger
        one): the case runner retries with it, and the node is still the operator's alone."""
        if self.model is None:
            return None
        model = onnx.ModelProto()
        model.CopyFrom(self.model)
        types = {o.name: o.type.tensor_type.elem_type for o in model.graph.output}
        carriers, helpers = [], list(self.helper_nodes)
        for node in model.graph.node:
            if node.name not in self.op_nodes:
                continue
            for i, name in enumerate(node.output):
                if name in types:
                    node.output[i] = f"{name}_of_{node.name}"
                    one = f"one_for_{name}"
                    dtype = onnx.helper.tensor_dtype_to_np_dtype(types[name])
                    model.graph.initializer.append(onnx.numpy_helper.from_array(np.array(1, dtype=dtype), one))
                    carriers.append(onnx.helper.make_node("Mul", [node.output[i], one], [name], name=f"Carrier_{name}"))
                    helpers.append(f"Carrier_{name}")
        if not carriers:
            return None
        model.graph.node.extend(carriers)
        return Mapping(desc=self.desc, model=model, flags=self.flags, op_nodes=list(self.op_nodes), helper_nodes=helpers,
                       inputs=self.inputs, output_ports=self.output_ports, opset=self.opset,
                       input_flagger=self.input_flagger, meaning=self.meaning)

    @property
    def onnx_input_names(self) -> list[str]:
        return [p.onnx_name for p in self.inputs]

    @property
    def onnx_output_names(self) -> list[str]:
        return [p.onnx_name for p in self.output_ports]

    def require_model(self) -> onnx.ModelProto:
        """The ONNX model; ValueError naming every ``inexpressible`` flag when there is none."""
        if self.model is None:
            reasons = "; ".join(f"{f.field}={f.value!r}: {f.reason}" for f in self.flags if f.kind == "inexpressible")
            raise ValueError(f"{self.desc.TYPE} is not expressible in ONNX: {reasons}")
        return self.model

    def describe(self) -> dict[str, Any]:
        """A JSON-safe summary: nodes with attributes, flags (what ``ep-testbed map`` prints)."""
        nodes = []
        if self.model is not None:
            for node in self.model.graph.node:
                attrs = {a.name: _attr_value(a) for a in node.attribute}
                nodes.append({"name": node.name, "op_type": node.op_type, "inputs": list(node.input),
                              "outputs": list(node.output), "attributes": attrs,
                              "role": "op" if node.name in self.op_nodes else "helper"})
        return {"type": self.desc.TYPE, "expressible": self.expressible, "kind": self.kind,
                "opset": self.opset, "ir_version": None if self.model is None else self.model.ir_version,
                "nodes": nodes, "flags": [f.to_json() for f in self.flags]}


def _attr_value(attr: onnx.AttributeProto) -> Any:
    value = onnx.helper.get_attribute_value(attr)
    if isinstance(value, bytes):
        return value.decode()
    if isinstance(value, onnx.TensorProto):
        return onnx.numpy_helper.to_array(value).tolist()
    if isinstance(value, list):
        return [v.decode() if isinstance(v, bytes) else v for v in value]
    return value
