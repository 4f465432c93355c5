"""``ep-testbed fuzz``: find what a fixed catalog misses, and shrink every failure to a small repro.

One module per job:

- ``draw``: fuzzed cases from the operators' Hypothesis strategies, in seeded batches; a case id
  (``max_pooling2/fuzz-s7-b12-034``) regenerates its case (``replay``).
- ``engine``: the time-boxed loop: batches through the worker pool, the same per-case pipeline
  as ``ep-testbed run`` (mapper, reference, isolated session, placement proof, tolerances,
  expectations), the same ``results.jsonl``; then every new failure shrunk.
- ``signature``: what "fails the same way" means (outcome, failing outputs, diverging fields).
- ``shrink``: Hypothesis's shrinker on the failing draw, then the input values simplified;
  every step runs on the EP in a worker.
- ``corpus``: minimal failures as case folders; ``ep-testbed run --corpus DIR`` runs them.

``shrinks.jsonl`` (the original -> minimal record the report shows side by side) is
``harness.core.shrink_records``. Hypothesis (the ``fuzz`` extra) is imported only when drawing or
shrinking.
"""
