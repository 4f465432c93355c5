"""``ep-testbed model run`` / ``ep-testbed model demo``: whole models on an EP against a reference EP.

The parser and its handlers (``run_command``, ``demo_command``) belong to the models package
(``harness.models.cli``, ``harness.models.command``); this module only puts them in the command
line's list of subcommands.
"""

from __future__ import annotations

import argparse

from ..models.cli import add_model
from ..models.command import demo_command, run_command

__all__ = ["add", "demo_command", "run_command"]


def add(subparsers: argparse._SubParsersAction) -> None:
    """Register ``model`` with its ``run`` and ``demo`` subcommands (handlers as above)."""
    add_model(subparsers)
