"""Plant each reference fault of tests/mutation/mutants.py in turn and run the whole catalog and the
fixed fuzz sample on an EP with its bundled expectations on; print which cases each fails.

    python tools/mutation_test.py [--ep cpu|dml-wine] [--source catalog,fuzz] [NAME ...]

Exit 0 when every mutant that can show on the EP (not ``equivalent_on`` it) fails a case, 1 when
one survives. A case the unmutated reference already fails is the EP's finding, not the
reference's: it is listed first and left out of every mutant's count (a kill there would mean
nothing); with ``--strict-baseline`` such a case exits 2 instead.
"""

from __future__ import annotations

import argparse
import contextlib
import io
import os
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(os.path.dirname(HERE), "tests", "mutation"))

from mutants import MUTANTS  # noqa: E402
from mutation_kit import OPS, VERDICTS, changed_cases, hidden_reason, judge, shown_on_the_ep  # noqa: E402


def quiet(*args, **kwargs):
    """``judge`` with the run's own printing (and ONNX Runtime's native log) silenced."""
    sink = os.open(os.devnull, os.O_WRONLY)
    saved = os.dup(1), os.dup(2)
    os.dup2(sink, 1)
    os.dup2(sink, 2)
    try:
        with contextlib.redirect_stdout(io.StringIO()), contextlib.redirect_stderr(io.StringIO()):
            return judge(*args, **kwargs)
    finally:
        os.dup2(saved[0], 1)
        os.dup2(saved[1], 2)
        os.close(sink)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--ep", default="cpu")
    parser.add_argument("--source", default="catalog,fuzz")
    parser.add_argument("--strict-baseline", action="store_true",
                        help="exit 2 when the unmutated reference fails a case, instead of leaving it out")
    parser.add_argument("names", nargs="*")
    args = parser.parse_args(argv)
    sources = args.source.split(",")
    chosen = [m for m in MUTANTS if not args.names or m.name in args.names]
    baseline: set[str] = set()
    unmutated = {}
    for op in sorted({m.op for m in chosen}):
        for source in sources:
            clean = unmutated[op, source] = quiet(None, args.ep, OPS[op], source)
            if clean.code not in (0, 1):
                print(f"mutation_test: `ep-testbed run --ep {args.ep}` ended with exit {clean.code} before judging a case "
                      f"(is the EP installed here? `ep-testbed doctor --ep {args.ep}` says)", file=sys.stderr)
                return 2
            if clean.failing:
                print(f"unmutated reference fails {op} {source} (the EP's findings, left out of every count): "
                      f"{clean.failing}")
                if args.strict_baseline:
                    return 2
                baseline.update(case for case, _ in clean.failing)
    survivors = []
    for mutant in chosen:
        start = time.monotonic()
        results = [_new_failures(quiet(mutant, args.ep, OPS[mutant.op], source), baseline) for source in sources]
        for r in results:  # a case that errs or crashes shows a broken replacement, not a caught fault
            r.failing = [(case, outcome) for case, outcome in r.failing if outcome in VERDICTS]
        killed = [r for r in results if r.failing]
        equivalent = mutant.equivalent_on.get(args.ep)
        shown: list[str] = []
        if not killed and not equivalent:  # can it show on this EP at all?
            changed = {source: changed_cases(mutant, OPS[mutant.op], source) for source in sources}
            shown = [case for source in sources for case in shown_on_the_ep(changed[source], unmutated[mutant.op, source])]
            if not shown:
                equivalent = "; ".join(f"{source}: {hidden_reason(changed[source], unmutated[mutant.op, source])}"
                                       for source in sources)
        verdict = "killed" if killed else ("equivalent" if equivalent else "SURVIVED")
        cases = sum(len(r.failing) for r in results)
        first = next((r.failing[0] for r in killed), ("", ""))
        print(f"{mutant.name:28} {mutant.kind:20} {verdict:10} {cases:4} failing, e.g. {first[0]} ({first[1]})"
              f"  [{time.monotonic() - start:.1f} s]", flush=True)
        if equivalent and not killed:
            print(f"{'':28} why: {equivalent}")
        if not killed and not equivalent:
            survivors.append(mutant.name)
            print(f"{'':28} changes {len(shown)} case(s) the EP runs clean, and no verdict caught it: "
                  f"{', '.join(shown[:8])}{' ...' if len(shown) > 8 else ''}")
    print(f"{len(chosen)} mutants on {args.ep} ({', '.join(sources)}): {len(chosen) - len(survivors)} killed or "
          f"equivalent, {len(survivors)} survived{': ' + ', '.join(survivors) if survivors else ''}")
    return 1 if survivors else 0


def _new_failures(judged, baseline: set[str]):
    """``judged`` with only the cases the unmutated reference does not already fail."""
    judged.failing = [(case, outcome) for case, outcome in judged.failing if case not in baseline]
    return judged


if __name__ == "__main__":
    sys.exit(main())
