"""Validation of a desc against its doc page, before anything runs.

Everything a page states about a desc (dimension counts, the data types of each DirectML
feature level, "must have the same DataType", sizes that the page derives, ranges of the
scalar fields) is checked by the operator's own ``validate_desc``, built from ``checks``; each
failure is a ``DescError`` naming the DML field, the value and what is allowed. Checks that
need the tensors' values (``x2 >= x1``, batch indices in range) live with the kernel that
reads them.
"""

from __future__ import annotations

from .checks import TypeTable, types_at
from .descs import Desc
from .errors import DescError
from .registry import spec_for, spec_of_type

#: The newest feature level the pages list; the default of every check.
NEWEST_FEATURE_LEVEL = "5.0"


def supported_types(op_type: str, feature_level: str = NEWEST_FEATURE_LEVEL) -> TypeTable:
    """The data types each tensor of ``op_type`` (``DML_OPERATOR_*``) may have at ``feature_level``."""
    spec = spec_of_type(op_type)
    if spec is None:
        raise DescError("Type", op_type, "a registered DML_OPERATOR_* name")
    return types_at(op_type, spec.tensor_support, feature_level)


def validate(desc: Desc, feature_level: str = NEWEST_FEATURE_LEVEL) -> None:
    """Raise ``DescError`` unless ``desc`` obeys its doc page at ``feature_level``."""
    spec = spec_for(desc)
    spec.validate(desc, types_at(desc.TYPE, spec.tensor_support, feature_level))
