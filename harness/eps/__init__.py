"""Execution providers reached outside the installed ``onnxruntime`` module (``dml_wine``: the
real DirectML EP, run under Wine in a Windows host process)."""
