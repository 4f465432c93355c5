"""Divergences that depend on a case's input values, not on its desc.

``to_onnx`` flags field values; some differences between ONNX Runtime and the page only show
for particular data (a NaN, an empty region, a float32 bin end that lands one off). Each
operator's mapper module finds them in a case's inputs (its ``input_flags``), so that a case
can say "this input diverges" up front: ``diverges`` flags naming the input and the reason,
and ``inexpressible`` ones for values the mapper's composition cannot carry exactly.
"""

from __future__ import annotations

from typing import Mapping as MappingT
from typing import Optional

import numpy as np

from ..reference import Desc
from .flags import Flag
from .ops import mapper_for


def input_flags(desc: Desc, tensors: MappingT[str, np.ndarray], opset: Optional[int] = None) -> list[Flag]:
    """The flags ``desc``'s operator raises for these input arrays (keyed by DML member name)."""
    return mapper_for(desc).input_flags(desc, tensors, opset)
