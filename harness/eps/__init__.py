"""EP adapters: how the testbed holds an execution provider.

EP names and the conformance session options (``providers``), one adapter per way of holding an
EP (``adapters``: built into the onnxruntime wheel, or a plugin library, ``plugins``), ONNX
Runtime's device list and ``--ep-device`` (``devices``), the one session layer case runs
and model runs share (``session``), where each node ran read back from ONNX Runtime
(``placement``), the device a run header names (``gpu``), the checks ``doctor`` prints and
``run`` makes first (``preflight``), and what ORT's DirectML EP does with a model, read from its
source (``dml_ep``), and likewise the WebGPU EP (``webgpu_ep``); the real DirectML EP run under Wine in a Windows host process, on Linux
(``dml_wine``); which of the three Windows ways to hold an EP (the onnxruntime-directml wheel,
Windows ML and its EP catalog, plugin packages) this environment has (``windows_ways``, the
catalog read in a child process by ``winml_catalog``).
"""
