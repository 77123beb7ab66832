"""arrowlog as a Spark data source: ``spark.read.format("arrowlog")``,
``df.write.format("arrowlog")``, and Structured Streaming in both directions.

The source registers itself: the package installs the top-level module
``pyspark_arrowlog``, which Spark's Python data source lookup
(``pkgutil.iter_modules`` in a Python worker) finds in a normal install and in an
editable one (``pip install -e .``). :func:`register` does it by hand where that
lookup cannot see the package.
"""

from __future__ import annotations

import logging
import os
import subprocess
import sys
from typing import TYPE_CHECKING, Any

from arrowlog._extras import require_extra
from arrowlog.errors import InvalidConfigError, MissingDependencyError

pyspark, _ = require_extra("spark")  # before pyspark is imported: say which extra is missing

from arrowlog.spark.versions import require_pyspark  # noqa: E402

# before the source is imported: an older pyspark fails there on a missing name
require_pyspark(pyspark.__version__)

from arrowlog.spark.jvm import configure  # noqa: E402
from arrowlog.spark.source import ArrowLogDataSource  # noqa: E402

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

__all__ = ["ArrowLogDataSource", "configure", "register"]


log = logging.getLogger(__name__)


def register(spark: SparkSession) -> None:
    """Register the ``arrowlog`` format with ``spark`` (for this session; the
    class is pickled to the workers, which need arrowlog importable).

    In a local session whose workers would run an interpreter that cannot
    import arrowlog (Spark's default, ``python3`` on the PATH, when a
    virtualenv's python was run by its path), the session's Python workers
    run this interpreter instead, with a warning saying so. On a cluster one
    task asks an executor's worker whether it finds arrowlog.

    Raises:
        InvalidConfigError: ``spark`` is not a session (a builder: call
            ``getOrCreate()`` first; or None).
        MissingDependencyError: a cluster's executors cannot import arrowlog
            (the message names ``spark.pyspark.python``).
    """
    if getattr(spark, "dataSource", None) is None:  # classic and Spark Connect sessions have it
        raise InvalidConfigError(
            f"register() takes a running SparkSession (SparkSession.builder...getOrCreate()), "
            f"not a {type(spark).__name__}: to add the JVM reader to a session being built, "
            "use arrowlog.spark.configure(builder)"
        )
    context = _classic_context(spark)
    master = "" if context is None else str(context.master)
    if master == "local" or master.startswith("local["):  # executors in this process
        worker = str(context.pythonExec)
        if not _imports_arrowlog(worker):
            log.warning(
                "Spark's Python workers would run %s, which cannot import arrowlog: this "
                "session's run %s (set spark.pyspark.python or PYSPARK_PYTHON to choose)",
                worker,
                sys.executable,
            )
            context.pythonExec = sys.executable
    elif context is not None and not _executors_import_arrowlog(context):
        raise MissingDependencyError(
            f"Spark's executors run {context.pythonExec}, which cannot import arrowlog: "
            "install arrowlog there, or name an interpreter that has it in "
            "spark.pyspark.python (the JVM reader and writer need no Python on executors)",
            name="arrowlog",
        )
    spark.dataSource.register(ArrowLogDataSource)


def _classic_context(spark: SparkSession) -> Any:
    """The session's SparkContext; None for a Spark Connect session (no
    workers of its own on this machine)."""
    try:
        return spark.sparkContext
    except Exception:  # noqa: BLE001 - Spark Connect raises its own kinds
        return None


def _executors_import_arrowlog(context: Any) -> bool:
    """Whether an executor's Python worker finds the arrowlog package: one
    task of one row (the function is shipped by value; it imports nothing of
    arrowlog's)."""

    def finds(_: object) -> bool:
        import importlib.util

        return importlib.util.find_spec("arrowlog") is not None

    return bool(context.parallelize([0], 1).map(finds).first())


def _imports_arrowlog(python: str) -> bool:
    """Whether the interpreter ``python`` (a path or a name on the PATH) finds
    the arrowlog package (without importing it: a few milliseconds)."""
    # not resolved: a virtualenv's python is a link to the base interpreter,
    # and the link's path is what decides its packages
    if os.path.abspath(python) == os.path.abspath(sys.executable):
        return True
    probe = "import importlib.util as u, sys; sys.exit(u.find_spec('arrowlog') is None)"
    try:
        done = subprocess.run([python, "-c", probe], capture_output=True, timeout=60)
    except (OSError, subprocess.TimeoutExpired):
        return False
    return done.returncode == 0
