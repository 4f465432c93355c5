"""The simple form of MAX_POOLING2 (gather every window, then reduce): the oracle that the fast reference
in reference/ is checked against, bit for bit. Same semantics, same DECISIONS.md.
"""

from __future__ import annotations

import numpy as np

from ep_testbed.reference import MaxPooling2Desc
from ep_testbed.reference.dtypes import numpy_dtype


def window_coordinates(size: int, out: int, window: int, stride: int, start_padding: int,
                       dilation: int) -> tuple[np.ndarray, np.ndarray]:
    """Input coordinates ``(out, window)`` each output position reads along one axis, and
    whether each lies inside the input (padding does not)."""
    coords = (np.arange(out)[:, None] * stride - start_padding) + np.arange(window)[None, :] * dilation
    return coords, (coords >= 0) & (coords < size)


def max_pooling2(desc: MaxPooling2Desc, input_tensor: np.ndarray) -> dict[str, np.ndarray]:
    """``{"OutputTensor", ["OutputIndicesTensor"]}`` for a validated desc and matching array."""
    batch, channels, *spatial = input_tensor.shape
    out_spatial = desc.output_tensor.sizes[2:]
    dims = len(spatial)

    # One index array per spatial axis, shaped to broadcast to (O_1..O_D, K_1..K_D).
    gather, valid, flat_spatial = [], np.ones((1,) * 2 * dims, dtype=bool), 0
    axis_strides = np.cumprod([1] + spatial[::-1])[::-1][1:]  # row-major element strides
    for i in range(dims):
        coords, inside = window_coordinates(spatial[i], out_spatial[i], desc.window_size[i], desc.strides[i],
                                            desc.start_padding[i], desc.dilations[i])
        shape = [1] * 2 * dims
        shape[i], shape[dims + i] = coords.shape
        clipped = np.clip(coords, 0, spatial[i] - 1).reshape(shape)
        gather.append(clipped)
        valid = valid & inside.reshape(shape)
        flat_spatial = flat_spatial + clipped * int(axis_strides[i])

    windows = input_tensor[(slice(None), slice(None), *gather)]          # (N, C, O..., K...)
    window_len = int(np.prod(desc.window_size))
    windows = windows.reshape(batch, channels, *out_spatial, window_len)
    valid = np.broadcast_to(valid, (*out_spatial, *desc.window_size)).reshape(*out_spatial, window_len)
    flat_spatial = np.broadcast_to(flat_spatial, (*out_spatial, *desc.window_size)).reshape(*out_spatial, window_len)

    position = _first_maximum(windows, valid)                           # (N, C, O...)
    output = np.take_along_axis(windows, position[..., None], axis=-1)[..., 0]
    result = {"OutputTensor": output.astype(input_tensor.dtype, copy=False)}

    if desc.output_indices_tensor is not None:
        plane = int(np.prod(spatial))
        planes = (np.arange(batch)[:, None] * channels + np.arange(channels)[None, :]).reshape(
            batch, channels, *([1] * dims))
        spatial_index = np.take_along_axis(
            np.broadcast_to(flat_spatial, (batch, channels, *out_spatial, window_len)), position[..., None], axis=-1)[..., 0]
        indices = planes.astype(np.uint64) * np.uint64(plane) + spatial_index.astype(np.uint64)
        result["OutputIndicesTensor"] = indices.astype(numpy_dtype(desc.output_indices_tensor.data_type))
    return result


def _first_maximum(windows: np.ndarray, valid: np.ndarray) -> np.ndarray:
    """Position in each window (last axis) of its first maximum among valid elements.

    NaN elements never win unless every valid element is NaN; then the first valid one does.
    """
    if np.issubdtype(windows.dtype, np.floating):
        candidate = valid & ~np.isnan(windows)
        floor = -np.inf
    else:
        candidate = np.broadcast_to(valid, windows.shape)
        floor = np.iinfo(windows.dtype).min
    keyed = np.where(candidate, windows, floor)
    maximum = keyed.max(axis=-1, keepdims=True)
    is_max = candidate & (windows == maximum)
    first_max = np.argmax(is_max, axis=-1)
    first_valid = np.argmax(np.broadcast_to(valid, windows.shape), axis=-1)
    return np.where(is_max.any(axis=-1), first_max, first_valid)
