"""Bundled demo models: small, real-shaped networks around the three op families, no downloads.

Each builder returns a checker-clean ``onnx.ModelProto`` whose weights are drawn from a seeded
generator (same seed, same bytes), with the lowest IR version its opset needs (``GraphBuilder``:
older ONNX Runtime builds load it too) and opset ``DEFAULT_OPSET``:

* ``detection_head``: ``image -> Conv -> Relu -> MaxPool -> RoiAlign(rois, batch_indices) ->
  Flatten -> Gemm -> scores``, the second stage of a two-stage detector. The batch and the ROI
  count are symbolic (``batch``, ``num_rois``), so running it takes ``--shape``.
* ``resnet_stem``: ``image -> Conv(7x7, stride 2) -> BatchNormalization -> Relu ->
  MaxPool(3x3, stride 2, pad 1)`` with the pool's ``Indices`` as a second output, as in
  ResNet's stem (channels scaled down so it runs in milliseconds).

The op nodes (RoiAlign, MaxPool) read activations computed inside the model, never
initializers alone, so ONNX Runtime cannot fold them away. ``DEMO_SHAPES`` gives the symbolic
dimensions a demo run uses. Nothing here creates a session.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, Callable

import numpy as np
import onnx

from .builder import GraphBuilder
from .runtime import DEFAULT_OPSET


def _weights(rng: np.random.Generator, shape: tuple[int, ...], fan_in: int) -> np.ndarray:
    """He-style scaled normal weights, float32 (activations stay O(1) through the layers)."""
    return (rng.standard_normal(shape) * np.sqrt(2.0 / fan_in)).astype(np.float32)


def detection_head(seed: int = 0, *, channels: int = 8, image_size: int = 32, pooled: int = 4,
                   classes: int = 10) -> onnx.ModelProto:
    """A detection head: Conv 3x3 -> Relu -> MaxPool 2x2/2 -> RoiAlign (pooled x pooled, spatial_scale
    0.5 for the pool's stride, half_pixel, sampling_ratio 2, avg) -> Flatten -> Gemm.

    Inputs: ``image`` float32 [batch, 3, S, S], ``rois`` float32 [num_rois, 4] (x1, y1, x2, y2 in
    image pixels), ``batch_indices`` int64 [num_rois]. Output: ``scores`` float32 [num_rois, classes].
    """
    rng = np.random.default_rng(seed)
    b = GraphBuilder("detection_head")
    image = b.input("image", np.float32, ["batch", 3, image_size, image_size])
    rois = b.input("rois", np.float32, ["num_rois", 4])
    batch_indices = b.input("batch_indices", np.int64, ["num_rois"])
    w = b.const("conv_W", _weights(rng, (channels, 3, 3, 3), 27))
    bias = b.const("conv_B", (rng.standard_normal(channels) * 0.1).astype(np.float32))
    conv = b.node("Conv", [image, w, bias], role="helper", name="conv1", outputs=["conv1_out"],
                  kernel_shape=[3, 3], pads=[1, 1, 1, 1])[0]
    relu = b.node("Relu", [conv], role="helper", name="relu1", outputs=["relu1_out"])[0]
    pool = b.node("MaxPool", [relu], role="op", name="pool1", outputs=["pool1_out"],
                  kernel_shape=[2, 2], strides=[2, 2])[0]
    roi = b.node("RoiAlign", [pool, rois, batch_indices], role="op", name="roi_align1", outputs=["roi_align1_out"],
                 mode="avg", output_height=pooled, output_width=pooled, sampling_ratio=2, spatial_scale=0.5,
                 coordinate_transformation_mode="half_pixel")[0]
    flat = b.node("Flatten", [roi], role="helper", name="flatten1", outputs=["flatten1_out"], axis=1)[0]
    features = channels * pooled * pooled
    fc_w = b.const("fc_W", _weights(rng, (classes, features), features))
    fc_b = b.const("fc_B", (rng.standard_normal(classes) * 0.1).astype(np.float32))
    b.node("Gemm", [flat, fc_w, fc_b], role="helper", name="fc1", outputs=["scores"], transB=1)
    b.output("scores", np.float32, ["num_rois", classes])
    return b.model(DEFAULT_OPSET)


def resnet_stem(seed: int = 0, *, channels: int = 16, image_size: int = 64) -> onnx.ModelProto:
    """A ResNet-style stem: Conv 7x7/2 pad 3 -> BatchNormalization -> Relu -> MaxPool 3x3/2 pad 1.

    Input ``image`` float32 [1, 3, S, S]; outputs ``features`` float32 [1, C, S/4, S/4] and
    ``indices`` int64 (the MaxPool's Indices, flat over the pool's input, row-major).
    """
    rng = np.random.default_rng(seed)
    b = GraphBuilder("resnet_stem")
    image = b.input("image", np.float32, [1, 3, image_size, image_size])
    w = b.const("conv_W", _weights(rng, (channels, 3, 7, 7), 3 * 49))
    conv = b.node("Conv", [image, w], role="helper", name="conv1", outputs=["conv1_out"],
                  kernel_shape=[7, 7], strides=[2, 2], pads=[3, 3, 3, 3])[0]
    scale = b.const("bn_scale", (1.0 + 0.1 * rng.standard_normal(channels)).astype(np.float32))
    shift = b.const("bn_B", (0.1 * rng.standard_normal(channels)).astype(np.float32))
    mean = b.const("bn_mean", (0.1 * rng.standard_normal(channels)).astype(np.float32))
    var = b.const("bn_var", (1.0 + 0.1 * rng.random(channels)).astype(np.float32))
    bn = b.node("BatchNormalization", [conv, scale, shift, mean, var], role="helper", name="bn1",
                outputs=["bn1_out"], epsilon=1e-5)[0]
    relu = b.node("Relu", [bn], role="helper", name="relu1", outputs=["relu1_out"])[0]
    b.node("MaxPool", [relu], role="op", name="pool1", outputs=["features", "indices"],
           kernel_shape=[3, 3], strides=[2, 2], pads=[1, 1, 1, 1])
    out = image_size // 4
    b.output("features", np.float32, [1, channels, out, out])
    b.output("indices", np.int64, [1, channels, out, out])
    return b.model(DEFAULT_OPSET)


#: Name -> builder(seed) of every bundled model.
DEMO_MODELS: dict[str, Callable[..., onnx.ModelProto]] = {
    "detection_head": detection_head,
    "resnet_stem": resnet_stem,
}

#: Symbolic dimensions a demo run resolves (``--shape``), per model.
DEMO_SHAPES: dict[str, dict[str, int]] = {
    "detection_head": {"batch": 2, "num_rois": 6},
    "resnet_stem": {},
}


def write_demo_models(out_dir: str | Path, seed: int = 0,
                      write: Callable[[Path, bytes], Any] | None = None) -> dict[str, Path]:
    """Write every bundled model to ``out_dir/<name>.onnx``; return name -> path. ``write(path,
    data)`` writes each file (the CLI passes its whole-or-nothing writer; default: a plain write)."""
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    paths = {}
    for name, build in DEMO_MODELS.items():
        path = out / f"{name}.onnx"
        data = build(seed).SerializeToString()
        if write is None:
            path.write_bytes(data)
        else:
            write(path, data)
        paths[name] = path
    return paths
