"""One local Spark session for every Spark test (starting one costs seconds),
configured as a user's would be: Spark's defaults, nothing arrowlog-specific
(no filter pushdown flag, no registration), started from a directory outside the
repository, so that the format must be found the way an installed arrowlog
offers it. The helpers the tests call are in :mod:`tests.support.spark`."""

from __future__ import annotations

import os
import sys
from collections.abc import Iterator
from contextlib import nullcontext
from typing import Any

import pytest

from tests.support.spark import (
    MASTER,
    READERS,
    absolute_pythonpath,
    python_pushdown,
    reading_through,
)

os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
os.environ.setdefault("PYSPARK_DRIVER_PYTHON", sys.executable)
os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1")


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
    with python_pushdown(spark):
        yield


@pytest.fixture(params=READERS)
def every_reader(request: pytest.FixtureRequest, spark: Any) -> Iterator[str]:
    """Batch reads through :func:`with_options` use this reader. Spark reads the
    pushdown flag when it plans a query, so setting it on the shared session
    for one test turns pushdown on for that test's queries (the tests that
    count planned tasks see it)."""
    pushed = request.param == "python-pushdown"
    with reading_through(request.param), python_pushdown(spark) if pushed else nullcontext():
        yield request.param
