"""The jobs users run: ``backfill`` (a restartable bulk load with expected
offsets), ``export_delta`` and ``export_iceberg`` (committed ranges into a
table, exactly once) and ``demo`` (the main pipeline). Each is a library
function, a command (``arrowlog load``, ``export-delta``, ``export-iceberg``),
``python -m arrowlog.jobs.<job>``, and ``spark-submit spark_jobs/<job>.py``.

Every command runs in one frame, :mod:`arrowlog.jobs.commandline`
(connection options, one line per error with its exit code, progress): the
``arrowlog`` command (:mod:`arrowlog.cli`) composes the jobs' commands with
its own, and the jobs never import it."""
