"""Per-segment column statistics: min, max and null count in every data
segment's header and in checkpoint summaries; readers leave out the segments
that cannot match a predicate, and the bounds are never wrong (truncated
strings, NaN, nulls, time zones)."""

from __future__ import annotations

import dataclasses
import datetime
import decimal
import math
from collections.abc import Callable
from typing import Any, Literal

import pyarrow as pa
import pyarrow.compute as pc
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import arrowlog
from arrowlog import InvalidConfigError, TopicConfig, UnknownColumnError
from arrowlog.format.checkpoint import Checkpoint, PartitionState, SegmentSummary
from arrowlog.format.segment import (
    SegmentHeader,
    codec,
    decode_segment,
    encode_segment,
    read_header,
)
from arrowlog.format.stats import MAX_BOUND_BYTES, column_stats, expression, may_match, row_filter
from arrowlog.storage import Store
from arrowlog.storage.wrappers import CountingStore

UTC = datetime.timezone.utc


def test_bounds_of_every_primitive_type() -> None:
    long = "z" * (MAX_BOUND_BYTES + 10)
    batch = pa.record_batch(
        {
            "i": pa.array([3, None, -7], pa.int32()),
            "f": pa.array([1.5, float("nan"), -0.0]),
            "g": pa.array([-0.0, 0.0, 2.0]),
            "nulls": pa.array([None, None, None], pa.int64()),
            "s": pa.array(["b", long, "a" * 100]),
            "short": pa.array(["b", "é", "a"]),
            "bin": pa.array([b"\x00\xff", b"\x01"]).take([0, 1, 1]),
            "ts": pa.array(
                [datetime.datetime(2024, 1, 1, 12, tzinfo=UTC)] * 3, pa.timestamp("ms", tz="UTC")
            ),
            "d": pa.array([datetime.date(2020, 1, 2)] * 3, pa.date32()),
            "dec": pa.array([decimal.Decimal("1.25"), decimal.Decimal("-3.5"), None]),
            "b": pa.array([True, None, True]),
            "nested": pa.array([[1], [2], None]),
        }
    )
    assert column_stats(batch)["s"] == [None, None, 0]  # type: ignore[index]  # plain: no bounds
    stats = dictionary_stats(batch)  # as a compressed segment stores strings
    assert stats is not None
    assert stats["i"] == [-7, 3, 1]
    assert stats["f"] == [-0.0, None, 0]  # a NaN: no maximum
    assert stats["g"][0] == 0.0 and stats["g"][1] == 2.0
    assert stats["nulls"] == [None, None, 3]
    assert stats["s"] == ["a" * MAX_BOUND_BYTES, None, 0]  # min cut, max too long: none
    assert stats["short"] == ["a", "é", 0]
    assert stats["bin"] == ["AP8=", "AQ==", 0]  # base64 of b"\x00\xff" and b"\x01"
    stamp = int(datetime.datetime(2024, 1, 1, 12, tzinfo=UTC).timestamp() * 1000)
    assert stats["ts"] == [stamp, stamp, 0]
    assert stats["d"] == [18263, 18263, 0]
    assert stats["dec"] == ["-3.50", "1.25", 1]
    assert stats["b"] == [True, True, 1]
    assert "nested" not in stats


def dictionary_stats(batch: pa.RecordBatch) -> dict[str, list[Any]] | None:
    """Statistics with every string and binary column's dictionary, as
    compressed segments compute them."""
    strings = {
        i: column.dictionary_encode().dictionary
        for i, column in enumerate(batch.columns)
        if pa.types.is_string(column.type) or pa.types.is_binary(column.type)
    }
    return column_stats(batch, strings)


def test_predicates_decided_by_the_bounds() -> None:
    batch = pa.record_batch(
        {
            "x": pa.array([10, 20, None]),
            "f": pa.array([1.0, float("nan"), 2.0]),
            "s": pa.array(["m" * 100, "b", "c"]),
            "ts": pa.array(
                [datetime.datetime(2024, 1, 1, tzinfo=UTC)] * 3, pa.timestamp("us", tz="UTC")
            ),
        }
    )
    stats, schema, n = dictionary_stats(batch), batch.schema, batch.num_rows

    def may(*where: tuple[str, str, Any]) -> bool:
        return may_match(stats, schema, list(where), n)

    assert not may(("x", ">", 20)) and may(("x", ">=", 20)) and not may(("x", "<", 10))
    assert not may(("x", "==", 15.5)) or True  # within the range: cannot tell
    assert not may(("x", "in", [1, 2, 30])) and may(("x", "in", [1, 15]))
    assert may(("x", "is null", None)) and may(("x", "is not null", None))
    assert may(("f", ">", 1e300))  # NaN is above every number in Spark
    assert not may(("f", "<", 1.0)) and may(("f", "==", float("nan")))
    assert may(("s", ">", "zzz"))  # the maximum was too long to keep
    assert not may(("s", "<", "b"))
    noon = datetime.datetime(2024, 1, 1, 12, tzinfo=UTC)
    assert not may(("ts", ">", noon)) and may(("ts", "<", noon))
    assert not may(("ts", ">", datetime.datetime(2024, 1, 1, 12)))  # naive: UTC
    assert not may(("x", ">", 100), ("s", "<", "z"))  # AND: one is enough
    assert may(("x", ">", "text"))  # a value of another kind: unknown
    assert may_match(None, schema, [("x", ">", 100)], n)  # no statistics: read it


def test_a_column_of_nulls_matches_only_null_tests() -> None:
    batch = pa.record_batch({"x": pa.array([None, None], pa.int64())})
    stats = column_stats(batch)
    for p in [("x", "==", 1), ("x", "!=", 1), ("x", "<", 1), ("x", "in", [1])]:
        assert not may_match(stats, batch.schema, [p], 2)
    assert may_match(stats, batch.schema, [("x", "is null", None)], 2)
    assert not may_match(stats, batch.schema, [("x", "is not null", None)], 2)


VALUES = {
    "i": st.one_of(st.none(), st.integers(-50, 50)),
    "f": st.one_of(st.none(), st.floats(allow_nan=True, allow_infinity=True, width=64)),
    "s": st.one_of(st.none(), st.text(alphabet="ab\u00e9\U0001f600", max_size=80)),
}
TYPES = {"i": pa.int64(), "f": pa.float64(), "s": pa.string()}
OPS = ["==", "!=", "<", "<=", ">", ">=", "in", "not in", "is null", "is not null"]


@st.composite
def batch_and_predicate(draw: st.DrawFn) -> tuple[pa.RecordBatch, tuple[str, str, Any]]:
    rows = draw(st.integers(1, 20))
    columns = {c: draw(st.lists(VALUES[c], min_size=rows, max_size=rows)) for c in VALUES}
    batch = pa.record_batch({c: pa.array(v, TYPES[c]) for c, v in columns.items()})
    column = draw(st.sampled_from(list(VALUES)))
    op = draw(st.sampled_from(OPS))
    values = VALUES[column].filter(lambda v: v is not None)
    if op in ("in", "not in"):
        value: Any = draw(st.lists(values, min_size=1, max_size=3))
    elif op in ("is null", "is not null"):
        value = None
    else:
        # values from the batch itself hit the bounds exactly
        present = [v for v in columns[column] if v is not None]
        pick_present = bool(present) and draw(st.booleans())
        value = draw(st.sampled_from(present)) if pick_present else draw(values)
    return batch, (column, op, value)


@settings(max_examples=400, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(case=batch_and_predicate())
def test_statistics_never_rule_out_a_segment_with_a_matching_row(
    case: tuple[pa.RecordBatch, tuple[str, str, Any]],
) -> None:
    batch, predicate = case
    matching = row_filter(batch, [predicate]).num_rows
    if matching:
        for stats in (column_stats(batch), dictionary_stats(batch)):
            assert may_match(stats, batch.schema, [predicate], batch.num_rows)


def test_statistics_ride_in_the_header_and_the_checkpoint() -> None:
    batch = pa.record_batch({"x": pa.array([5, 9]), "s": pa.array(["p", "q"])})
    header = SegmentHeader(
        base_offset=0, record_count=2, timestamp_ms=10**12, append_id="a" * 32,
        stats=dictionary_stats(batch),
    )  # fmt: skip
    data = encode_segment(batch, header)
    assert read_header(bytes(data[:16384]), key="k") == header  # what listings see
    assert decode_segment(data, key="k")[0] == dataclasses.replace(header, stats=None)
    summary = SegmentSummary.of(header, len(data))
    cp = Checkpoint(log_start=0, start=0, end=2, segments=(summary,), state=PartitionState())
    assert Checkpoint.from_json(cp.to_json(), key="k", start=0).segments == (summary,)
    # a checkpoint written before statistics parses, with none
    old = SegmentSummary.of(dataclasses.replace(header, stats=None), len(data))
    raw = Checkpoint(log_start=0, start=0, end=2, segments=(old,), state=PartitionState())
    stripped = raw.to_json().replace(b',"stats":[null]', b"")
    assert b"stats" not in stripped
    with pytest.raises(Exception):  # noqa: B017 - the checksum covers the JSON
        Checkpoint.from_json(stripped, key="k", start=0)


def tiered(store: Store, *, stats: bool = True, monkeypatch: pytest.MonkeyPatch | None = None
           ) -> pa.Table:  # fmt: skip
    """Ten segments of 100 ids each, ids rising: segment k holds [100k, 100k+100)."""
    log = arrowlog.connect(store)
    log.create_topic("t", SCHEMA, config=TopicConfig(checkpoint_interval=4))
    if not stats and monkeypatch is not None:
        # segments as written before statistics existed
        monkeypatch.setattr(codec, "column_stats", lambda batch, dictionaries=None: None)
    batches = [
        pa.record_batch(
            {"id": pa.array(range(100 * k, 100 * k + 100)), "kind": pa.array(["a", "b"] * 50)},
            schema=SCHEMA,
        )
        for k in range(10)
    ]
    for b in batches:
        log.append("t", b)
    return pa.Table.from_batches(batches)


FIELDS: list[pa.Field[Any]] = [pa.field("id", pa.int64()), pa.field("kind", pa.string())]
SCHEMA = pa.schema(FIELDS)


def test_reads_skip_the_segments_that_cannot_match(store: Store) -> None:
    everything = tiered(store)
    counting = CountingStore(store)
    log = arrowlog.connect(counting)  # summaries from checkpoints and the tail
    log.read("t")
    where = [("id", ">=", 750), ("kind", "==", "a")]
    expected = everything.filter(row_filter_expression(where))
    reads: list[Callable[[], pa.Table]] = [
        lambda: log.read("t", where=where),
        lambda: log.consumer().read("t", where=where),
        lambda: log.consumer(isolation_level="read_uncommitted").read("t", where=where),
        lambda: log.consumer().read_many({("t", 0): (0, None)}, where=where)[("t", 0)],
    ]
    for read in reads:
        counting.reset()
        got = read()
        assert got.equals(expected)
        assert segments_read(counting) == [700, 800, 900]
    counting.reset()
    ids = log.read("t", columns=["id"], where=[("kind", "==", "b"), ("id", "<", 100)])
    assert ids.column_names == ["id"] and ids["id"].to_pylist() == list(range(1, 100, 2))
    assert segments_read(counting) == [0]


def segments_read(counting: CountingStore) -> list[int]:
    return sorted(int(k.rsplit("/", 1)[1].split(".")[0]) for k in counting.keys_read
                  if "/segments/" in k)  # fmt: skip


def row_filter_expression(where: list[tuple[str, str, Any]]) -> Any:
    return expression(where)


def test_segments_without_statistics_are_always_read(
    store: Store, monkeypatch: pytest.MonkeyPatch
) -> None:
    everything = tiered(store, stats=False, monkeypatch=monkeypatch)
    counting = CountingStore(store)
    log = arrowlog.connect(counting)
    log.read("t")
    counting.reset()
    got = log.read("t", where=[("id", ">=", 750)])
    assert got.equals(everything.filter(row_filter_expression([("id", ">=", 750)])))
    assert segments_read(counting) == list(range(0, 1000, 100))


@pytest.mark.parametrize(
    ("where", "error", "message"),
    [
        ([("nope", "==", 1)], UnknownColumnError, "no column 'nope'"),
        ([("id", "~", 1)], InvalidConfigError, "op must be one of"),
        ([("id", "in", 5)], InvalidConfigError, "takes a list"),
        (("id", "==", 5), InvalidConfigError, "a list of"),
        ([("id", "==")], InvalidConfigError, "is \\(column, op, value\\)"),
        ([("id", "==", "seven")], InvalidConfigError, "does not apply.*int64, string"),
        ([("kind", "<", 3)], InvalidConfigError, "does not apply"),
        ([("id", "in", ["x"])], InvalidConfigError, "does not apply"),
    ],
)
def test_bad_predicates_fail_before_any_segment_is_read(
    store: Store, where: Any, error: type[Exception], message: str
) -> None:
    tiered(store)
    counting = CountingStore(store)
    log = arrowlog.connect(counting)
    log.read("t")
    for read in (
        lambda: log.read("t", where=where),
        lambda: log.consumer().read("t", where=where),
        lambda: log.consumer().read_many({("t", 0): (0, None)}, where=where),
    ):
        counting.reset()
        with pytest.raises(error, match=message):
            read()
        assert segments_read(counting) == []


def test_an_empty_where_reads_everything(store: Store) -> None:
    everything = tiered(store)
    assert arrowlog.connect(store).read("t", where=[]).equals(everything)
    assert arrowlog.connect(store).consumer().read("t", where=[]).equals(everything)


def test_scan_plans_leave_out_segments_that_cannot_match(store: Store) -> None:
    from arrowlog.read.scan import plan_scan

    tiered(store)
    log = arrowlog.connect(store)
    every = plan_scan(log, ["t"], target_bytes=1)
    some = plan_scan(log, ["t"], target_bytes=1, where=[("id", "<", 250)])
    assert sum(len(t.segments) for t in every.tasks) == 10
    assert [s.base for t in some.tasks for s in t.segments] == [0, 100, 200]
    none = plan_scan(log, ["t"], target_bytes=1, where=[("id", ">", 10**6)])
    assert none.tasks == () and none.ranges == every.ranges
    assert not math.isnan(0.0)


def test_infinities_half_floats_and_durations_append_and_read_back() -> None:
    """Infinite values leave a bound out (JSON has no infinity; such a bound
    prunes nothing); types Arrow has no min/max for get no statistics."""
    import numpy as np

    log = arrowlog.connect("memory://")
    cases: dict[str, pa.Array[Any]] = {
        "f": pa.array([float("inf"), 1.0, float("-inf")]),
        "up": pa.array([1.0, float("inf")]),
        "h": pa.array(np.array([1, 2], dtype=np.float16)),
        "d": pa.array([1, 2], pa.duration("s")),
    }
    for name, values in cases.items():
        log.create_topic(name, pa.schema([("c", values.type)]))
        log.append(name, pa.record_batch({"c": values}))
        assert log.read(name).column("c").equals(pa.chunked_array([values]))
    stats = {n: log.partition(n, 0).summaries()[0].stats for n in cases}
    assert stats["f"] == {"c": [None, None, 0]}
    assert stats["up"] == {"c": [1.0, None, 0]}
    assert stats["h"] is None and stats["d"] is None
    # a read by predicate still finds the infinite row
    got = log.read("up", where=[("c", ">", 2.0)]).column("c").to_pylist()
    assert got == [float("inf")]


EPOCH = datetime.datetime(2024, 1, 1, tzinfo=UTC)
#: offsets (microseconds) of bounds around a stored instant: finer and coarser than its unit
NUDGES_US = (
    0,
    1,
    499,
    500,
    501,
    999,
    1000,
    1001,
    1500,
    999_999,
    1_000_000,
    1_500_000,
    86_400_000_000,
)
COMPARISONS = ("<", "<=", ">", ">=", "==", "!=", "in")
COMPARE = {"<": "less", "<=": "less_equal", ">": "greater", ">=": "greater_equal",
           "==": "equal", "!=": "not_equal"}  # fmt: skip


def spark_sees(column: pa.Array[Any]) -> pa.Array[Any]:
    """A column as Spark compares it: nanoseconds cut to microseconds."""
    t = column.type
    if pa.types.is_timestamp(t) and t.unit == "ns":
        return column.cast(pa.timestamp("us", tz=t.tz), safe=False)
    return column


def matches(column: pa.Array[Any], op: str, value: Any) -> bool | None:
    """Whether a row of ``column`` satisfies ``op value`` by pyarrow's
    comparison (None: pyarrow compares no such values)."""
    try:
        if op == "in":
            found = pc.is_in(column, value_set=pa.array([value]))
        else:
            found = getattr(pc, COMPARE[op])(column, pa.scalar(value))
    except (pa.ArrowException, TypeError, ValueError):
        return None
    return bool(pc.any(found).as_py())


def temporal_cases() -> list[tuple[pa.DataType, list[Any], list[Any]]]:
    cases: list[tuple[pa.DataType, list[Any], list[Any]]] = []
    instants = [EPOCH + datetime.timedelta(microseconds=us) for us in (1000, 3000, 1_001_000)]
    units: tuple[tuple[Literal["s", "ms", "us", "ns"], int], ...] = (
        ("s", 1),
        ("ms", 10**3),
        ("us", 10**6),
        ("ns", 10**9),
    )
    for unit, per_s in units:
        stored = [int((i - EPOCH).total_seconds() * per_s) + int(EPOCH.timestamp()) * per_s
                  for i in instants]  # fmt: skip
        if unit == "ns":
            stored += [stored[0] + 500]  # between two microseconds
        bounds: list[Any] = []
        for i in instants:
            for d in NUDGES_US:
                for sign in (1, -1):
                    b = i + sign * datetime.timedelta(microseconds=d)
                    bounds += [b, b.replace(tzinfo=None), b.date()]
        for tz in (None, "UTC", "Europe/Paris"):
            cases.append((pa.timestamp(unit, tz=tz), stored, bounds))
    days = [int(EPOCH.timestamp()) // 86_400 + k for k in (0, 1, 3)]
    day_bounds: list[Any] = []
    for day in days:
        midnight = datetime.datetime(1970, 1, 1) + datetime.timedelta(days=day)
        for d in NUDGES_US:
            for sign in (1, -1):
                b = midnight + sign * datetime.timedelta(microseconds=d)
                day_bounds += [b, b.replace(tzinfo=UTC), b.date()]
    cases.append((pa.date32(), days, day_bounds))
    cases.append((pa.date64(), [d * 86_400_000 for d in days], day_bounds))
    seconds = [1, 2, 61]
    time_bounds = [
        (
            datetime.datetime(2000, 1, 1) + datetime.timedelta(seconds=s, microseconds=sign * d)
        ).time()
        for s in seconds
        for d in NUDGES_US[:-2]
        for sign in (1, -1)
    ]
    cases.append((pa.time32("s"), seconds, time_bounds))
    cases.append((pa.time32("ms"), [s * 1000 + 1 for s in seconds], time_bounds))
    cases.append((pa.time64("ns"), [s * 10**9 + 500 for s in seconds], time_bounds))
    return cases


def number_cases() -> list[tuple[pa.DataType, list[Any], list[Any]]]:
    ints = [-3, 2, 3, 7]
    int_bounds: list[Any] = [v + d for v in ints for d in (-1, -0.5, -0.25, 0, 0.25, 0.5, 1)] + [
        decimal.Decimal(v) + decimal.Decimal("0.001") * k for v in ints for k in (-1, 0, 1)
    ]
    int_bounds += [2.0**53, -(2.0**53), 2**53 + 1]
    cases: list[tuple[pa.DataType, list[Any], list[Any]]] = [
        (t, ints, int_bounds) for t in (pa.int8(), pa.int32(), pa.int64())
    ]
    cases.append(
        (pa.uint64(), [2, 3, 7], [b for b in int_bounds if not isinstance(b, int) or b >= 0])
    )
    big = [2**53 + 1, 2**62]
    cases.append(
        (pa.int64(), big, [float(b) for b in big] + [b + d for b in big for d in (-1, 0, 1)])
    )
    fine = [
        decimal.Decimal("0.10000000000000000001"),
        decimal.Decimal("0.1"),
        decimal.Decimal("2.5"),
    ]
    decimal_bounds: list[Any] = [
        0.1,
        0.2,
        2.5,
        2,
        3,
        math.nextafter(0.1, 1),
        math.nextafter(0.1, 0),
    ]
    decimal_bounds += [f + decimal.Decimal("1e-25") * k for f in fine for k in (-1, 0, 1)]
    for precision, scale in ((38, 20), (30, 25), (76, 40)):
        t = pa.decimal128(precision, scale) if precision <= 38 else pa.decimal256(precision, scale)
        cases.append((t, fine, decimal_bounds))
    floats = [0.1, 2.5, float(2**53)]
    float_bounds: list[Any] = floats + [math.nextafter(f, s) for f in floats for s in (0, 1e300)]
    float_bounds += [2, 3, 2**53 + 1, decimal.Decimal("0.1"), decimal.Decimal("2.5")]
    cases += [(t, floats, float_bounds) for t in (pa.float32(), pa.float64())]
    return cases


@pytest.mark.parametrize(
    ("t", "stored", "bounds"),
    temporal_cases() + number_cases(),
    ids=lambda x: str(x) if isinstance(x, pa.DataType) else "",
)
def test_no_bound_rounded_to_the_columns_unit_prunes_a_matching_segment(
    t: pa.DataType, stored: list[Any], bounds: list[Any]
) -> None:
    """Every single-value segment of ``stored`` against every bound around it,
    in finer and coarser units, as other types (a datetime against days, a
    float against integers, a double against decimals): whenever a row
    matches, by pyarrow's comparison or by Spark's (nanoseconds cut to
    microseconds), the statistics keep the segment."""
    schema = pa.schema([pa.field("c", t)])
    wrong = []
    for value in stored:
        column = pa.array([value], t)
        stats = column_stats(pa.record_batch({"c": column}, schema=schema))
        for bound in bounds:
            for op in COMPARISONS:
                found = [matches(column, op, bound), matches(spark_sees(column), op, bound)]
                if not any(found):
                    continue
                predicate = ("c", op, [bound] if op == "in" else bound)
                if not may_match(stats, schema, [predicate], 1):
                    wrong.append((column[0], op, bound))
    assert wrong == []
