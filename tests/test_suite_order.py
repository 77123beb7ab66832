"""``make test``'s scheduling (tests/support/suite_order.py): the Spark tests
are one unit, and the units go out longest first."""

from __future__ import annotations

import pytest

from tests.support.suite_order import LONG_FILES, SPARK_UNIT, _LongestFirst, unit_of


def test_every_spark_test_is_one_unit_and_every_other_file_its_own() -> None:
    assert unit_of("tests/spark/test_spark_read.py::test_x[jvm-s3]") == SPARK_UNIT
    assert unit_of("tests/spark/sub/test_y.py::T::test_z") == SPARK_UNIT
    assert unit_of("tests/sparkle/test_a.py::test_b") == "tests/sparkle/test_a.py"
    assert unit_of("tests/log/test_log.py::Test::test_c") == "tests/log/test_log.py"


def test_units_go_out_spark_first_then_the_long_files_then_the_most_tests_first() -> None:
    queue = _LongestFirst()
    queue["tests/small.py"] = dict.fromkeys(["a"], False)
    queue["tests/big.py"] = dict.fromkeys(["a", "b", "c"], False)
    queue[LONG_FILES[1]] = dict.fromkeys(["a"], False)
    queue[LONG_FILES[0]] = dict.fromkeys(["a"], False)
    queue[SPARK_UNIT] = dict.fromkeys(["a"], False)
    order = [queue.popitem(last=False)[0] for _ in range(5)]
    assert order == [SPARK_UNIT, LONG_FILES[0], LONG_FILES[1], "tests/big.py", "tests/small.py"]
    with pytest.raises(KeyError):
        queue.popitem(last=False)  # as a dict's
