"""The one exception type the testbed raises for a bad desc or a bad tensor."""

from __future__ import annotations

from typing import Any


class DescError(ValueError):
    """A DirectML desc, or a tensor handed to it, breaks a rule of the operator's doc page.

    ``field`` is the DML member name (``"ROITensor"``, ``"StartPadding[1]"``), ``value`` the
    offending value and ``allowed`` a short statement of what the page allows. The message
    reads ``"<field> = <value>: <allowed>"`` so it can be shown to a person as it is.
    """

    def __init__(self, field: str, value: Any, allowed: str, op: str | None = None):
        self.field = field
        self.value = value
        self.allowed = allowed
        self.op = op
        where = f"{op}." if op else ""
        super().__init__(f"{where}{field} = {_short(value)}: {allowed}")


def _short(value: Any, limit: int = 120) -> str:
    text = repr(value)
    return text if len(text) <= limit else text[: limit - 3] + "..."
