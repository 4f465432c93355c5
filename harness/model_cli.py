"""Compatibility module: ``ep-testbed model run`` / ``model demo`` now live in ``harness.models``
(registration in ``harness.models.cli``, the commands in ``harness.models.command``).

``harness.cli`` still registers the ``add_*`` functions of this module; it re-exports only
``add_model`` (and the fault-injection variable ``FAULT_ENV``) so that nothing is registered twice.
"""

from .models.cli import add_model
from .models.isolation import FAULT_ENV

__all__ = ["FAULT_ENV", "add_model"]
