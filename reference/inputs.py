"""Seeded random input arrays for a desc (used by ``ep-testbed reference`` and the tests).

Values are well conditioned for comparison: floats are multiples of 1/8 in [-4, 4] (exact in
fp16), ROIs lie in and around the input, batch indices in range.
"""

from __future__ import annotations

import numpy as np

from .descs import Desc, MaxPooling2Desc, RoiPoolingDesc
from .dtypes import numpy_dtype
from .errors import DescError
from .validation import validate


#: Inputs larger than this are refused rather than allocated (a typo in Sizes must not eat the machine).
MAX_ELEMENTS = 2**28


def random_inputs(desc: Desc, seed: int = 0) -> dict[str, np.ndarray]:
    """One array per input member of ``desc``, deterministic in ``seed``; a desc that breaks its
    page (validated at the newest feature level) raises DescError first."""
    validate(desc)
    for member in desc.INPUTS:
        tensor = getattr(desc, {"InputTensor": "input_tensor", "ROITensor": "roi_tensor",
                                "BatchIndicesTensor": "batch_indices_tensor"}[member])
        if tensor.element_count > MAX_ELEMENTS:
            raise DescError(f"{member}.Sizes", list(tensor.sizes), f"{tensor.element_count} elements; random inputs "
                            f"are generated for at most {MAX_ELEMENTS} (pass your own arrays for larger tensors)",
                            desc.TYPE)
    rng = np.random.default_rng(seed)
    x_desc = desc.input_tensor
    dtype = numpy_dtype(x_desc.data_type)
    if np.issubdtype(dtype, np.floating):
        x = (rng.integers(-32, 33, size=x_desc.sizes) / 8).astype(dtype)
    else:
        info = np.iinfo(dtype)
        x = rng.integers(max(info.min, -100), min(info.max, 100), size=x_desc.sizes, endpoint=True).astype(dtype)
    tensors = {"InputTensor": x}
    if isinstance(desc, MaxPooling2Desc):
        return tensors
    batch, _, height, width = x_desc.sizes
    roi_dtype = numpy_dtype(desc.roi_tensor.data_type)
    if isinstance(desc, RoiPoolingDesc):
        count = desc.roi_tensor.sizes[2]
        scale = desc.spatial_scale or 1.0
        x1 = rng.uniform(-1, width, count) / scale
        y1 = rng.uniform(-1, height, count) / scale
        x2 = x1 + rng.uniform(0, width, count) / scale
        y2 = y1 + rng.uniform(0, height, count) / scale
        ids = rng.integers(0, batch, count)
        rois = np.stack([ids, x1, y1, x2, y2], axis=1)
        tensors["ROITensor"] = rois.astype(roi_dtype).reshape(desc.roi_tensor.sizes)
        return tensors
    count = desc.roi_tensor.sizes[-2]
    sx, sy = desc.spatial_scale_x or 1.0, desc.spatial_scale_y or 1.0
    x1 = rng.uniform(-1, width, count) / sx
    y1 = rng.uniform(-1, height, count) / sy
    x2 = x1 + rng.uniform(0, width, count) / sx
    y2 = y1 + rng.uniform(0, height, count) / sy
    rois = np.stack([x1, y1, x2, y2], axis=1)
    tensors["ROITensor"] = rois.astype(roi_dtype).reshape(desc.roi_tensor.sizes)
    ids = rng.integers(0, batch, count)
    tensors["BatchIndicesTensor"] = ids.astype(numpy_dtype(desc.batch_indices_tensor.data_type)).reshape(
        desc.batch_indices_tensor.sizes)
    return tensors
