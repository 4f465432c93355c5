"""Random inputs are drawn into the output's dtype a chunk at a time (``dtypes.filled``): the
values are those of one whole-array draw, and the memory is the output's plus one chunk, never
the int64 draws and float64 quotients of the whole array (8x a float32 input each)."""

from __future__ import annotations

import subprocess
import sys

import numpy as np
import pytest

from ep_testbed.reference.dtypes import CHUNK, NUMPY_DTYPES, random_values


@pytest.mark.parametrize("data_type", sorted(NUMPY_DTYPES))
def test_chunked_values_are_those_of_one_whole_draw(data_type):
    sizes = (1, 2, CHUNK // 2 + 3)  # spans a chunk boundary
    dtype = NUMPY_DTYPES[data_type]
    rng = np.random.default_rng(7)
    if np.issubdtype(dtype, np.floating):
        whole = (rng.integers(-32, 33, size=sizes) / 8).astype(dtype)
    else:
        info = np.iinfo(dtype)
        whole = rng.integers(max(info.min, -100), min(info.max, 100), size=sizes, endpoint=True).astype(dtype)
    chunked = random_values(sizes, data_type, np.random.default_rng(7))
    assert chunked.dtype == dtype and chunked.shape == sizes
    np.testing.assert_array_equal(chunked, whole)


def test_a_float32_input_is_drawn_within_little_more_than_its_own_size():
    """2**26 float32 elements (256 MiB) under an address-space limit 400 MiB above the
    interpreter's size: the whole-array draw needs 512 MiB of int64 first and fails there."""
    script = (
        "import resource, numpy as np\n"
        "from ep_testbed.reference.dtypes import random_values\n"
        "size = next(int(l.split()[1]) * 1024 for l in open('/proc/self/status') if l.startswith('VmSize:'))\n"
        "limit = size + 400 * 2**20\n"
        "resource.setrlimit(resource.RLIMIT_AS, (limit, limit))\n"
        "x = random_values((1, 1, 8192, 8192), 'FLOAT32', np.random.default_rng(0))\n"
        "print(x.dtype, x.size, float(x.min()), float(x.max()))\n")
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr[-2000:]
    assert done.stdout.split() == ["float32", str(2**26), "-4.0", "4.0"]


@pytest.mark.parametrize("dtype,draw", [(np.float32, "standard_normal"), (np.bool_, "coin"), (np.int64, "small")])
def test_model_input_draws_filled_in_chunks_equal_one_whole_draw(dtype, draw):
    """The whole-model inputs (``harness/models/inputs.py``) fill their dtype the same way."""
    from ep_testbed.reference.dtypes import filled

    def make(rng):
        return {"standard_normal": rng.standard_normal, "coin": lambda n: rng.random(n) < 0.5,
                "small": lambda n: rng.integers(0, 4, size=n)}[draw]

    shape = (3, CHUNK // 2 + 1)
    whole = np.asarray(make(np.random.default_rng(5))(shape)).astype(dtype)  # one draw of the whole shape
    np.testing.assert_array_equal(filled(shape, dtype, make(np.random.default_rng(5))), whole)
