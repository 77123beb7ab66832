"""A third attack on the Spark write path's casts (arrowlog/spark/conform.py:
``cast_column``, ``_nullable``, ``_retyped``, ``_changed``; arrowlog/spark/sink.py:
``within_bytes``, ``segment_budget``) and on ``not_null_violations`` / ``map_entries``
(arrowlog/format/topic.py).

Each bug it found (untyped Arrow errors; int->bool, timestamp->time,
double->decimal, int/decimal->float and dictionary casts changing values; the
byte budget measured before a widening cast) is a test that now holds; the
others document what held from the start. No Spark session: the writer runs as
a task runs it (``TaskContext`` is None).

Origin: the third attack on the Spark sink, its casts (was tests/test_cast_attack.py)."""

from __future__ import annotations

import contextlib
import datetime as dt
import decimal
import random
import time
from pathlib import Path
from typing import Any
from zoneinfo import ZoneInfo

import pyarrow as pa
import pytest

import arrowlog
from arrowlog.format.topic import not_null_violations

pytest.importorskip("pyspark")

from arrowlog.spark.conform import _nullable, _retyped, conform
from arrowlog.spark.options import WriteOptions
from arrowlog.spark.sink import ArrowLogWriter
from arrowlog.spark.time_zones import time_zone
from arrowlog.spark.writing import route, segment_budget, within_bytes
from tests.support.spark_write import cast, fresh_name

MAP: Any = pa.MapArray  # the stubs have no overload for an explicit type
FIXED: Any = pa.FixedSizeListArray
LISTS: Any = pa.ListArray
STRUCTS: Any = pa.StructArray


@pytest.fixture
def log(tmp_path: Path) -> arrowlog.ArrowLog:
    return arrowlog.connect(str(tmp_path / "log"), {"fsync": False})


def violations(field: pa.Field[Any], array: pa.Array[Any]) -> list[str]:
    schema = pa.schema([field])
    return not_null_violations(schema, pa.record_batch([array], schema=schema))


# --- random nested types: _retyped and not_null_violations against brute force ----


def random_type(rng: random.Random, depth: int = 0) -> pa.DataType:
    kinds = ["int", "str", "struct", "list", "large", "fixed", "map"] if depth < 3 else ["int"]
    kind = rng.choice(kinds)

    def field(name: str, inner: pa.DataType) -> pa.Field[Any]:
        return pa.field(name, inner, nullable=rng.random() < 0.5)

    if kind == "int":
        return pa.int64()
    if kind == "str":
        return pa.string()
    if kind == "struct":
        n = rng.randint(1, 2)
        return pa.struct([field(f"f{i}", random_type(rng, depth + 1)) for i in range(n)])
    if kind == "map":
        key = rng.choice([pa.int64(), pa.string(), pa.struct([pa.field("x", pa.int64())])])
        value = field("value", random_type(rng, depth + 1))
        mapped: pa.DataType = pa.map_(pa.field("key", key, nullable=False), value)  # type: ignore[call-overload]
        return mapped
    item = field("item", random_type(rng, depth + 1))
    if kind == "list":
        return pa.list_(item)
    if kind == "large":
        return pa.large_list(item)
    return pa.list_(item, 2)


def random_value(rng: random.Random, kind: Any) -> Any:
    if rng.random() < 0.25:
        return None
    if kind == pa.int64():
        return rng.randint(0, 9)
    if kind == pa.string():
        return rng.choice("abc")
    if pa.types.is_struct(kind):
        return {f.name: random_value(rng, f.type) for f in kind}
    if pa.types.is_map(kind):
        entries = []
        for _ in range(rng.randint(0, 2)):
            key = random_value(rng, kind.key_type)
            while key is None:
                key = random_value(rng, kind.key_type)
            entries.append((key, random_value(rng, kind.item_type)))
        return entries
    size = 2 if pa.types.is_fixed_size_list(kind) else rng.randint(0, 2)
    return [random_value(rng, kind.value_type) for _ in range(size)]


def brute_force(field: Any, value: Any, path: str) -> set[str]:
    """The paths of nulls under not-null fields, none hidden by a null parent."""
    if value is None:
        return set() if field.nullable else {path}
    kind = field.type
    found: set[str] = set()
    if pa.types.is_struct(kind):
        for f in kind:
            found |= brute_force(f, value[f.name], f"{path}.{f.name}")
    elif pa.types.is_map(kind):
        for key, item in value:
            found |= brute_force(kind.key_field, key, f"{path}.key")
            found |= brute_force(kind.item_field, item, f"{path}.value")
    elif pa.types.is_list(kind) or pa.types.is_large_list(kind) or _fixed(kind):
        for item in value:
            found |= brute_force(kind.value_field, item, f"{path}.item")
    return found


def _fixed(kind: pa.DataType) -> bool:
    return bool(pa.types.is_fixed_size_list(kind))


def test_retyped_and_not_null_violations_match_brute_force_on_random_sliced_nesting() -> None:
    """2,000 random types (structs, lists, large lists, fixed-size lists, maps with
    struct keys, three deep, random not-null flags), random values with nulls at
    every depth, random slices (empty ones too): ``_retyped`` keeps every value,
    validates in full, has the exact type; ``not_null_violations`` names exactly
    the paths a brute force over to_pylist() finds."""
    for seed in range(2000):
        rng = random.Random(seed)
        kind = random_type(rng)
        field = pa.field("c", kind, nullable=rng.random() < 0.5)
        values = [random_value(rng, kind) for _ in range(rng.randint(0, 8))]
        lo = rng.randint(0, len(values))
        hi = rng.randint(lo, len(values))
        array = pa.array(values, type=_nullable(kind)).slice(lo, hi - lo)
        out = _retyped(array, kind)
        out.validate(full=True)
        assert out.type == kind, seed
        assert out.to_pylist() == values[lo:hi], seed
        expected: set[str] = set()
        for value in values[lo:hi]:
            expected |= brute_force(field, value, "c")
        found = {p.split("'")[1] for p in violations(field, out)}
        assert found == expected, (seed, kind, values[lo:hi])


NOT_NULL_ITEM = pa.field("item", pa.int64(), nullable=False)
NULL_FIRST = pa.array([True, False])


def test_null_lists_spanning_nulls_hide_them_sliced_or_not() -> None:
    """A null list, fixed-size list or map whose range holds nulls (Arrow allows
    it): only the null of the valid row is reported, the values kept, sliced too."""
    values = pa.array([1, None, 3, None])
    offsets = pa.array([0, 2, 4], pa.int32())
    not_null_value = pa.field("value", pa.int64(), nullable=False)
    map_type: Any = pa.map_(pa.int64(), not_null_value)
    cases: list[tuple[pa.Array[Any], pa.DataType]] = [
        (LISTS.from_arrays(offsets, values, mask=NULL_FIRST), pa.list_(NOT_NULL_ITEM)),
        (FIXED.from_arrays(values, 2, mask=NULL_FIRST), pa.list_(NOT_NULL_ITEM, 2)),
        (MAP.from_arrays(offsets, pa.array([1, 2, 3, 4]), values, mask=NULL_FIRST), map_type),
    ]
    for array, kind in cases:
        retyped_with_one_violation(array, kind)


def test_null_structs_hide_nulls_in_lists_maps_and_fixed_size_lists_below() -> None:
    values = pa.array([1, None, 3, None])
    offsets = pa.array([0, 2, 4], pa.int32())
    list_array = LISTS.from_arrays(offsets, values)
    fixed = FIXED.from_arrays(values, 2)
    mapped = MAP.from_arrays(offsets, pa.array([1, 2, 3, 4]), values)
    not_null_value = pa.field("value", pa.int64(), nullable=False)
    map_type: Any = pa.map_(pa.int64(), not_null_value)
    for child, kind in [
        (list_array, pa.list_(NOT_NULL_ITEM)),
        (fixed, pa.list_(NOT_NULL_ITEM, 2)),
        (mapped, map_type),
    ]:
        array = STRUCTS.from_arrays([child], fields=[pa.field("x", child.type)], mask=NULL_FIRST)
        retyped_with_one_violation(array, pa.struct([pa.field("x", kind)]))


def retyped_with_one_violation(array: Any, kind: Any) -> None:
    """``array`` and its slice from row 1 retyped as ``kind``: valid, the same
    values, and exactly one path with nulls under a not-null field."""
    for part in (array, array.slice(1)):
        out = _retyped(part, kind)
        out.validate(full=True)
        assert out.to_pylist() == part.to_pylist()
        assert len(violations(pa.field("c", kind), out)) == 1, kind


def test_struct_whose_children_have_their_own_offset() -> None:
    child = pa.array([9, 9, 1, None, 3]).slice(2)
    array = STRUCTS.from_arrays(
        [child], fields=[pa.field("a", pa.int64())], mask=pa.array([False, True, False])
    )
    kind = pa.struct([pa.field("a", pa.int64(), nullable=False)])
    for part in (array, array.slice(1), array.slice(2), array.slice(3)):
        out = _retyped(part, kind)
        out.validate(full=True)
        assert out.to_pylist() == part.to_pylist()
        assert violations(pa.field("c", kind), out) == []


# --- value-changing casts ---------------------------------------------------------


def test_map_into_a_list_of_entries_is_cast_or_refused_with_a_typed_error(
    log: arrowlog.ArrowLog,
) -> None:
    column = pa.array([[("a", 1)], None], pa.map_(pa.string(), pa.int64()))
    kind = pa.list_(pa.struct([("key", pa.string()), ("value", pa.int64())]))
    try:
        out = cast(log, column, kind)
    except arrowlog.SchemaMismatchError:
        return
    assert out.to_pylist() == [[{"key": "a", "value": 1}], None]


def test_timestamp_on_a_day_without_a_midnight_gives_a_typed_error(
    log: arrowlog.ArrowLog,
) -> None:
    """America/Santiago moved from 00:00 to 01:00 on 2023-09-03."""
    instant = dt.datetime(2023, 9, 3, 5, 0, tzinfo=dt.UTC)  # 01:00 local
    column = pa.array([instant], pa.timestamp("us", "America/Santiago"))
    with contextlib.suppress(arrowlog.SchemaMismatchError):
        cast(log, column, pa.date32())


def test_integers_other_than_0_and_1_into_booleans_are_refused(log: arrowlog.ArrowLog) -> None:
    with pytest.raises(arrowlog.SchemaMismatchError):
        cast(log, pa.array([2, 0, 1]), pa.bool_())


def test_timestamp_into_a_time_of_day_is_refused(log: arrowlog.ArrowLog) -> None:
    column = pa.array([dt.datetime(2024, 1, 1, 15, 0)], pa.timestamp("us"))
    with pytest.raises(arrowlog.SchemaMismatchError):
        cast(log, column, pa.time64("us"))


def test_doubles_that_a_decimal_cannot_hold_exactly_are_refused(log: arrowlog.ArrowLog) -> None:
    with pytest.raises(arrowlog.SchemaMismatchError):
        cast(log, pa.array([1.25]), pa.decimal128(3, 1))


@pytest.mark.parametrize(
    ("column", "kind"),
    [
        (pa.array([70000], pa.int64()), pa.float16()),
        (pa.array([decimal.Decimal("1e50")], pa.decimal256(76, 0)), pa.float32()),
    ],
    ids=["int64-float16", "decimal256-float32"],
)
def test_non_float_values_too_large_for_a_float_are_refused(
    log: arrowlog.ArrowLog, column: pa.Array[Any], kind: pa.DataType
) -> None:
    with pytest.raises(arrowlog.SchemaMismatchError):
        cast(log, column, kind)


@pytest.mark.parametrize(
    ("column", "kind"),
    [
        (pa.array([1e300]).dictionary_encode(), pa.float32()),
        (pa.array([1], pa.timestamp("s")).dictionary_encode(), pa.date32()),
    ],
    ids=["double-float", "timestamp-date"],
)
def test_dictionary_encoded_values_changed_by_the_cast_are_refused(
    log: arrowlog.ArrowLog, column: pa.Array[Any], kind: pa.DataType
) -> None:
    with pytest.raises(arrowlog.SchemaMismatchError):
        cast(log, column, kind)


def test_what_held_for_value_changing_casts(log: arrowlog.ArrowLog) -> None:
    ts = pa.timestamp("us")
    refused: list[tuple[pa.Array[Any], pa.DataType]] = [
        (pa.array([[("a", 1)]], pa.map_(pa.string(), ts)), pa.map_(pa.string(), pa.date32())),
        (pa.array([[1]], pa.list_(ts, 1)), pa.list_(pa.date32(), 1)),
        (pa.array([[1]], pa.large_list(ts)), pa.large_list(pa.date32())),
        (pa.array([[1]], pa.list_(ts)), pa.list_(pa.date32(), 1)),
        (pa.array([1], ts), pa.date64()),
        (pa.array([1e30]), pa.float16()),
        (pa.array([2**53 + 1]), pa.float64()),
        (pa.array([decimal.Decimal("1.5")], pa.decimal128(3, 1)), pa.int64()),
        (pa.array([decimal.Decimal("1.25")], pa.decimal128(10, 2)), pa.decimal128(10, 1)),
        # Arrow has no cast into these: typed errors
        (pa.array([[1.0]]), pa.list_view(pa.float32())),
        (pa.array([1]), pa.union([pa.field("i", pa.int64())], "sparse")),
    ]
    for column, kind in refused:
        with pytest.raises(arrowlog.SchemaMismatchError):
            cast(log, column, kind)
    # a local midnight in the timestamp's own zone is that local date
    tokyo = pa.array(
        [dt.datetime(2024, 1, 1, 15, 0, tzinfo=dt.UTC)], pa.timestamp("us", "Asia/Tokyo")
    )
    assert cast(log, tokyo, pa.date32()).to_pylist() == [dt.date(2024, 1, 2)]


# --- time zones: wall clocks and dates into instants, as Spark's CAST takes them -----


#: zones with every kind of transition: an hour forward and back (Los Angeles,
#: London), half an hour (Lord Howe), at midnight (Sao Paulo, 2011), a whole
#: day skipped (Apia, 2011-12-30), none (Kolkata)
ZONES = [
    "America/Los_Angeles",
    "Europe/London",
    "Australia/Lord_Howe",
    "America/Sao_Paulo",
    "Pacific/Apia",
    "Asia/Kolkata",
]


@pytest.mark.parametrize("zone", ZONES)
def test_wall_clocks_into_instants_are_read_as_java_time_reads_them(
    log: arrowlog.ArrowLog, zone: str
) -> None:
    """Every quarter hour of 2011 in ``zone``, as Spark's CAST (java.time's
    ``LocalDateTime.atZone``) takes it: a wall clock that occurs twice is the
    earlier instant, one in a gap is read with the offset before the gap.
    Python's zoneinfo with ``fold=0`` (PEP 495) has the same rule, and reads
    the same time zone database as Arrow: it is the oracle."""
    from zoneinfo import ZoneInfo

    start = dt.datetime(2011, 1, 1)
    walls = [start + dt.timedelta(minutes=15 * i) for i in range(4 * 24 * 365)]
    got = cast(log, pa.array(walls, pa.timestamp("us")), pa.timestamp("us", "UTC"), zone)
    place = ZoneInfo(zone)
    expected = [w.replace(tzinfo=place).astimezone(dt.UTC) for w in walls]
    assert got.to_pylist() == expected


def test_dates_into_instants_are_their_days_first_instant_in_the_session_time_zone(
    log: arrowlog.ArrowLog,
) -> None:
    """Sao Paulo's 2011-10-16 began at 01:00 (its midnight fell into the gap),
    as Spark's CAST (java.time's ``LocalDate.atStartOfDay``) says; Apia's
    2011-12-30 never began, and is where 2011-12-31 began (both checked against
    Spark 4.3's CAST)."""
    dates = pa.array([dt.date(2011, 10, 16), dt.date(2011, 10, 15), None])
    got = cast(log, dates, pa.timestamp("us", "UTC"), "America/Sao_Paulo").to_pylist()
    assert got == [
        dt.datetime(2011, 10, 16, 3, tzinfo=dt.UTC),  # 01:00 at -02:00
        dt.datetime(2011, 10, 15, 3, tzinfo=dt.UTC),  # 00:00 at -03:00
        None,
    ]
    skipped = pa.array([dt.date(2011, 12, 30), dt.date(2011, 12, 31)])
    got = cast(log, skipped, pa.timestamp("us", "UTC"), "Pacific/Apia").to_pylist()
    assert got == [dt.datetime(2011, 12, 30, 10, tzinfo=dt.UTC)] * 2


def test_wall_clocks_and_dates_into_instants_in_an_unknown_time_zone_are_refused(
    log: arrowlog.ArrowLog,
) -> None:
    """Outside a task of a session that set its zone, and with no timestamp with
    a time zone beside them, nothing says which zone: refused, with what to do.
    A column of nulls needs none; a timestamp with a time zone in the same rows
    (Spark's TimestampType, in the session's zone) says it."""
    instant = pa.timestamp("us", "UTC")
    for column in (pa.array([dt.datetime(2024, 1, 2)]), pa.array([dt.date(2024, 1, 2)])):
        with pytest.raises(arrowlog.InvalidConfigError, match=r"spark\.sql\.session\.timeZone"):
            cast(log, column, instant)
        assert cast(log, pa.nulls(2, column.type), instant).to_pylist() == [None, None]
    topic = log.create_topic(
        fresh_name(), pa.schema([pa.field("x", instant), pa.field("at", instant)])
    )
    kolkata = pa.timestamp("us", "Asia/Kolkata")
    batch = pa.record_batch(
        [
            pa.array([dt.datetime(2024, 1, 2, 5, 30)]),
            pa.array([dt.datetime(2024, 1, 2, tzinfo=dt.UTC)], kolkata),
        ],
        names=["x", "at"],
    )
    row = conform(batch, topic).to_pylist()[0]
    assert row["x"] == row["at"] == dt.datetime(2024, 1, 2, tzinfo=dt.UTC)


def test_doubles_inside_structs_and_lists_into_decimals_are_the_numbers_they_print_as(
    log: arrowlog.ArrowLog,
) -> None:
    """As at the top level (Spark's CAST of ``array(0.1D)`` to
    ``array<decimal(38,18)>`` is 0.1, not 0.100000000000000006)."""
    wide = pa.decimal128(38, 18)
    lists = pa.array([[0.1, 2.675], None, []])
    assert cast(log, lists, pa.list_(wide)).to_pylist() == [
        [decimal.Decimal("0.1"), decimal.Decimal("2.675")],
        None,
        [],
    ]
    structs = pa.array([{"v": 0.1}, None], pa.struct([("v", pa.float64())]))
    out = cast(log, structs, pa.struct([("v", wide)])).to_pylist()
    assert out == [{"v": decimal.Decimal("0.1")}, None]


def test_a_map_into_a_list_of_other_than_pairs_is_refused_with_a_typed_error(
    log: arrowlog.ArrowLog,
) -> None:
    """With rows, and with none (as the driver checks a DataFrame's schema)."""
    column = pa.array([[("a", 1)]], pa.map_(pa.string(), pa.int64()))
    for rows in (column, column.slice(0, 0)):
        with pytest.raises(arrowlog.SchemaMismatchError, match="cannot become"):
            cast(log, rows, pa.list_(pa.int64()))


# --- session time zones as Spark reads them, and casts Spark's CAST defines otherwise --


@pytest.mark.parametrize(
    ("spark_zone", "zone"),
    [
        # region ids, and ids that only look like prefixes
        ("America/Los_Angeles", "America/Los_Angeles"),
        ("Etc/GMT-14", "Etc/GMT-14"),
        ("GMT0", "GMT0"),
        ("UCT", "UCT"),
        ("CET", "CET"),
        # Z and offsets: +h, +hh, +hhmm, +hh:mm, +hhmmss, +hh:mm:ss, and Spark's
        # own +h:mm and +hh:m
        ("Z", "+00:00"),
        ("-8", "-08:00"),
        ("-08", "-08:00"),
        ("+0530", "+05:30"),
        ("+05:30", "+05:30"),
        ("-133333", "-13:33:33"),
        ("-13:33:33", "-13:33:33"),
        ("+5:30", "+05:30"),
        ("+05:3", "+05:03"),
        ("+8:0", "+08:00"),
        ("-00:00", "+00:00"),
        ("+18:00", "+18:00"),
        # UTC, GMT, UT: alone, or followed by an offset
        ("UTC", "+00:00"),
        ("GMT", "+00:00"),
        ("UT", "+00:00"),
        ("GMT+8", "+08:00"),
        ("GMT+8:00", "+08:00"),
        ("UTC+01:00", "+01:00"),
        ("UT-0130", "-01:30"),
        ("UTC-13:33:33", "-13:33:33"),
        # java.time's SHORT_IDS
        ("PST", "America/Los_Angeles"),
        ("IST", "Asia/Kolkata"),
        ("MIT", "Pacific/Apia"),
        ("EST", "-05:00"),
        ("MST", "-07:00"),
        ("HST", "-10:00"),
    ],
)
def test_session_time_zones_are_read_as_spark_reads_them(spark_zone: str, zone: str) -> None:
    """As Spark's DateTimeUtils.getZoneId (java.time's ZoneId.of with
    SHORT_IDS) reads ``spark.sql.session.timeZone``, named as Arrow and
    zoneinfo know it."""
    assert time_zone(spark_zone) == zone


@pytest.mark.parametrize("spark_zone", ["+19", "+18:00:01", "-08:60", "GMT+", "+8:00:0", "X", "+"])
def test_offsets_java_time_refuses_are_refused(spark_zone: str) -> None:
    with pytest.raises(arrowlog.InvalidConfigError, match="not one Spark takes"):
        time_zone(spark_zone)


def test_a_fixed_offset_with_seconds_and_zones_named_as_spark_names_them(
    log: arrowlog.ArrowLog,
) -> None:
    """Arrow takes no offset with seconds, nor 'Z' or 'PST' on a type: wall
    clocks into instants, instants into wall clocks and dates, in '-13:33:33'
    and as Spark names the zone on its instants."""
    wall = dt.datetime(2024, 1, 2, 3, 4, 5, 123456)
    offset = dt.timedelta(hours=-13, minutes=-33, seconds=-33)
    instant = (wall - offset).replace(tzinfo=dt.UTC)
    walls = pa.array([wall, None], pa.timestamp("us"))
    assert cast(log, walls, pa.timestamp("us", "UTC"), "-13:33:33").to_pylist() == [instant, None]
    for stamped in ("-13:33:33", "Z", "PST"):
        zoned = pa.array([instant, None], pa.timestamp("us", stamped))
        local = (instant.astimezone(ZoneInfo(time_zone(stamped))) if stamped == "PST"
                 else (instant + (offset if stamped != "Z" else dt.timedelta())))  # fmt: skip
        got = cast(log, zoned, pa.timestamp("us")).to_pylist()
        assert got == [local.replace(tzinfo=None), None], stamped
        days = pa.array([dt.datetime(2024, 1, 2, tzinfo=dt.UTC)], pa.timestamp("us", stamped))
        if stamped == "Z":
            assert cast(log, days, pa.date32()).to_pylist() == [dt.date(2024, 1, 2)]
        else:
            with pytest.raises(arrowlog.SchemaMismatchError, match="time of day"):
                cast(log, days, pa.date32())
        assert cast(log, zoned.slice(0, 0), pa.date32()).to_pylist() == []


def test_instants_at_a_midnight_that_occurs_twice_into_dates_are_that_date(
    log: arrowlog.ArrowLog,
) -> None:
    """Havana's clocks went back from 01:00 to 00:00 on 2024-11-03: both its
    midnights are 2024-11-03, as Spark's CAST gives; 00:30 has a time of day."""
    havana = pa.timestamp("us", "America/Havana")
    midnights = pa.array([1730606400000000, 1730610000000000], pa.int64()).cast(havana)
    assert cast(log, midnights, pa.date32()).to_pylist() == [dt.date(2024, 11, 3)] * 2
    half_past = pa.array([1730608200000000], pa.int64()).cast(havana)
    with pytest.raises(arrowlog.SchemaMismatchError, match="time of day"):
        cast(log, half_past, pa.date32())


@pytest.mark.parametrize(
    ("column", "kind"),
    [
        (pa.array([1704164645]), pa.timestamp("us", "UTC")),
        (pa.array([1704164645]), pa.timestamp("us")),
        (pa.array([19724], pa.int32()), pa.date32()),
        (pa.array([5], pa.int64()), pa.duration("us")),
        (pa.array([5], pa.int64()), pa.time64("us")),
    ],
    ids=["bigint-instant", "bigint-naive", "int-date", "bigint-duration", "bigint-time"],
)
def test_numbers_into_time_types_are_refused(
    log: arrowlog.ArrowLog, column: pa.Array[Any], kind: pa.DataType
) -> None:
    """Spark's CAST reads a number as seconds since the epoch (and has none into
    a date), Arrow's as a count of the column's units: refused."""
    with pytest.raises(arrowlog.SchemaMismatchError, match="is a number"):
        cast(log, column, kind)


def test_timestamps_into_strings_are_refused(log: arrowlog.ArrowLog) -> None:
    """Arrow's text of a timestamp is not Spark's CAST's."""
    moment = dt.datetime(2024, 1, 2, 3, 4, 5, tzinfo=dt.UTC)
    for column in (pa.array([moment], pa.timestamp("us", "Asia/Kolkata")),
                   pa.array([moment.replace(tzinfo=None)])):  # fmt: skip
        for kind in (pa.string(), pa.large_string()):
            with pytest.raises(arrowlog.SchemaMismatchError, match="Spark's CAST"):
                cast(log, column, kind)


def test_a_key_past_pythons_years_is_refused_typed(log: arrowlog.ArrowLog) -> None:
    """``send_keyed`` hashes the text of a key as Python has it; a timestamp past
    the year 9999 has none."""
    instant = pa.timestamp("us", "UTC")
    topic = log.create_topic(fresh_name(), pa.schema([pa.field("k", instant)]), partitions=3)
    batch = pa.record_batch([pa.array([253402326000000000], instant)], names=["k"])
    with pytest.raises(arrowlog.SchemaMismatchError, match="keyColumn 'k'"):
        list(route(batch, topic, "k", 0))


# --- performance --------------------------------------------------------------------


@pytest.mark.slow
def test_cast_of_100k_nested_rows_is_not_dramatically_slower_than_arrows(
    log: arrowlog.ArrowLog,
) -> None:
    """Measured: 3-6x a plain cast (a few ms) for structs and lists of structs with
    maps, sliced or not."""
    n = 100_000
    source = pa.struct(
        [("a", pa.int32()), ("s", pa.string()), ("m", pa.map_(pa.string(), pa.int32()))]
    )
    not_null_value = pa.field("value", pa.int64(), nullable=False)
    target = pa.struct(
        [
            pa.field("a", pa.int64(), nullable=False),
            pa.field("s", pa.string()),
            pa.field("m", pa.map_(pa.string(), not_null_value)),  # type: ignore[call-overload]
        ]
    )
    rows = [None if i % 10 == 0 else {"a": i, "s": str(i), "m": [("k", i)]} for i in range(n)]
    column = pa.array(rows, source)
    lists = pa.array([None if i % 7 == 0 else [rows[i]] for i in range(n)], pa.list_(source))
    cases: list[tuple[Any, pa.DataType]] = [
        (column.slice(1), target),
        (lists.slice(3), pa.list_(target)),
    ]
    for array, kind in cases:
        start = time.perf_counter()
        array.cast(_nullable(kind))
        plain = time.perf_counter() - start
        start = time.perf_counter()
        out = cast(log, array, kind)
        ours = time.perf_counter() - start
        assert ours < max(30 * plain, 0.5), (ours, plain)
        assert out.to_pylist() == array.to_pylist()


# --- byte budget --------------------------------------------------------------------


def test_within_bytes_keeps_rows_in_order_without_empty_or_oversized_slices() -> None:
    for seed in range(200):
        rng = random.Random(seed)
        sizes = [rng.choice([0, 1, 10, 100, 1000, 5000]) for _ in range(rng.randint(1, 40))]
        batch = pa.record_batch(
            [pa.array(range(len(sizes))), pa.array([b"x" * s for s in sizes], pa.binary())],
            names=["id", "b"],
        )
        budget = rng.choice([1, 64, 500, 4096, 10**6])
        slices = list(within_bytes(batch.slice(rng.randint(0, len(sizes) - 1)), budget))
        assert all(s.num_rows for s in slices)
        assert all(s.nbytes <= budget or s.num_rows == 1 for s in slices)
        ids = [i for s in slices for i in s.column(0).to_pylist()]
        assert ids == list(range(len(sizes) - len(ids), len(sizes)))


def test_segments_stay_within_max_batch_bytes_after_a_widening_cast(tmp_path: Path) -> None:
    from pyspark.sql.pandas.types import from_arrow_schema

    url = str(tmp_path / "log")
    log = arrowlog.connect(url, {"fsync": False})
    schema = pa.schema([(f"c{i}", pa.int64()) for i in range(4)])
    config = arrowlog.TopicConfig(max_batch_bytes=64 * 1024, compression=arrowlog.Compression.NONE)
    log.create_topic("t", schema, config=config)
    assert segment_budget(log.topic("t")) < 32 * 1024
    frame = pa.schema([(f"c{i}", pa.int8()) for i in range(4)])
    rng = random.Random(0)
    n = 20_000  # 80,000 bytes as int8, 640,000 as int64
    columns = [pa.array([rng.randint(-100, 100) for _ in range(n)], pa.int8()) for _ in range(4)]
    options = WriteOptions.parse(
        {"path": url, "topic": "t", "storage.fsync": "false", "rowsPerBatch": "1000000"}
    )
    writer = ArrowLogWriter(options, from_arrow_schema(frame))
    writer.commit([writer.write(iter([pa.record_batch(columns, schema=frame)]))])
    assert log.consumer().read("t", 0).num_rows == n
