"""One-node ONNX models run on ONNX Runtime's CPU EP: the oracle for the reference's tests.

Kept deliberately tiny and independent of graphs/ (the mapper is tested against the reference
separately); every model takes its inputs as graph inputs.
"""

from __future__ import annotations

import numpy as np
import onnxruntime as ort
from onnx import TensorProto, ValueInfoProto, helper

_TYPES = {np.dtype(np.float32): TensorProto.FLOAT, np.dtype(np.float16): TensorProto.FLOAT16,
          np.dtype(np.float64): TensorProto.DOUBLE, np.dtype(np.int64): TensorProto.INT64,
          np.dtype(np.int8): TensorProto.INT8, np.dtype(np.uint8): TensorProto.UINT8}


def _untyped(name: str) -> ValueInfoProto:
    info = ValueInfoProto()
    info.name = name
    return info


def run_node(op: str, inputs: dict[str, np.ndarray], outputs: list[str], opset: int, **attrs) -> list[np.ndarray]:
    node = helper.make_node(op, list(inputs), outputs, **attrs)
    graph = helper.make_graph(
        [node], "oracle",
        [helper.make_tensor_value_info(k, _TYPES[v.dtype], v.shape) for k, v in inputs.items()],
        [_untyped(o) for o in outputs])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", opset)])
    model.ir_version = 8
    options = ort.SessionOptions()
    options.log_severity_level = 3
    session = ort.InferenceSession(model.SerializeToString(), options, providers=["CPUExecutionProvider"])
    return session.run(outputs, inputs)


def roi_align(x, rois, batch_indices, *, output_height, output_width, sampling_ratio, spatial_scale,
              mode="avg", coordinate_transformation_mode="half_pixel", opset=16):
    attrs = dict(output_height=output_height, output_width=output_width, sampling_ratio=sampling_ratio,
                 spatial_scale=spatial_scale, mode=mode)
    if opset >= 16:
        attrs["coordinate_transformation_mode"] = coordinate_transformation_mode
    return run_node("RoiAlign", {"X": x, "rois": rois, "batch_indices": batch_indices.astype(np.int64)},
                    ["Y"], opset, **attrs)[0]


def max_roi_pool(x, rois, *, pooled_shape, spatial_scale):
    return run_node("MaxRoiPool", {"X": x, "rois": rois}, ["Y"], 1, pooled_shape=list(pooled_shape),
                    spatial_scale=spatial_scale)[0]


def max_pool(x, *, kernel_shape, strides, pads, dilations, opset=12):
    return run_node("MaxPool", {"X": x}, ["Y", "Indices"], opset, kernel_shape=list(kernel_shape),
                    strides=list(strides), pads=list(pads), dilations=list(dilations))
