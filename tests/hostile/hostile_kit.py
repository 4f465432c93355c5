"""What the attack suite generates: Hypothesis settings and strategies for hostile values, and
mutations of desc files, NPZ files, result lines and models that start from valid ones (so
that most inputs get past the first check and reach the deeper readers).

Every strategy here produces *data*; the test modules write it to files and hand the files
to a command through the sandbox (``sandbox.Sandbox``).
"""

from __future__ import annotations

import io
import json
import struct
import zipfile
from typing import Any

import numpy as np
from hypothesis import HealthCheck, settings
from hypothesis import strategies as st
from hypothesis_profiles import examples, long_profile

#: The settings every property test here starts from: deterministic under the default profile
#: (CI runs the same inputs every time), fresh seeds under ``long`` (tests/conftest.py).
BASE = settings(deadline=None, database=None, suppress_health_check=list(HealthCheck), derandomize=not long_profile())
#: A cap the suite passes to every command that computes (``--limit elements=...``): whatever
#: a hostile input gets past validation is then small, and the sandbox's address-space limit
#: (far above it) catches any allocation that no cap checked.
SMALL_CAP = ["--limit", f"elements={2**20}"]
#: ``model run`` reads and runs the model in a child interpreter unless ``--in-process``: the
#: sandbox's audit hook sees only its own process, so the hostile model tests run the reader
#: in process, where every file it opens is recorded (and no interpreter starts per example).
#: The child process itself is tested by tests/models/test_models_isolation.py.
IN_PROCESS = ["--in-process"]


def hostile(n: int) -> settings:
    """Settings for a property test of ``n`` examples (ten times as many under the ``long``
    profile, ``HYPOTHESIS_PROFILE=long``, from fresh seeds too: a scheduled soak)."""
    return settings(BASE, max_examples=examples(n))


# --- values ----------------------------------------------------------------------------------

#: Text that attacks a terminal, a path or a parser.
NASTY_TEXT = ["", " ", "\x1b[2J\x1b[H", "a\nverdict: pass", "\r  verdict: pass", "\u202eevil", "\x00", "\x7f\x9b",
              "../../../etc/passwd", "/etc/passwd", "C:\\Windows\\win.ini", "NaN", "inf", "-Infinity", "9" * 50,
              "DML_TENSOR_DATA_TYPE_FLOAT32", "FLOAT16", "UINT64", "DML_OPERATOR_MAX_POOLING2", "x" * 5000]
NASTY_INTS = [0, 1, -1, 2, 3, 4, 7, 2**16, 65535, 100000, 2**31 - 1, 2**31, 2**32 - 1, 2**32, 2**63 - 1, 2**63,
              2**64, -2**63, 10**30, 10**39]
NASTY_FLOATS = [0.0, -0.0, 0.5, -1.5, 1e-45, 5e-324, 1e38, 3.4028235e38, 1e39, -1e39, 1e308, 0.1]

nasty_scalars = st.one_of(
    st.sampled_from(NASTY_INTS), st.sampled_from(NASTY_FLOATS), st.sampled_from(NASTY_TEXT), st.booleans(), st.none(),
    st.integers(-10, 70000), st.floats(allow_nan=False, allow_infinity=False, width=64), st.text(max_size=12))
nasty_json = st.recursive(nasty_scalars, lambda inner: st.lists(inner, max_size=5)
                          | st.dictionaries(st.text(max_size=10), inner, max_size=4), max_leaves=8)


def paths_of(value: Any, prefix: tuple = ()) -> list[tuple]:
    """Every path (a tuple of keys and indices) into a JSON value, the root included."""
    found = [prefix]
    if isinstance(value, dict):
        for key, item in value.items():
            found += paths_of(item, prefix + (key,))
    elif isinstance(value, list):
        for index, item in enumerate(value):
            found += paths_of(item, prefix + (index,))
    return found


def mutate_json(data: st.DataObject, value: Any, label: str = "mutation") -> Any:
    """``value`` (a deep copy) with one to three mutations drawn from ``data``: a node replaced by
    a nasty value, a key removed, an unknown key added, a list shortened or lengthened."""
    value = json.loads(json.dumps(value))
    for _ in range(data.draw(st.integers(1, 3), label=f"{label}-count")):
        path = data.draw(st.sampled_from(paths_of(value)), label=f"{label}-path")
        how = data.draw(st.sampled_from(["replace", "replace", "replace", "delete", "add", "resize"]), label=label)
        if not path:
            if how == "replace":
                value = data.draw(nasty_json, label=f"{label}-root")
            continue
        parent = value
        for key in path[:-1]:
            parent = parent[key]
        key = path[-1]
        if how == "replace":
            parent[key] = data.draw(nasty_json, label=f"{label}-value")
        elif how == "delete":
            del parent[key]
        elif how == "add" and isinstance(parent[key], dict):
            parent[key][data.draw(st.sampled_from(NASTY_TEXT[:8] + ["Sizes", "Extra"]))] = data.draw(nasty_json)
        elif how == "resize" and isinstance(parent[key], list):
            items = parent[key]
            parent[key] = items[: data.draw(st.integers(0, len(items)))] + data.draw(st.lists(nasty_scalars, max_size=3))
    return value


def corrupt_bytes(data: st.DataObject, raw: bytes, label: str = "bytes") -> bytes:
    """``raw``, or a damaged copy: truncated, a byte flipped, invalid UTF-8 or a BOM inserted,
    garbage appended, a ``NaN`` literal or a huge integer spliced in, or deep nesting."""
    how = data.draw(st.sampled_from(["none", "none", "truncate", "flip", "utf8", "bom", "append", "nan", "digits",
                                     "nest", "empty"]), label=label)
    at = data.draw(st.integers(0, max(0, len(raw))), label=f"{label}-at")
    if how == "truncate":
        return raw[:at]
    if how == "flip" and raw:
        at = min(at, len(raw) - 1)
        return raw[:at] + bytes([raw[at] ^ data.draw(st.integers(1, 255))]) + raw[at + 1:]
    if how == "utf8":
        return raw[:at] + b"\xff\xfe\xc0" + raw[at:]
    if how == "bom":
        return b"\xef\xbb\xbf" + raw
    if how == "append":
        return raw + data.draw(st.binary(max_size=40))
    if how == "nan":
        return raw.replace(b"0.5", b"NaN", 1).replace(b"1,", b"Infinity,", 1)
    if how == "digits":
        return raw.replace(b"1", b"1" + b"7" * data.draw(st.sampled_from([30, 400, 5000])), 1)
    if how == "nest":
        depth = data.draw(st.sampled_from([70, 900, 100000]))
        return b"[" * depth + raw + b"]" * depth
    if how == "empty":
        return b""
    return raw


# --- arrays ----------------------------------------------------------------------------------

def npy_bytes(header: dict, data: bytes, version: tuple[int, int] = (1, 0)) -> bytes:
    """An ``.npy`` file from a header dict (written verbatim, so it may lie) and data bytes."""
    text = repr(header).encode("latin1")
    fmt = "<H" if version == (1, 0) else "<I"
    pad = 64 - (len(b"\x93NUMPY") + 2 + struct.calcsize(fmt) + len(text) + 1) % 64
    text += b" " * pad + b"\n"
    return b"\x93NUMPY" + bytes(version) + struct.pack(fmt, len(text)) + text + data


def npz_bytes(members: list[tuple[str, bytes]], compress: bool = False) -> bytes:
    """A zip of ``(name, bytes)`` members, like ``numpy.savez`` writes."""
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w", zipfile.ZIP_DEFLATED if compress else zipfile.ZIP_STORED) as archive:
        for name, payload in members:
            archive.writestr(name, payload)
    return buffer.getvalue()


def lie_about_sizes(raw: bytes, factor: int) -> bytes:
    """A zip whose every member declares ``factor`` times its real uncompressed size (in the
    local headers and the central directory): what a zip bomb's directory looks like."""
    out = bytearray(raw)
    for signature, offset in ((b"PK\x03\x04", 22), (b"PK\x01\x02", 24)):
        start = 0
        while (start := out.find(signature, start)) >= 0:
            (size,) = struct.unpack_from("<I", out, start + offset)
            struct.pack_into("<I", out, start + offset, min(size * factor + 1, 2**32 - 1))
            start += 4
    return bytes(out)


@st.composite
def hostile_npz(draw, names: list[str], shapes: dict[str, tuple[int, ...]], dtypes: dict[str, str]) -> bytes:
    """An NPZ meant for arrays ``names`` with ``shapes`` and ``dtypes`` (``numpy`` dtype strings),
    mutated: members missing or extra, lying or hostile headers (object, structured, big-endian,
    huge shapes), short or long data, a pickle, sizes that lie, compression, byte damage."""
    members = []
    for name in names:
        shape = shapes[name]
        dtype = np.dtype(dtypes[name])
        how = draw(st.sampled_from(["good", "good", "good", "shape", "dtype", "short", "long", "pickle", "drop",
                                    "fortran", "rename"]))
        header = {"descr": dtype.str, "fortran_order": how == "fortran", "shape": shape}
        data = np.zeros(shape, dtype).tobytes()
        if how == "shape":
            header["shape"] = draw(st.sampled_from([(10**12,), (2**31, 2**31), (), (0,), (-1,), shape + (1,), (2**20 + 1,)]))
        elif how == "dtype":
            header["descr"] = draw(st.sampled_from(["|O", "<V8", ">f4", "<f8", "|S4", "<U3", "<M8[s]", "[('a', '<f4')]",
                                                   "<c8", "|b1", "<i8"]))
        elif how == "short":
            data = data[: len(data) // 2]
        elif how == "long":
            data += b"\0" * 16
        elif how == "pickle":
            members.append((f"{name}.npy", b"\x80\x04\x95\x10\x00cos\nsystem\n."))
            continue
        elif how == "drop":
            continue
        member = npy_bytes(header, data, draw(st.sampled_from([(1, 0), (2, 0)])))
        members.append((f"{name}.npy" if how != "rename" else f"{name}.bin", member))
    if draw(st.booleans()):
        members.append((draw(st.sampled_from(["Extra.npy", "../escape.npy", "a/b.npy", "InputTensor.npy"])),
                        npy_bytes({"descr": "<f4", "fortran_order": False, "shape": (2,)}, bytes(8))))
    raw = npz_bytes(members, draw(st.booleans()))
    if draw(st.integers(0, 5)) == 0:
        raw = lie_about_sizes(raw, draw(st.sampled_from([2, 1000, 2**20])))
    return corrupt_bytes(_Data(draw), raw, "npz-bytes")


class _Data:
    """``st.data()``'s ``draw`` for helpers called inside a composite strategy."""

    def __init__(self, draw):
        self.draw = lambda strategy, label=None: draw(strategy)
