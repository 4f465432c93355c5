import functools
import warnings


@functools.lru_cache(maxsize=1)
def onnx_backend_cases():
    """ONNX's own backend node test cases (shipped in the onnx package), collected once."""
    from onnx.backend.test.case.node import collect_testcases

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return {c.name: c for c in collect_testcases(None)}
