"""The run machinery: cases through isolated workers into a run folder, nothing lost or duplicated.

One case in process (``case_run``), a worker process (``worker``) and the pool that survives its
crashes and hangs (``pool``, ``winjob`` on Windows), a run streamed to ``results.jsonl`` with
resume and Ctrl-C (``runner``), one run per folder (``run_folder``), ``-k`` and ``--shard``
(``selection``), shards joined (``merge``), progress lines (``progress``), the summary table and
exit code (``summary``), case folders (``artifacts``).
"""
