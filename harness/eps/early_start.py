"""EPs that start before the command imports the project: the console script asks here first.

``ep-testbed`` imports NumPy, ONNX and ONNX Runtime before any command runs, a second or more; an
EP whose holder starts a process of its own (the DirectML host under Wine, ``--ep dml-wine``) can
start it meanwhile. ``start(argv)`` does that for the command line ``argv``: for each EP of
``EARLY`` whose ``--ep`` word the command line holds, the module that starts it decides
(``start_early(argv)``: whether this command builds a session in this process) and starts it in
the background. This module and what it imports are the standard library only (``harness.launch``
imports it before anything else); a command line that names none of ``EARLY`` imports nothing.
"""

from __future__ import annotations

import importlib
from typing import Sequence

#: ``--ep`` word of an EP record (``harness.eps.registry``) -> the stdlib-only module that starts
#: its holder early (its ``start_early(argv)``).
EARLY = {"dml-wine": "ep_testbed.harness.eps.dml_wine.early"}


def start(argv: Sequence[str]) -> None:
    """Start, in the background, the holder of each ``EARLY`` EP that ``argv`` (the command line
    without the program) names, when its module says the command will use it in this process."""
    for word, module in EARLY.items():
        if any(word in arg for arg in argv):
            importlib.import_module(module).start_early(argv)


__all__ = ["EARLY", "start"]
