"""Whole-model regression: a model on the EP under test and on a reference EP, placement per
node, per-node attribution through ``graphs.import_node`` + the reference, baselines, and
checks on model files nobody vouched for. Sessions go through ``harness.eps.session`` and outputs
through ``harness.core.compare``, as case runs do.

One module per job:

- ``untrusted``: a model file checked before anything loads it (external data stays in its folder);
- ``inputs``: the model's input specs, ``--shape``, seeded range-aware inputs, ``.npz`` inputs;
- ``outputs``: graph outputs compared by name, index outputs tie-aware (operator records);
- ``attribution``: which nodes are judged (and which, inside Loop/If bodies, cannot be), the probe
  copy, one row per node of an attributed op type (``graphs.attributed_op_types()``), the first
  divergent node;
- ``judge``: the verdict on one node (empty nodes, differences a flag explains or predicts);
- ``drift``: where output drift against the reference EP starts (intermediates marked in windows
  of consecutive nodes, each run cut after its window, compared up to the first divergent node)
  and the drift policy (``--drift-tol``);
- ``run``: ``run_model``, the result of one model run (``model_result.json``);
- ``baseline``: saved outputs and manifest, and the check against them;
- ``isolation``: child processes with a time limit, and the fault-injection test hook.

The node statuses live in ``harness.core.model_statuses`` (the reports read them); what
``model run`` / ``model demo`` do as commands lives in ``harness.cli.model_command``.
"""
