"""Repro of one ep-testbed case (its id is check.json's "case_id"): runs model.onnx on an execution
provider and judges the outputs as the run did, with the run's tolerances and comparison. Those are
verbatim copies of ep-testbed's judging code, in lib/ep_testbed_judging/; nothing else of
ep-testbed is needed, only numpy and onnxruntime.

Usage: python repro.py [ExecutionProvider]   (default: the run's EP, with its provider options)

Exit status, one meaning each:
  0  the outputs are within tolerance (the first line says pass, or tie-only);
  1  the failure reproduces: outputs outside tolerance, or the EP could not build or run the model;
  2  no verdict: a file of the bundle is missing or damaged, numpy or onnxruntime is missing, this
     onnxruntime lacks the EP or cannot load the model; one line on stderr says what and what to do;
  130  interrupted (Ctrl-C).
"""

import functools
import hashlib
import importlib
import json
import sys
import zipfile
from pathlib import Path

# The bundle stays as downloaded: no __pycache__ of this host's Python beside the vendored code.
sys.dont_write_bytecode = True

HERE = Path(__file__).resolve().parent
JUDGING = "ep_testbed_judging"
# The meanings of ep-testbed's own codes (harness/core/exit_codes.py), restated: the bundle imports no ep-testbed.
PASSED, FAILED, NO_VERDICT, INTERRUPTED = 0, 1, 2, 130
AGAIN = "download the bundle again (the case's section of report.html)"
CHECK_BYTES = 16 * 2**20  # check.json holds a few KB
NPZ_BYTES = 2**31  # what one .npz may declare uncompressed (ep-testbed's own cap on an NPZ)
#: What a check.json needs, and the JSON type of each.
CHECK_FIELDS = {"case_id": str, "provider": str, "provider_options": dict, "tolerances": dict, "outputs": dict,
                "index_outputs": dict, "inputs": dict, "window_rule": bool, "run_outcome": str,
                "run_message": str, "files": dict}
#: The fields that map names to names (index_outputs maps a name to two).
NAME_MAPS = ("provider_options", "outputs", "inputs", "index_outputs")
JSON_TYPES = {str: "string", dict: "object", bool: "true or false"}
#: ONNX Runtime's words when it cannot read a model at all (an IR version, an opset or a protobuf
#: it does not know): this onnxruntime cannot judge, which is no failure of the EP.
#: onnxruntime/core/graph/model.cc ("Unsupported model IR version"), onnxruntime/core/graph/
#: model_load_utils.h (opsets newer than the release), and the INVALID_PROTOBUF status code.
UNREADABLE_MODEL = ("Unsupported model IR version", "official released onnx opset versions", "INVALID_PROTOBUF")
#: ONNX Runtime's words when a node would fall back to the CPU EP (onnxruntime/core/session/
#: inference_session.cc): nothing of the case ran on the EP, so there is nothing to judge.
FALLBACK_REFUSED = "fallback to CPU EP has been explicitly disabled"


class NoVerdict(Exception):
    """Why this script cannot judge the case; the message says what and what to do (exit 2)."""


def main(argv: list) -> int:
    """Judge the case on the provider ``argv`` names (default the run's); the exit status above."""
    try:
        provider = provider_argument(argv)
        check = read_check()
        verify_files(check)
        np, ort = runtime(check)
        judging = load_judging(check)
        feeds, expected = read_npz(np, "inputs.npz"), read_npz(np, "expected.npz")
        outputs = run_model(ort, check, provider, feeds)
        if isinstance(outputs, str):  # the EP refused or raised: the failure, worded as the run words it
            print(f"fail: {outputs}")
            return FAILED
        return judge(np, judging, check, feeds, expected, outputs)
    except NoVerdict as exc:
        print(f"cannot judge: {exc}", file=sys.stderr)
        return NO_VERDICT
    except KeyboardInterrupt:
        print("cannot judge: interrupted", file=sys.stderr)
        return INTERRUPTED
    except Exception as exc:  # whatever else stops it (memory, a damage nothing above foresaw): no verdict
        print(f"cannot judge: repro.py stopped on {first_line(exc)}; {AGAIN}, and if it stops again, report "
              "this line with the bundle", file=sys.stderr)
        return NO_VERDICT


def first_line(exc: BaseException) -> str:
    """``"TypeName: first line of the message"`` (ONNX Runtime's errors can run to pages)."""
    return f"{type(exc).__name__}: {(str(exc).strip().splitlines() or [''])[0]}"


def provider_argument(argv: list) -> "str | None":
    """The provider named on the command line, or None for the run's."""
    if argv and argv[0] in ("-h", "--help"):
        print(__doc__)
    if len(argv) > 1 or (argv and argv[0].startswith("-")):
        raise NoVerdict(f"usage: python repro.py [ExecutionProvider], e.g. CPUExecutionProvider (got {argv!r})")
    return argv[0] if argv else None


def read_check() -> dict:
    """check.json, with every field ``CHECK_FIELDS`` names of its type; NoVerdict otherwise."""
    path = HERE / "check.json"
    if not path.is_file():
        raise NoVerdict(f"check.json is missing from {HERE}; {AGAIN}")
    if path.stat().st_size > CHECK_BYTES:
        raise NoVerdict(f"check.json is {path.stat().st_size} bytes, not a bundle's (at most {CHECK_BYTES}); {AGAIN}")
    try:
        check = json.loads(path.read_bytes().decode("utf-8"), parse_constant=refuse_constant)
    except (ValueError, RecursionError) as exc:  # UnicodeDecodeError and JSONDecodeError are ValueErrors
        raise NoVerdict(f"check.json is damaged (truncated or altered?): not JSON ({exc}); {AGAIN}") from None
    if not isinstance(check, dict):
        raise NoVerdict(f"check.json is damaged: a JSON object was expected, not {type(check).__name__}; {AGAIN}")
    for key, kind in CHECK_FIELDS.items():
        if not isinstance(check.get(key), kind):
            raise NoVerdict(f"check.json is damaged: field {key!r} is missing or not a JSON {JSON_TYPES[kind]}; {AGAIN}")
    for key in NAME_MAPS:
        for name, value in check[key].items():
            pair = key == "index_outputs"
            if not (isinstance(value, list) and len(value) == 2 and all(isinstance(v, str) for v in value)
                    if pair else isinstance(value, str)):
                raise NoVerdict(f"check.json is damaged: {key}[{name!r}] must be "
                                f"{'two names' if pair else 'a string'}, not {value!r}; {AGAIN}")
    return check


def refuse_constant(name: str) -> None:
    """JSON has no NaN or Infinity; a check.json that holds one was not written by ep-testbed."""
    raise ValueError(f"{name} is not JSON")


def verify_files(check: dict) -> None:
    """Every file check.json lists has the size and SHA-256 the bundle wrote: a truncated or
    altered file gets no verdict, never a wrong one. A file changed on purpose is judged once its
    entry is deleted from check.json's "files"."""
    for name, record in check["files"].items():
        size, digest = (record.get("bytes"), record.get("sha256")) if isinstance(record, dict) else (None, None)
        if not isinstance(size, int) or not isinstance(digest, str):
            raise NoVerdict(f'check.json is damaged: "files" entry {name!r} needs "bytes" and "sha256"; {AGAIN}')
        path = bundle_path(name)
        if not path.is_file():
            raise NoVerdict(f"{name} is missing from the bundle; {AGAIN}")
        if path.stat().st_size != size:
            raise NoVerdict(f"{name} is damaged: {path.stat().st_size} bytes where the bundle wrote {size} "
                            f"(truncated?); {AGAIN}")
        if sha256(path) != digest:
            raise NoVerdict(f"{name} is damaged: its content differs from what the bundle wrote (SHA-256); {AGAIN}, "
                            f'or, if you changed it on purpose, delete its entry under "files" in check.json')


def bundle_path(name: str) -> Path:
    """``name`` (a relative, forward-slash path from check.json) inside the bundle folder."""
    parts = name.split("/")
    if not name or name.startswith("/") or "\\" in name or ":" in name or any(p in ("", ".", "..") for p in parts):
        raise NoVerdict(f"check.json is damaged: {name!r} is not a file of the bundle; {AGAIN}")
    return HERE.joinpath(*parts)


def sha256(path: Path) -> str:
    """The file's SHA-256, read in 1 MiB pieces."""
    digest = hashlib.sha256()
    with open(path, "rb") as f:
        for piece in iter(lambda: f.read(2**20), b""):
            digest.update(piece)
    return digest.hexdigest()


def runtime(check: dict) -> tuple:
    """(numpy, onnxruntime), imported; NoVerdict naming what to install when either is missing."""
    try:
        import numpy as np
        import onnxruntime as ort
    except ImportError as exc:
        raise NoVerdict(f"{exc.name or 'a module'} is not installed in {sys.executable} ({first_line(exc)}): "
                        f"python -m pip install numpy {requirement(check)} (the onnxruntime the run used)") from None
    np.seterr(all="ignore")  # NaN and infinities are data here; the comparison handles them
    if hasattr(ort, "set_default_logger_severity"):  # errors only: kernels log warnings outside any session
        ort.set_default_logger_severity(3)
    return np, ort


def load_judging(check: dict) -> dict:
    """The vendored comparison and tolerance rule (and the reference, when the operator's window
    rule tells a tie from a mismatch), by name; NoVerdict when lib/ lacks one or holds a damaged one."""
    sys.path.insert(0, str(HERE / "lib"))
    names = ["compare", "tolerances"] + (["reference"] if check["window_rule"] else [])
    modules = {}
    for name in names:
        try:
            modules[name] = importlib.import_module(f"{JUDGING}.{name}")
        except ImportError as exc:
            missing = (exc.name or f"{JUDGING}.{name}").replace(".", "/")
            raise NoVerdict(f"lib/{missing}.py is missing from the bundle ({first_line(exc)}); {AGAIN}") from None
        except Exception as exc:  # a damaged copy: SyntaxError, or an error while it loads
            raise NoVerdict(f"lib/{JUDGING}/{name} is damaged ({first_line(exc)}); {AGAIN}") from None
    return modules


def read_npz(np, name: str) -> dict:
    """The arrays of ``name`` in the bundle (no pickle); NoVerdict when it is missing, damaged or
    declares more than ``NPZ_BYTES`` uncompressed."""
    path = HERE / name
    if not path.is_file():
        raise NoVerdict(f"{name} is missing from the bundle; {AGAIN}")
    try:
        with zipfile.ZipFile(path) as archive:
            declared = sum(info.file_size for info in archive.infolist())
        if declared > NPZ_BYTES:
            raise NoVerdict(f"{name} declares {declared} bytes uncompressed, more than a bundle's {NPZ_BYTES}; {AGAIN}")
        with np.load(path, allow_pickle=False) as data:
            return {key: data[key] for key in data.files}
    except NoVerdict:
        raise
    except Exception as exc:  # zipfile.BadZipFile, EOFError, ValueError, OSError...: not an intact NPZ
        raise NoVerdict(f"{name} is damaged (truncated or altered?): {first_line(exc)}; {AGAIN}") from None


def run_model(ort, check: dict, provider: "str | None", feeds: dict) -> "dict | str":
    """The model's outputs by name on ``provider`` (default the run's), as the run built its session; the
    failure's words when the EP refuses or raises (a reproduced failure); NoVerdict when this
    onnxruntime lacks the EP, cannot read the model, or the EP declines the model's nodes."""
    provider = provider or check["provider"]
    options = check["provider_options"] if provider == check["provider"] else {}
    if provider not in ort.get_available_providers():
        raise NoVerdict(f"this onnxruntime ({ort.__version__}) has no {provider} (it has "
                        f"{', '.join(ort.get_available_providers())}); {install_hint(check)}, or judge on "
                        "another: python repro.py CPUExecutionProvider")
    so = ort.SessionOptions()
    so.log_severity_level = 3  # errors only: the verdict is the output
    so.graph_optimization_level = ort.GraphOptimizationLevel.ORT_DISABLE_ALL  # keep the node as built
    if provider != "CPUExecutionProvider":  # fail rather than quietly run the node on the CPU
        so.add_session_config_entry("session.disable_cpu_ep_fallback", "1")
    if provider == "DmlExecutionProvider":  # one kernel event per node, as the run had it
        so.add_session_config_entry("ep.dml.disable_graph_fusion", "1")
    try:
        session = ort.InferenceSession(str(HERE / "model.onnx"), so, providers=[(provider, options)])
    except Exception as exc:
        text = f"{type(exc).__name__}: {exc}"
        if any(marker in text for marker in UNREADABLE_MODEL):
            fix = AGAIN if ort.__version__ == run_onnxruntime(check)[1] else install_hint(check)
            raise NoVerdict(f"onnxruntime {ort.__version__} cannot read model.onnx ({first_line(exc)}); {fix}") from None
        if FALLBACK_REFUSED in text:
            raise NoVerdict(f"{provider} declines node(s) of the model with CPU fallback disabled, so nothing "
                            f"of the case runs on it to judge (the run calls this not-on-ep): {first_line(exc)}") from None
        return f"{provider} could not build the session: {first_line(exc)}"
    missing = [i.name for i in session.get_inputs() if i.name not in feeds]
    if missing:
        raise NoVerdict(f"inputs.npz lacks the model's input(s) {', '.join(missing)}; {AGAIN}")
    names = [o.name for o in session.get_outputs()]
    try:
        return dict(zip(names, session.run(names, feeds)))
    except Exception as exc:
        return f"{provider} raised while running: {first_line(exc)}"


def run_onnxruntime(check: dict) -> tuple:
    """(distribution, version) of the onnxruntime the run used ("" for what check.json lacks)."""
    made = check.get("run_onnxruntime")
    made = made if isinstance(made, dict) else {}
    return str(made.get("distribution") or "onnxruntime"), str(made.get("version") or "")


def install_hint(check: dict) -> str:
    """Which onnxruntime the run used, as an instruction."""
    return f"install the onnxruntime the run used: python -m pip install {requirement(check)}"


def requirement(check: dict) -> str:
    """pip's name for the onnxruntime the run used (``onnxruntime-directml==1.24.4``)."""
    wheel, version = run_onnxruntime(check)
    return f"{wheel}=={version}" if version else wheel


def judge(np, judging: dict, check: dict, feeds: dict, expected: dict, outputs: dict) -> int:
    """Compare the outputs with the expected ones under the run's tolerances, print the verdict
    and the run's, and return 0 (pass, tie-only) or 1 (fail)."""
    actual = {}
    for name, value in outputs.items():  # back to DML names and types, as the run read them
        dml = check["outputs"].get(name, name)
        e, a = expected.get(dml), np.asarray(value)
        actual[dml] = a if e is None else a.astype(e.dtype).reshape(e.shape) if a.size == e.size else a
    compare = judging["compare"]
    has_allowance = (HERE / "allowance.npz").is_file()  # the reference's bounds, when the run had any
    allowance = compare.Allowance.from_arrays(read_npz(np, "allowance.npz")) if has_allowance else None
    try:
        tolerances = judging["tolerances"].Tolerances.from_json(check["tolerances"])
    except ValueError as exc:
        raise NoVerdict(f"check.json is damaged: its tolerances are not a tolerance table ({exc}); {AGAIN}") from None
    lacking = sorted(set(check["inputs"].values()) - set(feeds))
    if lacking:
        raise NoVerdict(f"inputs.npz lacks {', '.join(lacking)}, which the index outputs point into; {AGAIN}")
    sources = {dml: feeds[onnx] for dml, onnx in check["inputs"].items()}
    result = compare.compare_outputs(expected, actual, tolerances, sources, in_window=window_rule(judging, check),
                                     index_outputs={k: tuple(v) for k, v in check["index_outputs"].items()},
                                     allowance=allowance)
    verdict = "fail" if not result.passed else "tie-only" if result.ties else "pass"
    print(f"{verdict}: {result.summary()}{allowance.note(result) if allowance else ''}")
    print(f"the run said {check['run_outcome']} on {check['provider']} (onnxruntime "
          f"{run_onnxruntime(check)[1] or '?'}): {check['run_message']}")
    return PASSED if result.passed else FAILED


def window_rule(judging: dict, check: dict):
    """The operator's window rule for its desc (an index pointing at an equal value outside the
    output's window is no tie), or None when the operator has none."""
    if not check["window_rule"]:
        return None
    reference = judging["reference"]
    try:
        desc = reference.desc_from_dml(read_json("desc.json"))
    except (ValueError, TypeError, KeyError, AttributeError) as exc:  # DescError is a ValueError
        raise NoVerdict(f"desc.json is damaged: not a desc the reference reads ({first_line(exc)}); {AGAIN}") from None
    return functools.partial(reference.spec_for(desc).index_rule, desc)


def read_json(name: str):
    """A JSON file of the bundle; NoVerdict when it is missing or damaged."""
    try:
        return json.loads((HERE / name).read_bytes().decode("utf-8"), parse_constant=refuse_constant)
    except OSError:
        raise NoVerdict(f"{name} is missing from the bundle; {AGAIN}") from None
    except (ValueError, RecursionError) as exc:
        raise NoVerdict(f"{name} is damaged (truncated or altered?): not JSON ({exc}); {AGAIN}") from None


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
