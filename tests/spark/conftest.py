"""One local Spark session for every Spark test (starting one costs seconds)."""

from __future__ import annotations

import os
import sys
from collections.abc import Iterator
from typing import Any

import pytest

from tests.conftest import StoreSpec

os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
os.environ.setdefault("PYSPARK_DRIVER_PYTHON", sys.executable)
os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1")


@pytest.fixture(scope="session")
def spark() -> Iterator[object]:
    from pyspark.sql import SparkSession

    session = (
        SparkSession.builder.master("local[2, 3]")  # 3 attempts per task
        .appName("arrowlog-tests")
        .config("spark.ui.enabled", "false")
        .config("spark.sql.shuffle.partitions", "2")
        .config("spark.driver.bindAddress", "127.0.0.1")
        .config("spark.sql.python.filterPushdown.enabled", "true")
        .config("spark.python.worker.reuse", "true")
        .getOrCreate()
    )
    session.sparkContext.setLogLevel("ERROR")
    yield session
    session.stop()


def with_options(builder: Any, spec: StoreSpec, options: dict[str, str]) -> Any:
    """A DataFrameReader or DataFrameWriter pointed at ``spec``'s store (its storage
    options as ``storage.*`` options) with ``options`` set."""
    builder = builder.option("path", spec.url)
    for key, value in spec.options.items():
        if key == "client_kwargs":
            builder = builder.option("storage.region_name", value["region_name"])
        else:
            builder = builder.option(f"storage.{key}", str(value))
    for key, value in options.items():
        builder = builder.option(key, value)
    return builder
