"""The harness: run cases and whole models on an execution provider, prove where they ran, judge, lose nothing.

Rooms, each importing only the rooms below it (``DESIGN.md``, "Packages"; ``tests/test_boundaries.py``
checks every arrow):

- ``cli`` and ``pytest_plugin``: the front ends (``ep-testbed`` with one module per subcommand,
  listed once in ``cli.SUBCOMMANDS``; ``cli.options`` defines and parses every shared flag once,
  the plugin included);
- ``models`` (whole models on an EP against a reference EP) and ``fuzz`` (drawing, shrinking, the
  corpus): the work, built on the run machinery, never on each other;
- ``run``: the run machinery: one case in process (``case_run``), worker processes and the pool
  that survives crashes and hangs, a run streamed to ``results.jsonl`` (``runner``), run-folder
  ownership, selection and sharding, merge, progress, the summary and exit code, case folders;
- ``eps``: the EP adapters: EP names and session options (``providers``), the one session layer
  (``session``), placement read back (``placement``), device identity (``gpu``), the checks
  ``doctor`` prints (``preflight``), DirectML specifics (``dml_ep``);
- ``core``: the foundation everything may import and that imports nothing above it: the results
  schema, the reader of untrusted files and its caps, terminal-safe printing, the tolerance rule
  and the comparison, error statistics, expectations, the rerun options, the installed runtime,
  the shrink records and model statuses the reports read.

``reports`` (a sibling folder) sits above ``core`` and below ``models``, ``fuzz`` and the front
ends. The harness never knows a DML formula: expected outputs come from ``reference`` and ONNX
models from ``graphs``.
"""

if __name__ == "harness":  # imported by its folder name from the repository root, not as installed
    raise ImportError("ep-testbed's modules are imported as ep_testbed.harness (e.g. `from ep_testbed.harness.cli import main`): "
                      "`import harness` would load a second copy whose classes differ from the installed ones. "
                      "Install the project (`python -m pip install -e .`) and import ep_testbed.harness.")
