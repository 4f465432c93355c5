"""``ep-testbed doctor --ep EP [--ep-option device_id=N] [--ep-library PATH] [--ep-device SELECTOR]``:
can this machine run the catalog on the EP?

Prints each check of ``harness.eps.preflight`` (the ONNX Runtime wheels, the EP (a plugin EP:
registered), ONNX Runtime's device list for it with the device the run would use, for DirectML the
DXGI adapters, the chosen one, DirectML.dll and whether ORT's device list agrees, then one one-node
session on the EP) and the device identity that run headers will record; whether the reference
runs its compiled loops (``reference.native``) or NumPy alone. Then, whatever the EP,
which of the three ways a Windows GPU team holds an EP this environment has
(``harness.eps.windows_ways``: the onnxruntime-directml wheel, Windows ML with its EP catalog,
plugin EP packages), each found or not with how to get it, and the flags that run each EP found.
Exit codes: 0 ready, 2 not ready (the one line on stderr names what is wrong and the fix); the ways
never change the exit code. ``ep-testbed run`` makes the same checks before any case runs.
"""

from __future__ import annotations

import argparse

from ...reference import native
from ..core import exit_codes
from ..core.terminal import safe
from ..eps.preflight import check
from ..eps.providers import SessionSettings, parse_provider_options
from ..eps.windows_ways import Way, find_ways
from .common import usage_error
from .options import add_ep_options

MARKS = {"ok": "ok   ", "note": "note ", "warn": "warn ", "fatal": "FAIL "}
#: The mark of a way of holding an EP, found or not.
WAY_MARKS = {True: "found ", False: "none  "}


def add(subparsers: argparse._SubParsersAction) -> None:
    """Register ``doctor`` with the EP group and ``--dml-graph-fusion``."""
    p = subparsers.add_parser("doctor", help="check that this machine can run the catalog on an EP",
                              description="Preflight for an execution provider: the installed ONNX Runtime wheels, "
                                          "the EP, for DirectML the adapters (DXGI) and DirectML.dll, then one "
                                          "one-node session built, run and proven on the EP.",
                              epilog="exit codes: 0 ready, 2 not ready (stderr names the fix)")
    add_ep_options(p.add_argument)
    p.add_argument("--dml-graph-fusion", action="store_true", help="check with DirectML graph fusion kept on, as "
                                                                    "`run --dml-graph-fusion` runs")
    p.set_defaults(func=doctor_command)


def doctor_command(args: argparse.Namespace) -> int:
    """Print the findings; 0 when none is fatal, else 2 with the fatal one on stderr."""
    try:
        options = parse_provider_options(args.ep_option)
    except ValueError as exc:
        return usage_error(str(exc))
    settings = SessionSettings(graph_opt=args.graph_opt, dml_graph_fusion=args.dml_graph_fusion)
    result = check(args.ep, options, settings, library=args.ep_library, device=args.ep_device)
    print(f"ep-testbed doctor --ep {safe(args.ep)}")
    for finding in result.findings:
        if finding.level != "fatal":
            print(f"  {MARKS[finding.level]}{safe(finding.text)}")
    reference = native.status()
    print(f"  {MARKS['ok' if reference.used else 'note']}the reference's compiled loops: {safe(reference.detail)}")
    print_ways(find_ways())
    if result.fatal is not None:
        print("  FAIL (see stderr)")
        return usage_error(f"doctor: {result.fatal.text}")
    if result.gpu is not None:
        print(f"  run headers will record: {safe(result.gpu.get('summary'))}")
    print("ready")
    return exit_codes.OK


def print_ways(ways: list[Way]) -> None:
    """The ways of holding an EP: one line each (found or not, and how to get it), then one line
    per EP a found way offers, with the flags that run it."""
    print("  ways to hold an EP (README.md, \"Windows\"):")
    for way in ways:
        print(f"    {WAY_MARKS[way.found]}{way.name}: {safe(way.text)}")
        for line in way.eps:
            print(f"          {safe(line)}")
