"""What the first DirectML run of the catalog will report where ORT's DirectML EP source predicts it.

    python tools/dml_predictions.py [--seed N] [--ops roi_pooling,...] [--ort-version 1.24.4] [-v]

For every catalog case the DirectML EP's predictor (``harness/eps/dml_ep.py``) reads the case's ONNX
model against the EP's registrations and operator files; a declined node implies ``not-on-ep``,
a diverging field ``fail``. The bundled ``harness/expectations/dml.json`` (evaluated for the
onnxruntime-directml version given, default 1.24.4) should cover every one of them: a refusal
(``not-on-ep``, with its reason) or a divergence its readings must then reproduce (``known``, once
the run proves it). Prints one line per predicted case with ``-v``, then the counts; exits 1 when
some predicted case has no entry (an unexpected outcome on the first run).
Nothing here runs DirectML: it is a reading of the source, as every prediction says.
"""

from __future__ import annotations

import argparse
import collections
import sys

from ep_testbed.graphs.catalog import build_catalog
from ep_testbed.harness.core import expectations as expectations_mod
from ep_testbed.harness.eps import dml_ep, registry


def main(argv: list[str] | None = None) -> int:
    """Print the outlook of the selected catalog; 1 if a predicted case has no entry."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--ops", help="comma-separated operators (default: all)")
    parser.add_argument("--ort-version", default="1.24.4", help="onnxruntime-directml version the expectations "
                        "are evaluated for (default 1.24.4, the newest wheel)")
    parser.add_argument("-v", "--verbose", action="store_true", help="one line per predicted case")
    args = parser.parse_args(argv)
    cases = build_catalog(args.ops.split(",") if args.ops else None, seed=args.seed)
    expectations = expectations_mod.for_ep("dml", ort_version=args.ort_version, predictors=registry.predictors())
    rows = dml_ep.first_run_outlook(cases, expectations)
    for row in rows if args.verbose else []:
        what = sorted({f"{p['kind']} {p['op_type']}.{p['field']}" for p in row["predictions"]})
        print(f"{row['reported']:10} {row['id']}  ({'; '.join(what)})")
    counts = collections.Counter((row["predicted"], row["reported"]) for row in rows)
    unexpected = [row for row in rows if row["entry"] is None]
    print(f"{len(cases)} catalog cases, {len(rows)} with a predicted outcome:")
    for (predicted, reported), n in sorted(counts.items()):
        print(f"  predicted {predicted:9} -> reported {reported:9} {n}")
    print(f"unexpected on the first DML run (predicted, not covered by dml.json): {len(unexpected)}")
    for row in unexpected:
        print(f"  {row['id']}: predicted {row['predicted']}, reported {row['reported']}")
    return 1 if unexpected else 0


if __name__ == "__main__":
    sys.exit(main())
