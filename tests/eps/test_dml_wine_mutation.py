"""Faults planted in the reference fail a case on DirectML too (tests/mutation/mutants.py): the
mutants whose CPU kill is a pinned ONNX Runtime reading, or which cannot show on the CPU EP at all,
are the ones DirectML's own readings must catch. Each runs its witness cases on DirectML under Wine
in this process, expectations on. Needs `bash tools/dml-wine.sh` (Linux)."""

from __future__ import annotations

import contextlib
import io
import sys
from pathlib import Path

import pytest
from dml_wine_kit import needs_host

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "mutation"))
from mutants import named  # noqa: E402
from mutation_kit import OPS, judge  # noqa: E402

pytestmark = pytest.mark.skipif(sys.platform != "linux", reason="the DirectML host runs under Wine on Linux")

#: Where the CPU EP's reading differs from DirectML's: each must be caught here on its own.
ON_DIRECTML = ("rp-nan-propagates", "rp-round-half-away", "mp-lowest-start", "ra-lerp-as-weighted", "ra-closed-edge",
               "ra-float32-accumulation", "ra-count-without-minimum", "ra-max-nan-propagates")


@pytest.mark.slow
@pytest.mark.parametrize("name", ON_DIRECTML)
def test_a_planted_fault_fails_a_case_on_directml(name):
    needs_host()
    mutant = named(name)
    source, selection = mutant.witness
    with contextlib.redirect_stdout(io.StringIO()), contextlib.redirect_stderr(io.StringIO()):
        clean = judge(None, "dml-wine", OPS[mutant.op], source, select=selection)
        result = judge(mutant, "dml-wine", OPS[mutant.op], source, select=selection)
    assert clean.code == 0 and not clean.failing, clean.failing
    assert result.killed, (name, result.code)
