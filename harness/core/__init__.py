"""The foundation: what every other room may import, importing nothing of the harness above it.

The results schema (``results``), the one reader of untrusted files and its caps
(``untrusted_files``), terminal-safe printing (``terminal``), the tolerance rule (``tolerances``)
and the one comparison (``compare``, ``error_stats``), expectations (``expectations``), the
options a rerun line repeats (``rerun``), the installed ONNX Runtime (``installed``), whether a
recorded process still runs (``processes``), and the records the reports read besides results
(``shrink_records``, ``model_statuses``).
"""
