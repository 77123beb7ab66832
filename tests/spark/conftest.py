"""One local Spark session for every Spark test (starting one costs seconds),
configured as a user's would be: Spark's defaults, nothing arrowlog-specific
(no filter pushdown flag, no registration), started from a directory outside the
repository, so that the format must be found the way an installed arrowlog
offers it."""

from __future__ import annotations

import os
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from arrowlog.spark.options import spark_storage_options
from tests.conftest import StoreSpec

PUSHDOWN_FLAG = "spark.sql.python.filterPushdown.enabled"

os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
os.environ.setdefault("PYSPARK_DRIVER_PYTHON", sys.executable)
os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1")

#: the session's master: ``make test-spark-cluster`` runs the read tests with
#: ``local-cluster[2,1,1024]`` (executors in JVMs and Python workers of their own,
#: so that nothing read depends on the driver's process, files or credentials)
MASTER = os.environ.get("ARROWLOG_SPARK_MASTER", "local[2, 3]")  # 3 attempts per task


def absolute_pythonpath() -> None:
    """Spark's Python workers start in the JVM's directory: a relative entry of
    PYTHONPATH (``PYTHONPATH=.`` in a worktree) must not change meaning there."""
    entries = os.environ.get("PYTHONPATH")
    if entries:
        os.environ["PYTHONPATH"] = os.pathsep.join(
            str(Path(e).resolve()) for e in entries.split(os.pathsep) if e
        )


@pytest.fixture(scope="session")
def spark(tmp_path_factory: pytest.TempPathFactory) -> Iterator[object]:
    from pyspark.sql import SparkSession

    absolute_pythonpath()
    here = os.getcwd()
    # The JVM, and every Python worker it starts, keep the directory it starts in.
    os.chdir(tmp_path_factory.mktemp("spark-cwd"))
    try:
        builder = (
            SparkSession.builder.master(MASTER)
            .appName("arrowlog-tests")
            # test hygiene only: no web UI port, two shuffle partitions on two cores
            .config("spark.ui.enabled", "false")
            .config("spark.sql.shuffle.partitions", "2")
        )
        if not os.environ.get("ARROWLOG_SPARK_MIN"):
            # the JVM reader, as the README's Spark section starts a session (the
            # jar is built for the pyspark of `make setup`; make test-spark-min
            # runs another, through the Python source alone)
            import arrowlog.spark

            builder = arrowlog.spark.configure(builder)
        session = builder.getOrCreate()
    finally:
        os.chdir(here)
    session.sparkContext.setLogLevel("ERROR")
    yield session
    session.stop()


@pytest.fixture
def pushdown(spark: Any) -> Iterator[None]:
    """Filter pushdown on for one test (Spark's default is off)."""
    spark.conf.set(PUSHDOWN_FLAG, "true")
    yield
    spark.conf.unset(PUSHDOWN_FLAG)


#: the readers of a batch read (option ``reader``): tests marked with
#: ``both_readers`` run once with each, and must see the same rows
READERS = ("jvm", "python") if not os.environ.get("ARROWLOG_SPARK_MIN") else ("python",)
_reader: list[str] = []


@pytest.fixture(params=READERS)
def both_readers(request: pytest.FixtureRequest) -> Iterator[str]:
    """Batch reads through :func:`with_options` use this reader."""
    _reader.append(request.param)
    yield request.param
    _reader.pop()


def with_options(builder: Any, spec: StoreSpec, options: dict[str, str]) -> Any:
    """A DataFrameReader or DataFrameWriter pointed at ``spec``'s store (its storage
    options as ``storage.*`` options) with ``options`` set (and a batch read's
    ``reader``, under :func:`both_readers`)."""
    from pyspark.sql import DataFrameReader

    if _reader and isinstance(builder, DataFrameReader) and "reader" not in options:
        options = {"reader": _reader[-1], **options}
    builder = builder.option("path", spec.url)
    for key, value in spark_storage_options(spec.options).items():
        builder = builder.option(key, value)
    for key, value in options.items():
        builder = builder.option(key, value)
    return builder
