"""The one reader of untrusted files (harness/core/untrusted_files.py) and terminal escaping
(harness/core/terminal.py), piece by piece. The attack suite (tests/hostile/) feeds the same pieces
through every command."""

from __future__ import annotations

import io
import json
import os
import zipfile

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from ep_testbed.harness.core.terminal import safe, safe_message
from ep_testbed.harness.core.untrusted_files import (
    FileRefused,
    Limits,
    inside,
    open_output,
    output_folder,
    parse_json,
    parse_size,
    plan_copy,
    read_array,
    read_arrays,
    read_bytes,
    read_json,
    read_json_lines,
    using_limits,
)
from ep_testbed.reference.checks import max_elements


@pytest.mark.parametrize("text, value", [("1000", 1000), ("2**30", 2**30), ("512MiB", 512 * 2**20), ("8GB", 8 * 10**9),
                                         ("1_000", 1000), ("abc", None), ("2**99", None), ("-1", None), ("1e3", None),
                                         ("9" * 30, None)])
def test_sizes_are_read_in_the_forms_the_help_gives(text, value):
    assert parse_size(text) == value


def test_limits_take_items_by_name_and_refuse_unknown_or_bad_ones():
    caps = Limits().with_items(["elements=2**30", "npz-bytes=1GiB"])
    assert caps.elements == 2**30 and caps.npz_bytes == 2**30 and caps.json_bytes == Limits().json_bytes
    for bad in ("elements", "speed=1", "elements=0", "elements=-5", "elements=lots"):
        with pytest.raises(ValueError, match="--limit"):
            Limits().with_items([bad])


def test_using_limits_sets_the_references_element_cap_too():
    before = max_elements()
    with using_limits(Limits(elements=1234)):
        assert max_elements() == 1234
    assert max_elements() == before


@pytest.mark.parametrize("text, words", [("NaN", "NaN is not JSON"), ("[Infinity]", "Infinity is not JSON"),
                                         ("1e400", "overflows a float"), ("9" * 41, "an integer of 41 digits"),
                                         ("[" * 70 + "]" * 70, "nested 70 levels deep"),
                                         ("[" * 100000 + "]" * 100000, "nested 100000 levels deep, more than 64"),
                                         ("{", "not JSON (Expecting")])
def test_json_is_strict(text, words):
    with pytest.raises(FileRefused, match=words.replace("(", r"\(")):
        parse_json(text, "f.json", "desc")
    assert parse_json('{"a": [1, 2.5, "x", null, true]}') == {"a": [1, 2.5, "x", None, True]}


def test_the_nesting_cap_counts_containers_not_brackets_in_strings():
    """Brackets inside string literals (an escaped quote among them) do not nest; many shallow
    containers side by side are not deep; 65 levels are refused, with brackets in strings or not."""
    wide = [[i, {"k": [i]}] for i in range(200)]
    strings = {"a": "[" * 500 + '\\"{' * 100, "b": [["]]]"]]}
    assert parse_json(json.dumps(wide)) == wide and parse_json(json.dumps(strings)) == strings
    deep = {"s": "]" * 200 + "}" * 50}
    for _ in range(64):
        deep = [deep]
    with pytest.raises(FileRefused, match="nested 65 levels deep"):
        parse_json(json.dumps(deep), "f.json", "desc")
    assert parse_json(json.dumps(deep[0]))[0] == deep[0][0]


_TRICKY_TEXT = st.text(st.sampled_from('[]{}"\\/ax\n\u00e9\u2028'), max_size=12)
_NESTED = st.recursive(st.none() | st.integers() | _TRICKY_TEXT,
                       lambda inner: st.lists(inner, max_size=3) | st.dictionaries(_TRICKY_TEXT, inner, max_size=3),
                       max_leaves=12)


@given(_NESTED, st.booleans())
def test_the_depth_counted_on_the_text_is_the_values_depth(value, ascii_only):
    """Past the cap (0 here, so always), the count on the text skips every string literal, escaped
    quotes, backslashes and brackets in keys and values included, and equals the parsed value's."""
    from ep_testbed.harness.core.untrusted_files import _text_depth, json_depth

    text = json.dumps(value, ensure_ascii=ascii_only)
    assert _text_depth(text, 0) == json_depth(value)


def test_escapes_written_by_hand_do_not_open_or_close_strings():
    """Escapes json.dumps never writes (an escaped slash, a quote or backslash as \\u escapes, a
    backslash pair before a closing quote) hide no bracket and leave no string open."""
    from ep_testbed.harness.core.untrusted_files import _text_depth

    text = r'{"a\/[": "\u0022[[", "b": ["\\", "\\\"{"], "c": [[["\u005c"]]]}'
    assert parse_json(text) == {"a/[": '"[[', "b": ["\\", '\\"{'], "c": [[["\\"]]]}
    assert _text_depth(text, 0) == 4


_DIGITS = st.text(st.sampled_from("0123456789"), min_size=1, max_size=330).map(lambda d: d.lstrip("0") or "0")
_NUMBER_LITERALS = st.one_of(
    st.tuples(st.sampled_from(["", "-"]), _DIGITS).map("".join),
    st.tuples(st.sampled_from(["", "-"]), _DIGITS, st.sampled_from(["", ".5", ".0001"]),
              st.sampled_from(["", "e", "E", "e+", "E+", "e-", "E-"]), st.integers(0, 400)).map(
        lambda t: t[0] + t[1] + t[2] + (t[3] + str(t[4]) if t[3] else "")),
    st.floats(allow_nan=False, allow_infinity=False).map(repr))


@given(st.lists(_NUMBER_LITERALS, min_size=1, max_size=4), st.sampled_from([40, 1000]))
def test_numbers_parse_as_the_checked_parse_gives_them(literals, cap):
    """Where no literal could trip the integer-digit or float-overflow check, parse_json leaves the
    numbers to the C parser: for any literals, the value (or the refusal) is the one the checked
    parse of every number gives."""
    import ep_testbed.harness.core.untrusted_files as untrusted

    text = '{"m": "x", "v": [' + ", ".join(literals) + "]}"

    def outcome() -> object:
        try:
            return repr(parse_json(text, "f.json", "desc"))
        except FileRefused as exc:
            return str(exc)

    with using_limits(Limits(int_digits=cap)):
        fast = outcome()
        real = untrusted._numbers_need_checks
        untrusted._numbers_need_checks = lambda text, digits: True
        try:
            checked = outcome()
        finally:
            untrusted._numbers_need_checks = real
    assert fast == checked


@pytest.mark.parametrize("literal, words", [("1" + "0" * 400 + ".0", "overflows a float"),
                                            ("-" + "9" * 309 + ".5", "overflows a float"),
                                            ("1.8e308", "overflows a float"), ("1" + "0" * 299 + "e99", "overflows a float"),
                                            ("9" * 210 + "e99", "overflows a float"),
                                            ("7" * 41, "an integer of 41 digits")])
def test_number_refusals_hold_with_a_raised_integer_cap_too(literal, words):
    """A float overflows with or without an exponent, whatever the integer cap, and the digit cap
    follows ``--limit``."""
    for cap in (40, 1000):
        with using_limits(Limits(int_digits=cap)):
            if "integer" in words and cap == 1000:
                assert parse_json(f"[{literal}]") == [int(literal)]
                continue
            with pytest.raises(FileRefused, match=words):
                parse_json(f'{{"m": "{"x" * 50}", "v": [{literal}]}}', "f.json", "desc")


def test_files_that_are_not_regular_are_refused_before_opening(tmp_path):
    os.mkfifo(tmp_path / "fifo")  # opening it would block forever
    for path, words in ((tmp_path / "fifo", "not a regular file"), (tmp_path, "a folder"),
                        (tmp_path / "none", "no such"), ("/dev/zero", "not a regular file")):
        with pytest.raises(FileRefused, match=words):
            read_json(path)


def test_a_file_larger_than_its_cap_is_refused_unread(tmp_path):
    (tmp_path / "big.json").write_text("[" + "1," * 1000 + "1]")
    with using_limits(Limits(json_bytes=100)):
        with pytest.raises(FileRefused, match=r"(?s)holds 2003 bytes, more than the 100.*--limit json-bytes=2003"):
            read_bytes(tmp_path / "big.json")


def test_json_lines_name_every_bad_line_and_tell_a_torn_end(tmp_path):
    path = tmp_path / "r.jsonl"
    path.write_bytes(b'{"type": "run"}\n\n[1]\n{"a": \xff}\n{"ok": 1}\n{"torn": ')
    items = list(read_json_lines(path))
    assert [n for n, _ in items] == [1, 3, 4, 5, 6]
    bad = {n: item for n, item in items if not isinstance(item, dict)}
    assert sorted(bad) == [3, 4, 6] and bad[6].torn and not bad[3].torn and "not an object" in bad[3].reason
    with using_limits(Limits(line_bytes=10)):
        long_line = [item for _, item in read_json_lines(path) if not isinstance(item, dict)]
    assert any("longer than 10 bytes" in b.reason for b in long_line)


def _npz(**arrays) -> bytes:
    buffer = io.BytesIO()
    np.savez(buffer, **arrays)
    return buffer.getvalue()


@given(st.sampled_from(["<f4", ">f4", "<i8", "|b1", ">u2", "<c8", "<f2"]), st.lists(st.integers(0, 4), max_size=3),
       st.booleans())
def test_arrays_read_back_exactly_in_native_byte_order(dtype, shape, fortran):
    array = (np.arange(int(np.prod(shape))) % 2).astype(np.dtype(dtype)).reshape(shape)
    if fortran:
        array = np.asfortranarray(array)
    import tempfile

    with tempfile.TemporaryDirectory() as folder:
        path = os.path.join(folder, "a.npz")
        with open(path, "wb") as f:
            f.write(_npz(x=array))
        got = read_arrays(path)["x"]
    assert got.dtype == array.dtype.newbyteorder("=") and got.dtype.isnative
    assert got.shape == array.shape and np.array_equal(got, array)


@pytest.mark.parametrize("make, words", [
    (lambda: _npz(x=np.array([{}], dtype=object)), "dtype object"),
    (lambda: _npz(x=np.zeros(2, dtype=[("a", "<f4")])), "has dtype"),
    (lambda: _npz(x=np.zeros(3))[:-20], "not a readable NPZ"),
    (lambda: b"PK\x05\x06" + bytes(18), None),
    (lambda: b"hello", "does not start like a zip"),
])
def test_bad_npz_files_are_refused_naming_the_array(tmp_path, make, words):
    (tmp_path / "x.npz").write_bytes(make())
    if words is None:
        assert read_arrays(tmp_path / "x.npz") == {}  # an empty archive holds no arrays: the caller decides
        return
    with pytest.raises(FileRefused, match=words):
        read_arrays(tmp_path / "x.npz")


def test_an_array_over_the_element_cap_is_refused_before_allocation(tmp_path):
    (tmp_path / "x.npz").write_bytes(_npz(x=np.zeros(1000, np.float32)))
    with using_limits(Limits(elements=999)):
        with pytest.raises(FileRefused, match=r"shape \[1000\] \(1000 elements\), more than the 999"):
            read_arrays(tmp_path / "x.npz")
    with using_limits(Limits(npz_bytes=1000)):
        with pytest.raises(FileRefused, match="declare .* bytes uncompressed, more than the 1000"):
            read_arrays(tmp_path / "x.npz")
    np.save(tmp_path / "x.npy", np.ones(3))
    assert read_array(tmp_path / "x.npy").tolist() == [1, 1, 1]
    with pytest.raises(FileRefused, match="one unnamed array"):
        read_arrays(tmp_path / "x.npy")


def test_a_member_whose_data_is_shorter_than_its_header_says_is_refused(tmp_path):
    buffer = io.BytesIO()
    np.save(buffer, np.zeros(100, np.float32))
    with zipfile.ZipFile(tmp_path / "x.npz", "w") as archive:
        archive.writestr("x.npy", buffer.getvalue()[:-40])
    with pytest.raises(FileRefused, match="its header declares 400 bytes of data, the file holds 360"):
        read_arrays(tmp_path / "x.npz")


@pytest.mark.parametrize("relative", ["../x", "/etc/passwd", "C:\\x", "\\\\server\\share", "a/../../x", "", "a\x00b",
                                      "link/x"])
def test_paths_from_data_stay_inside_their_folder(tmp_path, relative):
    root = tmp_path / "root"
    root.mkdir()
    os.symlink(tmp_path, root / "link")
    with pytest.raises(FileRefused):
        inside(root, relative)
    assert inside(root, "a/./b/../c") == root.resolve() / "a" / "c"


def test_copies_refuse_links_before_copying_anything(tmp_path):
    (tmp_path / "src" / "case").mkdir(parents=True)
    (tmp_path / "src" / "case" / "a.txt").write_text("a")
    (tmp_path / "secret").write_text("secret")
    assert [p[0].name for p in plan_copy(tmp_path / "src", "case", tmp_path / "dst")] == ["a.txt"]
    os.symlink(tmp_path / "secret", tmp_path / "src" / "case" / "b.txt")
    with pytest.raises(FileRefused, match="symbolic link"):
        plan_copy(tmp_path / "src", "case", tmp_path / "dst")
    assert not (tmp_path / "dst").exists()


def test_writes_replace_a_planted_link_instead_of_following_it(tmp_path):
    (tmp_path / "outside").write_text("keep")
    run = tmp_path / "run"
    run.mkdir()
    os.symlink(tmp_path / "outside", run / "report.html")
    os.symlink(tmp_path, run / "cases")
    with open_output(run / "report.html", "w") as f:
        f.write("new")
    folder = output_folder(run, "cases/x")
    assert (tmp_path / "outside").read_text() == "keep" and (run / "report.html").read_text() == "new"
    assert not (run / "cases").is_symlink() and folder == run / "cases" / "x" and folder.is_dir()


def test_safe_text_shows_every_control_character():
    assert safe("node\x1b[2J\n  verdict: pass\r\u202e\t") == "node\\x1b[2J\\n  verdict: pass\\r\\u202e\\t"
    assert safe("plain name_1 (ok) é 中") == "plain name_1 (ok) é 中"
    assert safe("x" * 50, limit=10) == "xxxxxxx..."
    assert safe_message("line 1\nline 2\x1b[0m") == "line 1\nline 2\\x1b[0m"


@given(st.text())
def test_safe_text_is_one_line_of_printable_characters(text):
    import unicodedata

    shown = safe(text)
    assert not [ch for ch in shown if unicodedata.category(ch) in ("Cc", "Cf", "Cs", "Co", "Cn", "Zl", "Zp")]


def test_results_records_from_a_link_outside_the_run_are_not_read(tmp_path):
    from ep_testbed.harness.core.results import read_run

    (tmp_path / "elsewhere.jsonl").write_text(json.dumps({"type": "run", "ep": "x"}) + "\n")
    (tmp_path / "run").mkdir()
    os.symlink(tmp_path / "elsewhere.jsonl", tmp_path / "run" / "results.jsonl")
    with pytest.raises(FileRefused, match="leads outside the folder"):
        read_run(str(tmp_path / "run"))


def test_a_folder_another_worker_makes_first_is_used_not_an_error(tmp_path, monkeypatch):
    """Workers of one run write case folders at once: when another process makes ``cases`` between
    this one's look and its mkdir, the folder is used (a failing case once lost its folder to
    'File exists')."""
    import pathlib

    real_mkdir = pathlib.Path.mkdir

    def beaten(self, *args, **kwargs):
        if self.name == "cases" and not self.exists():
            real_mkdir(self)  # the other worker wins the race
            raise FileExistsError(17, "File exists", str(self))
        return real_mkdir(self, *args, **kwargs)

    monkeypatch.setattr(pathlib.Path, "mkdir", beaten)
    folder = output_folder(tmp_path / "run", "cases/one")
    assert folder.is_dir() and folder.parent.name == "cases"
    (tmp_path / "run" / "cases" / "two").write_text("not a folder")
    with pytest.raises(FileRefused, match="in the way"):
        output_folder(tmp_path / "run", "cases/two")


@pytest.mark.parametrize("item, most", [("int-digits=100000", "at most 4300"), ("json-depth=100000", "at most 500")])
def test_a_limit_python_itself_cannot_reach_is_refused_at_once(item, most):
    """Raising int-digits past Python's integer-conversion limit, or json-depth past what its JSON
    parser recurses, gave an internal error (a ValueError or a wrong depth) on the first file."""
    if "int-digits" in item and not getattr(__import__("sys"), "get_int_max_str_digits", None):
        pytest.skip("this Python has no integer-conversion limit")
    with pytest.raises(ValueError, match=most):
        Limits().with_items([item])


def test_a_file_nested_past_what_any_limit_allows_says_no_limit_lifts_it(tmp_path):
    path = tmp_path / "deep.json"
    path.write_text("[" * 5000 + "]" * 5000)
    with pytest.raises(FileRefused) as refused:
        read_json(str(path), "desc")
    assert "nested 5000 levels deep, more than 64" in str(refused.value)
    assert "no --limit lifts this: json-depth is at most 500" in str(refused.value), str(refused.value)
    with using_limits(Limits(json_depth=500)), pytest.raises(FileRefused, match="nested 5000 levels deep, more than 500"):
        read_json(str(path), "desc")


@pytest.mark.skipif(not os.path.isfile("/proc/self/status"), reason="needs Linux's /proc")
def test_a_file_that_states_no_size_is_read_to_its_end_under_the_cap():
    """A /proc file states size 0: it was refused as holding 'more than 67108864 bytes'."""
    data = read_bytes("/proc/self/status", "file")
    assert data.startswith(b"Name:") and b"\nPid:" in data
    with pytest.raises(FileRefused, match="holds more than 16 bytes"):
        read_bytes("/proc/self/status", "file", limit=16)
    with pytest.raises(FileRefused, match="not JSON"):
        read_json("/proc/self/status", "desc")
