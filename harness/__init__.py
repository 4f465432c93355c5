"""The harness: run catalog cases on an execution provider, prove where they ran, compare, lose nothing.

One module per job:

- ``providers``: ``--ep`` aliases, provider options, the session options of a conformance
  session (graph optimizations off, CPU fallback disabled, DirectML graph fusion off), and the
  installed ONNX Runtime flavour/version and machine for the run header;
- ``gpu``: the GPU identity every run header records (DXGI adapters through ctypes on Windows,
  the registry's driver entries, DirectML.dll's version, the OpenVINO device, or none);
- ``preflight``: the checks ``ep-testbed doctor`` prints and ``ep-testbed run`` makes first;
- ``dml_ep``: what ORT's DirectML EP will do with a model, predicted from its source (the
  predictor of ``harness/expectations/dml.json``);
- ``winjob``: Windows Job objects, so worker processes die with the run;
- ``placement``: node -> provider read back from ONNX Runtime (profiling trace, graph
  assignment info, the single-partition rule; what proved each node), and the
  fallback-refusal error that means ``not-on-ep``;
- ``session``: the one way case runs and model runs build, run and place a session on an EP;
- ``tolerances`` (the one rule and its per-dtype defaults) and ``compare`` (NaN/Inf-aware,
  ULP, tie-aware indices, worst elements); ``error_stats`` (the error distribution of a case
  and the smallest tolerance that would pass it, per element share of the tolerance);
- ``expectations``: known divergences per EP, as data in ``harness/expectations/<alias>.json``;
- ``case_run`` (one case, in-process), ``worker`` (a worker process and the fault-injection
  test hook), ``pool`` (workers that survive crashes and hangs), ``runner`` (a run streamed to
  results.jsonl, resume, Ctrl-C), ``results`` (the file format), ``artifacts`` (case folders);
- ``selection`` (``-k``, ``--shard``), ``merge``, ``progress``, ``summary`` (table, exit code),
  ``rerun`` (the outcome-changing options a report's rerun line repeats);
- ``untrusted_files`` (the one reader of every file a command is given: caps, strict parsing,
  containment, link-safe writes), ``run_folder`` (one run owns a folder; nothing overwritten
  silently), ``terminal`` (names and messages from files printed without control characters);
- ``cli`` (the ``ep-testbed`` command line: a package, one module per subcommand, listed in
  ``cli.SUBCOMMANDS``), ``options`` (the EP, tolerance and expectations flags it shares with
  ``pytest_plugin``, the catalog as a pytest suite, and the model commands);
- whole models: the ``models`` subpackage (a model on the EP under test and a reference EP,
  placement per node, per-node attribution through ``graphs.from_onnx`` + the reference,
  inputs, baselines, untrusted model files, ``ep-testbed model run`` / ``model demo``; its
  ``__init__`` lists its modules).

The harness never knows a DML formula: expected outputs come from ``reference.execute`` and
ONNX models from ``graphs.to_onnx``.
"""
