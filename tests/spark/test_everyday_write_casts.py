"""A fourth attack on the Spark write path (arrowlog/spark/conform.py: ``conform``,
``cast_column``, ``_changed``, ``_value_change``), after it learned to refuse casts that
change values: does it now refuse or mangle writes a Spark user makes every day,
and which value changes does it still let through?

Fixed since, and tests that hold: an instant into a naive timestamp keeps its
wall clock in the session's time zone, a double into a decimal is the number
it prints as (``0.1``, not ``0.100000000000000006``), a timestamp or a date into
an integer (a raw count of microseconds or days) and a double too small for a
float (0.0) are refused; a naive timestamp or a date into an instant is that
wall clock (the date's midnight) in the session's time zone, not UTC's (the
batches Spark hands a Python writer do not carry the zone: a task reads the
session's setting), and an empty ``array()`` literal is written as empty
lists instead of failing the writer with an untyped ``ValueError`` (in
pyspark's schema conversion). The other tests document what held; the
neighbours Spark's CAST defines are pinned against Spark's own CAST in
tests/spark/test_spark_write.py.

Most checks call ``cast_column`` on the Arrow arrays Spark hands a writer (checked
against Spark 4: ``timestamp[us, tz=<session time zone>]``, ``Etc/UTC`` for
UTC; ``decimal128(38, 18)`` for Python decimals; ``list<element: ...>``); the
ones where Spark's own types and time zone matter go through a real session.

Origin: the fourth attack on the Spark sink (was tests/spark/test_sink_attack4.py)."""

from __future__ import annotations

import datetime as dt
import decimal
import math
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pyarrow as pa
import pytest

import arrowlog
from tests.support.stores import StoreSpec

pytest.importorskip("pyspark")

from tests.support.spark_write import cast

MAP_TYPE: Any = pa.map_  # the stubs take no field as the item


@pytest.fixture
def log(tmp_path: Path) -> arrowlog.ArrowLog:
    return arrowlog.connect(str(tmp_path / "log"), {"fsync": False})


def instant(utc: dt.datetime, zone: str = "Etc/UTC") -> pa.Array[Any]:
    """A Spark TimestampType value (``utc``, naive) as a task sees it, in the
    session's zone."""
    when = utc.replace(tzinfo=dt.timezone.utc)
    return pa.array([when], pa.timestamp("us", tz=zone))


# --- direct casts: what held ---------------------------------------------------


def test_special_doubles_into_float32_and_back(log: arrowlog.ArrowLog) -> None:
    """NaN stays NaN, infinities stay infinite, -0.0 keeps its sign, nulls stay
    null; float32 NaN and infinity widen to float64 as they are."""
    doubles = pa.array([math.nan, math.inf, -math.inf, -0.0, None, 1.5])
    out: list[Any] = cast(log, doubles, pa.float32()).to_pylist()
    assert math.isnan(out[0]) and out[1:3] == [math.inf, -math.inf]
    assert out[3] == 0.0 and math.copysign(1.0, out[3]) == -1.0
    assert out[4:] == [None, 1.5]
    wide: list[Any] = cast(
        log, pa.array([math.nan, -math.inf], pa.float32()), pa.float64()
    ).to_pylist()
    assert math.isnan(wide[0]) and wide[1] == -math.inf
    with pytest.raises(arrowlog.SchemaMismatchError, match="out of range"):
        cast(log, pa.array([math.inf, 1e39]), pa.float32())  # one inf was there, one is new


def test_integers_and_decimals_that_fit_are_written(log: arrowlog.ArrowLog) -> None:
    """Spark's decimal(38,18) (a Python Decimal) into decimal(10,2) with its
    trailing zeros, decimal(10,0) into int64, LongType into int32, doubles 0/1
    into booleans; what does not fit is refused."""
    d = decimal.Decimal
    spark_decimals = pa.array([d("1.500000000000000000"), d("-0.1"), None], pa.decimal128(38, 18))
    assert cast(log, spark_decimals, pa.decimal128(10, 2)).to_pylist() == [
        d("1.50"),
        d("-0.10"),
        None,
    ]
    whole = pa.array([d("12"), d("-7")], pa.decimal128(10, 0))
    assert cast(log, whole, pa.int64()).to_pylist() == [12, -7]
    assert cast(log, pa.array([2**31 - 1, None]), pa.int32()).to_pylist() == [2**31 - 1, None]
    assert cast(log, pa.array([1.0, 0.0, -0.0]), pa.bool_()).to_pylist() == [True, False, False]
    refused: list[tuple[Any, Any]] = [
        (pa.array([d("1.5")], pa.decimal128(38, 18)), pa.int64()),
        (pa.array([2**31]), pa.int32()),
        (pa.array([2**53 + 1]), pa.float64()),
        (pa.array([math.nan]), pa.int64()),
        (pa.array([math.nan]), pa.bool_()),
        (pa.array([math.nan]), pa.decimal128(10, 2)),
        (pa.array([123.456]), pa.decimal128(10, 2)),
    ]
    for column, kind in refused:
        with pytest.raises(arrowlog.SchemaMismatchError):
            cast(log, column, kind)


def test_timestamps_far_from_1970_keep_their_instant_and_date(log: arrowlog.ArrowLog) -> None:
    """Before 1970 a millisecond topic takes whole milliseconds and refuses a
    fraction; a New York midnight of 1800 (local mean time, -4:56:02) is that
    date; year 1 and 9999 dates reach millisecond timestamps."""
    pre = pa.array([-1000, -1_000_000_000_000], pa.timestamp("us", tz="Etc/UTC"))
    ms = cast(log, pre, pa.timestamp("ms", tz="UTC")).cast(pa.int64()).to_pylist()
    assert ms == [-1, -1_000_000_000]
    with pytest.raises(arrowlog.SchemaMismatchError):
        cast(log, pa.array([-1], pa.timestamp("us", tz="Etc/UTC")), pa.timestamp("ms", tz="UTC"))
    midnight = instant(dt.datetime(1800, 3, 1, 4, 56, 2), zone="America/New_York")
    assert cast(log, midnight, pa.date32()).to_pylist() == [dt.date(1800, 3, 1)]
    dates = pa.array([dt.date(1, 1, 1), dt.date(9999, 12, 31)])
    out: list[Any] = cast(log, dates, pa.timestamp("ms", tz="UTC"), zone="Etc/UTC").to_pylist()
    assert [v.date() for v in out] == [dt.date(1, 1, 1), dt.date(9999, 12, 31)]


# --- direct casts: findings ----------------------------------------------------


@pytest.mark.parametrize(
    ("column", "kind"),
    [
        (pa.array([dt.datetime(2024, 1, 2)], pa.timestamp("us", tz="Etc/UTC")), pa.int64()),
        (pa.array([dt.date(2024, 1, 2)]), pa.int32()),
    ],
    ids=["timestamp-int64", "date-int32"],
)
def test_temporal_values_into_integers_are_refused(
    log: arrowlog.ArrowLog, column: pa.Array[Any], kind: pa.DataType
) -> None:
    with pytest.raises(arrowlog.SchemaMismatchError):
        cast(log, column, kind)


def test_doubles_too_small_for_a_float_are_refused(log: arrowlog.ArrowLog) -> None:
    with pytest.raises(arrowlog.SchemaMismatchError):
        cast(log, pa.array([1e-50]), pa.float32())


def test_doubles_into_a_wide_decimal_are_the_decimals_they_print_as(
    log: arrowlog.ArrowLog,
) -> None:
    out = cast(log, pa.array([0.1, 123.456, 2.675]), pa.decimal128(38, 18)).to_pylist()
    assert out == [decimal.Decimal(repr(v)) for v in (0.1, 123.456, 2.675)]


# --- through Spark -------------------------------------------------------------


@pytest.fixture
def sess(spark: Any) -> Iterator[Any]:
    """The shared session; its time zone put back afterwards (unset if it was:
    a session that never set it does not tell its tasks its zone)."""
    key = "spark.sql.session.timeZone"
    zone = spark.conf.getAll.get(key)
    yield spark
    if zone is None:
        spark.conf.unset(key)
    else:
        spark.conf.set(key, zone)


def spark_write(
    spark: Any,
    tmp_path: Path,
    query: str,
    fields: list[pa.Field[Any]],
    zone: str = "UTC",
    partitions: int = 1,
) -> arrowlog.ArrowLog:
    """``query`` (run in session time zone ``zone``) written to a new topic
    ``t`` of ``fields``; the log."""
    spec = StoreSpec("local", str(tmp_path / "log"), {"fsync": False})
    log = spec.connect()
    log.create_topic("t", pa.schema(fields), partitions=partitions)
    spark.conf.set("spark.sql.session.timeZone", zone)
    df = spark.sql(query)
    df.write.format("arrowlog").mode("append").option("topic", "t").option(
        "storage.fsync", "false"
    ).save(spec.url)
    return log


def stored(log: arrowlog.ArrowLog, column: str, partitions: int = 1) -> list[Any]:
    got: list[Any] = []
    for p in range(partitions):
        got += log.consumer().read("t", p, columns=[column]).column(column).to_pylist()
    return got


@pytest.mark.spark
def test_a_row_of_every_spark_type_into_natural_arrow_types(sess: Any, tmp_path: Path) -> None:
    """ByteType to int64, LongType to int32, DoubleType to float32 (NaN, -0.0,
    infinity), decimals with trailing zeros, strings and bytes into large ones,
    a 1960 timestamp into milliseconds, year 1 and 9999 dates, empty and null
    arrays and maps into lists and maps with not-null items, a null struct over a
    not-null field: all written as they are."""
    fields: list[pa.Field[Any]] = [
        pa.field("b", pa.int64()),
        pa.field("l", pa.int32()),
        pa.field("d", pa.float32()),
        pa.field("dec", pa.decimal128(10, 2)),
        pa.field("s", pa.large_string()),
        pa.field("bin", pa.large_binary()),
        pa.field("ts", pa.timestamp("ms", tz="UTC")),
        pa.field("da", pa.date32()),
        pa.field("a", pa.list_(pa.field("item", pa.int64(), nullable=False))),
        pa.field("m", MAP_TYPE(pa.string(), pa.field("value", pa.int64(), nullable=False))),
        pa.field("st", pa.struct([pa.field("x", pa.int64(), nullable=False)])),
    ]
    query = """
      select 1Y b, 7L l, cast('NaN' as double) d, cast(1.5 as decimal(38,18)) dec,
             'x' s, X'00FF' bin, timestamp'1960-03-01 00:00:00.001' ts, date'0001-01-01' da,
             cast(array() as array<int>) a, cast(map() as map<string,int>) m,
             cast(null as struct<x:int>) st
      union all
      select null, null, -0.0D, null, null, null, null, date'9999-12-31',
             null, map('k', 1), named_struct('x', 2)
      union all
      select -1Y, -7L, cast('-Infinity' as double), cast(-0.10 as decimal(38,18)), '', X'',
             null, null, array(1, 2), null, null"""
    log = spark_write(sess, tmp_path, query, fields)
    rows = sorted(
        log.consumer().read("t", 0).select([f.name for f in fields]).to_pylist(),
        key=lambda r: (r["b"] is not None, r["b"] or 0),
    )
    assert [r["b"] for r in rows] == [None, -1, 1]
    assert rows[2]["d"] != rows[2]["d"] and rows[1]["d"] == -math.inf  # NaN; -inf
    assert math.copysign(1.0, rows[0]["d"]) == -1.0
    assert [r["dec"] for r in rows] == [None, decimal.Decimal("-0.10"), decimal.Decimal("1.50")]
    assert [r["bin"] for r in rows] == [None, b"", b"\x00\xff"]
    ts = rows[2]["ts"]
    assert ts == dt.datetime(1960, 3, 1, 0, 0, 0, 1000, tzinfo=ts.tzinfo)
    assert [r["da"] for r in rows] == [dt.date(9999, 12, 31), None, dt.date(1, 1, 1)]
    assert [r["a"] for r in rows] == [None, [1, 2], []]
    assert [r["m"] for r in rows] == [[("k", 1)], None, []]
    assert [r["st"] for r in rows] == [{"x": 2}, None, None]


@pytest.mark.spark
def test_timestamps_into_dates_take_the_session_time_zone(sess: Any, tmp_path: Path) -> None:
    """Tokyo midnights (1800 in local mean time, 1960, 2024) are those dates."""
    query = """select timestamp'2024-01-02 00:00:00' x union all
               select timestamp'1960-03-01 00:00:00' union all
               select timestamp'1800-03-01 00:00:00'"""
    log = spark_write(sess, tmp_path, query, [pa.field("x", pa.date32())], zone="Asia/Tokyo")
    assert sorted(stored(log, "x")) == [
        dt.date(1800, 3, 1),
        dt.date(1960, 3, 1),
        dt.date(2024, 1, 2),
    ]


@pytest.mark.spark
def test_a_read_of_arrowlog_written_to_another_topic(sess: Any, tmp_path: Path) -> None:
    """Its metadata columns are dropped (a ``timestamp`` of the topic's own
    taken from the read), its rows keep their partitions."""
    spec = StoreSpec("local", str(tmp_path / "log"), {"fsync": False})
    log = spec.connect()
    log.create_topic("src", pa.schema([pa.field("id", pa.int64())]), partitions=3)
    schema = pa.schema([pa.field("id", pa.int64()), pa.field("timestamp", pa.timestamp("ms"))])
    log.create_topic("t", schema, partitions=3)
    for p in range(3):
        log.partition("src", p).append(pa.record_batch([pa.array([p, p + 10])], names=["id"]))
    back = sess.read.format("arrowlog").option("topic", "src").load(spec.url)
    back.write.format("arrowlog").mode("append").option("topic", "t").option(
        "storage.fsync", "false"
    ).save(spec.url)
    for p in range(3):
        read = log.consumer().read("t", p, columns=["id", "timestamp"])
        got: list[Any] = read.column("id").to_pylist()
        assert sorted(got) == [p, p + 10]
        assert read.column("timestamp").null_count == 0


@pytest.mark.spark
def test_instants_into_naive_timestamps_keep_the_session_wall_clock(
    sess: Any, tmp_path: Path
) -> None:
    query = "select timestamp'2024-01-02 03:04:05.123' x"
    field = pa.field("x", pa.timestamp("us"))
    log = spark_write(sess, tmp_path, query, [field], zone="America/Los_Angeles")
    assert stored(log, "x") == [dt.datetime(2024, 1, 2, 3, 4, 5, 123000)]


@pytest.mark.spark
def test_naive_timestamps_into_instants_take_the_session_time_zone(
    sess: Any, tmp_path: Path
) -> None:
    query = "select timestamp_ntz'2024-01-02 03:04:05' x"
    field = pa.field("x", pa.timestamp("us", tz="UTC"))
    log = spark_write(sess, tmp_path, query, [field], zone="America/Los_Angeles")
    assert stored(log, "x") == [dt.datetime(2024, 1, 2, 11, 4, 5, tzinfo=dt.timezone.utc)]


@pytest.mark.spark
def test_dates_into_instants_are_the_session_midnight(sess: Any, tmp_path: Path) -> None:
    field = pa.field("x", pa.timestamp("us", tz="UTC"))
    log = spark_write(
        sess, tmp_path, "select date'2024-01-02' x", [field], zone="America/Los_Angeles"
    )
    assert stored(log, "x") == [dt.datetime(2024, 1, 2, 8, tzinfo=dt.timezone.utc)]


@pytest.mark.spark
def test_an_empty_array_literal_is_written_as_empty_lists(sess: Any, tmp_path: Path) -> None:
    field = pa.field("e", pa.list_(pa.string()))
    log = spark_write(sess, tmp_path, "select array() e", [field])
    assert stored(log, "e") == [[]]
