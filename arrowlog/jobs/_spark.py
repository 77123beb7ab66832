"""The Spark sessions the jobs run on: a local one (its workers run this very
Python), or the one ``spark-submit`` configured."""

from __future__ import annotations

import contextlib
import os
import sys
from typing import Any


def local_session(app: str, *, cores: int = 2) -> Any:
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    os.environ.setdefault("PYSPARK_DRIVER_PYTHON", sys.executable)
    os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1")
    from pyspark.sql import SparkSession

    builder = (
        SparkSession.builder.master(f"local[{cores}]")
        .appName(app)
        .config("spark.ui.enabled", "false")
        .config("spark.driver.bindAddress", "127.0.0.1")
        .config("spark.sql.shuffle.partitions", str(cores))
        # Reads work without it; with it, filters on partition, offset and
        # timestamp narrow the plan (fewer segments fetched).
        .config("spark.sql.python.filterPushdown.enabled", "true")
    )
    from arrowlog.errors import MissingDependencyError
    from arrowlog.spark.jvm import configure

    # the JVM reader where make setup built it; else every read is the Python source's
    with contextlib.suppress(MissingDependencyError):
        builder = configure(builder)
    spark = builder.getOrCreate()
    spark.sparkContext.setLogLevel("ERROR")
    return spark


def submitted_session(app: str) -> Any:
    """The session ``spark-submit`` configured: its master, jars and settings
    as its command line gave them, none of the job's own set over them (the
    JVM reader is used where ``--jars`` names its jar, the Python source
    otherwise), and its name: spark-submit's ``--name`` (by default the
    script's file name), not ``app``."""
    del app  # named by spark-submit
    from pyspark.sql import SparkSession

    return SparkSession.builder.getOrCreate()
