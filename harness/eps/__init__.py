"""The EP room: what the testbed knows of each execution provider, and how it holds one.

One record per EP (``registry``: aliases, provider name, packages, adapter class, defaults,
classes, predictor, device-loss words, identity and preflight hooks, doctor and devices hints;
nothing outside this room branches on an EP's name), the spec every process shares and the
conformance session options (``spec``, re-exported with the EP names by ``providers``), one
adapter class per way of holding an EP (``holders``, chosen by ``adapters``: built into the
onnxruntime wheel, a plugin library, ``plugins``, or an EP's own), ONNX Runtime's device list and
``--ep-device`` (``devices``), the one session layer case runs and model runs share
(``session``), where each node ran read back from ONNX Runtime (``placement``), the device a run
header names (``gpu``; read by ``dxgi``, ``nvidia``, ``device_record``), the checks ``doctor``
prints and ``run`` makes first (``preflight``), the errors that say a device is lost
(``device_loss``), and what ORT's DirectML EP does with a model, read from its source
(``dml_ep``), and likewise the WebGPU EP (``webgpu_ep``); the real DirectML EP run under Wine in a
Windows host process, on Linux (``dml_wine``, started before the project imports by
``early_start``); which of the three Windows ways to hold an EP (the onnxruntime-directml wheel,
Windows ML and its EP catalog, plugin packages) this environment has (``windows_ways``, the
catalog read in a child process by ``winml_catalog``).
"""
