"""``arrowlog.spark.register(spark)`` given something other than a running
session says what it takes, in arrowlog's own error (no session is started)."""

from __future__ import annotations

from typing import Any

import pytest
from pyspark.sql import SparkSession

import arrowlog.spark
from arrowlog.errors import InvalidConfigError


@pytest.mark.parametrize("given", [None, SparkSession.builder], ids=["None", "builder"])
def test_register_given_no_session_says_it_takes_a_running_one(given: Any) -> None:
    with pytest.raises(InvalidConfigError) as raised:
        arrowlog.spark.register(given)
    message = str(raised.value)
    assert "register() takes a running SparkSession" in message
    assert "arrowlog.spark.configure(builder)" in message
