"""Seeded random input arrays for a desc (``ep-testbed reference`` without ``--inputs``, and tests).

Each operator says what a valid input of its desc is (its registry record's ``random_inputs``,
built on ``dtypes.random_values``); this module validates the desc first and refuses sizes
nobody should allocate by accident.
"""

from __future__ import annotations

import numpy as np

from .checks import DEFAULT_MAX_ELEMENTS, max_elements
from .descs import Desc, member_value
from .errors import DescError
from .registry import spec_for
from .validation import validate

#: Inputs larger than this are refused rather than allocated (a typo in Sizes must not eat the machine);
#: the cap in force is ``checks.max_elements()``, which ``checks.element_cap`` can raise.
MAX_ELEMENTS = DEFAULT_MAX_ELEMENTS


def random_inputs(desc: Desc, seed: int = 0) -> dict[str, np.ndarray]:
    """One array per input member of ``desc``, deterministic in ``seed``; a desc that breaks its
    page (validated at the newest feature level) raises DescError first, and so does an input
    of more than ``checks.max_elements()`` elements."""
    validate(desc)
    for member in desc.INPUTS:
        tensor = member_value(desc, member)
        if tensor.element_count > max_elements():
            raise DescError(f"{member}.Sizes", list(tensor.sizes), f"{tensor.element_count} elements; random inputs "
                            f"are generated for at most {max_elements()} (pass your own arrays for larger tensors)",
                            desc.TYPE)
    return spec_for(desc).random_inputs(desc, np.random.default_rng(seed))
