"""A second attack on the Spark write path (arrowlog/spark/sink.py, the byte budget
of segments, ``conform``/``cast_column``, ``route``) and on ``not_null_violations``'s
check of map entries (arrowlog/format/topic.py). Each bug it found (segments past
max_batch_bytes, null structs with a not-null field refused, value-changing
casts at depth, the session time zone of dates, a read topic's ``_partition``)
is a test that now holds; the others document what held from the start.

Most tests run the writer as a task runs it, outside Spark (``TaskContext`` is
None, so the task's default partition is 0): fast and deterministic. The
batches they build are those Spark hands a ``DataSourceArrowWriter`` (checked
against Spark 4: timestamps in the session's time zone, a DataFrame read from
arrowlog with its metadata columns).

Origin: the second attack on the Spark sink (was tests/spark/test_sink_attack2.py)."""

from __future__ import annotations

import datetime as dt
import random
from pathlib import Path
from typing import Any

import pyarrow as pa
import pytest

import arrowlog
from arrowlog.format.topic import not_null_violations
from tests.support.stores import StoreSpec

pytest.importorskip("pyspark")

from arrowlog.spark.conform import conform
from arrowlog.spark.options import WriteOptions
from arrowlog.spark.sink import ArrowLogWriter
from arrowlog.spark.writing import within_bytes

MAP_ARRAY: Any = pa.MapArray  # the stubs have no overload for an explicit type
BLOB_FIELDS: list[pa.Field[Any]] = [pa.field("id", pa.int64()), pa.field("b", pa.binary())]
BLOBS = pa.schema(BLOB_FIELDS)


def local(tmp_path: Path) -> StoreSpec:
    return StoreSpec("local", str(tmp_path / "log"), {"fsync": False})


def make_topic(
    tmp_path: Path, schema: pa.Schema, partitions: int = 1, **config: Any
) -> tuple[StoreSpec, arrowlog.ArrowLog, arrowlog.Topic]:
    spec = local(tmp_path)
    log = spec.connect()
    log.create_topic(
        "t",
        schema,
        partitions=partitions,
        config=arrowlog.TopicConfig(**config) if config else None,
    )
    return spec, log, log.topic("t")


def task_writer(spec: StoreSpec, schema: pa.Schema, **options: str) -> ArrowLogWriter:
    """The job's writer, as the driver makes it (its schema: the DataFrame's)."""
    from pyspark.sql.pandas.types import from_arrow_schema

    parsed = WriteOptions.parse(
        {"path": spec.url, "topic": "t", "storage.fsync": "false", **options}
    )
    return ArrowLogWriter(parsed, from_arrow_schema(schema))


def write_all(w: ArrowLogWriter, batches: list[pa.RecordBatch]) -> None:
    """One task writing ``batches``, then the job's commit."""
    w.commit([w.write(iter(batches))])


def blobs(sizes: list[int], seed: int = 0) -> pa.RecordBatch:
    """Rows of incompressible bytes of the given sizes (ids 0, 1, ...)."""
    rng = random.Random(seed)
    values = [rng.randbytes(n) for n in sizes]
    return pa.record_batch(
        [pa.array(range(len(sizes))), pa.array(values, pa.binary())], schema=BLOBS
    )


def ids(log: arrowlog.ArrowLog, partition: int = 0) -> list[Any]:
    return log.consumer().read("t", partition, columns=["id"]).column("id").to_pylist()


# --- segments cut by bytes --------------------------------------------------------


def test_rows_of_almost_half_max_batch_bytes_are_written(tmp_path: Path) -> None:
    """max_batch_bytes 64 KiB (budget 32 KiB); four rows of 32,000 bytes, each far
    below the limit on its own: the writer puts two in a segment of 64,024 bytes
    of data, which encodes to 65,850 > 65,536. The same with the default 64 MiB
    and rows of 31 MiB (pictures, documents)."""
    spec, log, _topic = make_topic(tmp_path, BLOBS, max_batch_bytes=64 * 1024, compression="none")
    log.partition("t", 0).append(blobs([32_000]))  # a row fits a segment alone
    w = task_writer(spec, BLOBS)
    write_all(w, [blobs([32_000]) for _ in range(4)])
    assert ids(log) == [0, 0, 0, 0, 0]


def test_skewed_row_sizes_are_cut_within_the_budget(tmp_path: Path) -> None:
    """One Spark batch: a row of 45,000 bytes then 999 rows of 100 bytes, for a
    topic of max_batch_bytes 64 KiB. within_bytes's first slice is 68,196 bytes
    (budget 32,768): the write fails with RecordBatchTooLargeError, though the
    big row fits a segment alone. The streaming commit slices with the same
    function."""
    spec, log, _topic = make_topic(tmp_path, BLOBS, max_batch_bytes=64 * 1024, compression="none")
    batch = blobs([45_000] + [100] * 999)
    budget = 32 * 1024
    try:
        write_all(task_writer(spec, BLOBS), [batch])
    finally:
        slices = list(within_bytes(batch, budget))
        assert sum(s.num_rows for s in slices) == batch.num_rows
        assert all(s.nbytes <= budget or s.num_rows == 1 for s in slices)
    assert ids(log) == list(range(1000))


def test_small_rows_fit_a_max_batch_bytes_near_the_schemas_smallest_segment(
    tmp_path: Path,
) -> None:
    """max_batch_bytes 2048 (this schema's smallest segment is 1482 bytes, so the
    topic is accepted): a row of 50 bytes appends fine, but a task of 20 such
    rows fails with RecordBatchTooLargeError (at least 2730 bytes)."""
    spec, log, _topic = make_topic(tmp_path, BLOBS, max_batch_bytes=2048, compression="none")
    log.partition("t", 0).append(blobs([50]))
    write_all(task_writer(spec, BLOBS), [blobs([50] * 20)])
    assert ids(log) == [0, *range(20)]


def test_many_small_segments_and_a_dead_attempt_commit_every_row_once(tmp_path: Path) -> None:
    """rowsPerBatch 2, a byte budget of 2 KiB, rows routed by a partition column
    to three partitions from batches of 7 and 13 rows: sequences stay right
    across hundreds of segments, and the rows of an attempt left out of the
    commit (a failed task's) are never visible."""
    fields: list[pa.Field[Any]] = [pa.field("id", pa.int64()), pa.field("name", pa.string())]
    schema = pa.schema(fields)
    spec, log, _topic = make_topic(tmp_path, schema, partitions=3, max_batch_bytes=4096)
    frame_schema = schema.append(pa.field("partition", pa.int32()))

    def batches(lo: int, hi: int, step: int) -> list[pa.RecordBatch]:
        out = []
        for start in range(lo, hi, step):
            chunk = list(range(start, min(start + step, hi)))
            out.append(
                pa.record_batch(
                    [
                        pa.array(chunk),
                        pa.array(["x" * (i % 50) for i in chunk]),
                        pa.array([i % 3 for i in chunk], pa.int32()),
                    ],
                    schema=frame_schema,
                )
            )
        return out

    w = task_writer(spec, frame_schema, rowsPerBatch="2")
    first = w.write(iter(batches(0, 300, 7)))
    w.write(iter(batches(0, 150, 5)))  # an attempt that failed: not committed
    second = w.write(iter(batches(300, 600, 13)))
    w.commit([first, second])
    assert first.rows == second.rows == 300
    for p in range(3):
        assert ids(log, p) == [i for i in range(600) if i % 3 == p]
    assert log.stable_offsets("t") == log.end_offsets("t")


# --- not-null checks of map entries -------------------------------------------------

X_NOT_NULL = pa.struct([pa.field("x", pa.int64(), nullable=False)])
MAP_OF_STRUCTS = pa.map_(pa.string(), pa.field("value", X_NOT_NULL))  # type: ignore[call-overload]
INNER_MAP = pa.map_(pa.string(), pa.field("value", pa.int64(), nullable=False))  # type: ignore[call-overload]
MAP_OF_MAPS = pa.map_(pa.string(), pa.field("value", INNER_MAP))  # type: ignore[call-overload]


def map_of_null_struct() -> pa.Array[Any]:
    """{'a': {x: 1}}, {'b': null}, {'c': {x: 3}}: the null struct's x is null
    underneath, as Spark's Arrow writer (and pa.array) write a null struct."""
    values = pa.StructArray.from_arrays(
        [pa.array([1, None, 3])],
        fields=list(X_NOT_NULL),
        mask=pa.array([False, True, False]),
    )
    offsets = pa.array([0, 1, 2, 3], pa.int32())
    out: pa.Array[Any] = MAP_ARRAY.from_arrays(
        offsets, pa.array(["a", "b", "c"]), values, type=MAP_OF_STRUCTS
    )
    return out


def map_of_maps() -> pa.Array[Any]:
    """{'a': {'k': 1}}, {'b': {'k': null}}, {'c': {'k': 3}}."""
    inner: Any = pa.array([[("k", 1)], [("k", None)], [("k", 3)]], pa.map_(pa.string(), pa.int64()))
    inner = MAP_ARRAY.from_arrays(inner.offsets, inner.keys, inner.items, type=INNER_MAP)
    offsets = pa.array([0, 1, 2, 3], pa.int32())
    out: pa.Array[Any] = MAP_ARRAY.from_arrays(
        offsets, pa.array(["a", "b", "c"]), inner, type=MAP_OF_MAPS
    )
    return out


def test_a_null_struct_value_in_a_map_is_accepted(tmp_path: Path) -> None:
    schema = pa.schema([pa.field("id", pa.int64()), pa.field("m", MAP_OF_STRUCTS)])
    _spec, log, _topic = make_topic(tmp_path, schema)
    batch = pa.record_batch([pa.array([0, 1, 2]), map_of_null_struct()], schema=schema)
    batch.validate(full=True)
    assert not_null_violations(schema, batch) == []
    log.partition("t", 0).append(batch)
    assert ids(log) == [0, 1, 2]


@pytest.mark.parametrize("where", ["null-in-the-rows", "null-outside-the-slice"])
def test_nulls_in_a_map_inside_a_map_are_checked_like_the_others(where: str) -> None:
    schema = pa.schema([pa.field("m", MAP_OF_MAPS)])
    if where == "null-in-the-rows":
        batch = pa.record_batch([map_of_maps()], schema=schema)
        assert not_null_violations(schema, batch) == [
            "column 'm.value.value' has 1 null(s) but the topic says not null"
        ]
    else:
        batch = pa.record_batch([map_of_maps().slice(2, 1)], schema=schema)
        assert not_null_violations(schema, batch) == []


def sliced_map_cases() -> list[Any]:
    item = pa.field("value", pa.int64(), nullable=False)
    kind = pa.map_(pa.string(), item)  # type: ignore[call-overload]
    raw: Any = pa.array([[("a", 1)], [("b", None)], [("c", 3)]], pa.map_(pa.string(), pa.int64()))
    m = MAP_ARRAY.from_arrays(raw.offsets, raw.keys, raw.items, type=kind)
    hidden = MAP_ARRAY.from_arrays(
        raw.offsets, raw.keys, raw.items, type=kind, mask=pa.array([False, True, False])
    )
    in_list = pa.ListArray.from_arrays(pa.array([0, 2, 3], pa.int32()), m)
    list_kind = pa.list_(pa.field("item", kind))
    struct_kind = pa.struct([pa.field("m", kind)])
    in_struct = pa.StructArray.from_arrays([m], fields=list(struct_kind))
    null_struct = pa.StructArray.from_arrays(
        [m], fields=list(struct_kind), mask=pa.array([False, True, False])
    )
    return [
        pytest.param(kind, m, True, id="map"),
        pytest.param(kind, m.slice(2, 1), False, id="map-sliced-clean"),
        pytest.param(kind, m.slice(1, 1), True, id="map-sliced-to-the-null"),
        pytest.param(kind, hidden, False, id="null-map-over-a-null-value"),
        pytest.param(list_kind, in_list, True, id="map-in-list"),
        pytest.param(list_kind, in_list.slice(1, 1), False, id="map-in-list-sliced-clean"),
        pytest.param(struct_kind, in_struct, True, id="map-in-struct"),
        pytest.param(struct_kind, null_struct, False, id="null-struct-over-a-null-value"),
        pytest.param(struct_kind, in_struct.slice(2, 1), False, id="map-in-struct-sliced-clean"),
    ]


@pytest.mark.parametrize("kind,array,violates", sliced_map_cases())
def test_not_null_map_values_at_depth(
    kind: pa.DataType, array: pa.Array[Any], violates: bool
) -> None:
    schema = pa.schema([pa.field("c", kind)])
    assert bool(not_null_violations(schema, pa.record_batch([array], schema=schema))) is violates


def null_struct_cases() -> list[Any]:
    """Columns whose nullable structs have a not-null field ``x``, one struct null
    with ``x`` null underneath (valid Arrow: a null parent's child may be null),
    under the Arrow types Spark hands the writer (arrays' items are ``element``)."""
    from pyspark.sql.types import ArrayType, LongType, MapType, StringType, StructField
    from pyspark.sql.types import StructType as SparkStruct

    try:
        from pyspark.sql.pandas.types import to_arrow_type
    except ImportError:  # pragma: no cover
        pytest.skip("no pyspark.sql.pandas")
    x = SparkStruct([StructField("x", LongType(), False)])
    values = pa.StructArray.from_arrays(
        [pa.array([1, None, 3])], fields=list(X_NOT_NULL), mask=pa.array([False, True, False])
    )
    offsets = pa.array([0, 1, 2, 3], pa.int32())
    spark_map = to_arrow_type(MapType(StringType(), x, True))
    spark_list = to_arrow_type(ArrayType(x, True))
    in_struct = pa.struct([pa.field("s", X_NOT_NULL)])
    return [
        pytest.param(
            MAP_OF_STRUCTS,
            MAP_ARRAY.from_arrays(offsets, pa.array(["a", "b", "c"]), values, type=spark_map),
            id="map-of-structs",
        ),
        pytest.param(
            pa.list_(pa.field("item", X_NOT_NULL)),
            pa.ListArray.from_arrays(offsets, values, type=spark_list),
            id="array-of-structs",
        ),
        pytest.param(
            in_struct, pa.StructArray.from_arrays([values], names=["s"]), id="struct-in-struct"
        ),
        pytest.param(X_NOT_NULL, values, id="struct"),
    ]


@pytest.mark.parametrize("kind,array", null_struct_cases())
def test_null_structs_with_a_not_null_field_are_written(
    tmp_path: Path, kind: pa.DataType, array: pa.Array[Any]
) -> None:
    schema = pa.schema([pa.field("id", pa.int64()), pa.field("c", kind)])
    spec, log, _topic = make_topic(tmp_path, schema)
    frame_schema = pa.schema([pa.field("id", pa.int64()), pa.field("c", array.type)])
    batch = pa.record_batch([pa.array([0, 1, 2]), array], schema=frame_schema)
    batch.validate(full=True)
    write_all(task_writer(spec, frame_schema), [batch])
    assert ids(log) == [0, 1, 2]


# --- value-changing casts ----------------------------------------------------------------


def nested_cast_cases() -> list[Any]:
    stamp = dt.datetime(2024, 1, 1, 13, 30)
    utc = pa.timestamp("us", tz="UTC")
    return [
        pytest.param(
            pa.struct([pa.field("d", pa.date32())]),
            pa.array([{"d": stamp}], pa.struct([pa.field("d", utc)])),
            id="struct-timestamp-into-date",
        ),
        pytest.param(
            pa.list_(pa.date32()),
            pa.array([[stamp]], pa.list_(utc)),
            id="list-timestamp-into-date",
        ),
        pytest.param(
            pa.struct([pa.field("f", pa.float32())]),
            pa.array([{"f": 1e300}], pa.struct([pa.field("f", pa.float64())])),
            id="struct-double-into-float",
        ),
        pytest.param(
            pa.list_(pa.float32()),
            pa.array([[1e300]], pa.list_(pa.float64())),
            id="list-double-into-float",
        ),
        pytest.param(
            pa.map_(pa.string(), pa.float32()),
            pa.array([[("a", 1e300)]], pa.map_(pa.string(), pa.float64())),
            id="map-double-into-float",
        ),
    ]


@pytest.mark.parametrize("kind,array", nested_cast_cases())
def test_value_changing_casts_inside_nested_columns_are_refused(
    tmp_path: Path, kind: pa.DataType, array: pa.Array[Any]
) -> None:
    _spec, _log, topic = make_topic(tmp_path, pa.schema([pa.field("c", kind)]))
    with pytest.raises(arrowlog.SchemaMismatchError):
        conform(pa.record_batch([array], names=["c"]), topic)


def test_a_timestamp_into_a_date_column_follows_the_session_time_zone(tmp_path: Path) -> None:
    """Spark hands timestamps as timestamp[us, tz=<session time zone>] (checked
    with spark.sql.session.timeZone=Asia/Tokyo: the write of
    timestamp'2024-01-02 00:00:00' into a date column fails with 'a value has a
    time of day', that of timestamp'2024-01-02 09:00:00' stores 2024-01-02)."""
    schema = pa.schema([pa.field("d", pa.date32())])
    _spec, _log, topic = make_topic(tmp_path, schema)
    tokyo = pa.timestamp("us", tz="Asia/Tokyo")

    def at(day: int, hour: int) -> pa.RecordBatch:
        """A Spark batch of the instant 2024-01-<day> <hour>:00 UTC, in Tokyo."""
        utc = dt.datetime(2024, 1, day, hour, tzinfo=dt.UTC)
        return pa.record_batch([pa.array([utc], tokyo)], names=["d"])

    midnight = at(1, 15)  # 2024-01-02 00:00 in Tokyo
    assert conform(midnight, topic).column(0).to_pylist() == [dt.date(2024, 1, 2)]
    with pytest.raises(arrowlog.SchemaMismatchError, match="time of day"):
        conform(at(2, 0), topic)  # 2024-01-02 09:00 in Tokyo


# --- a DataFrame read from arrowlog, written back --------------------------------------


def test_rows_read_from_a_topic_with_a_partition_column_keep_their_partitions(
    tmp_path: Path,
) -> None:
    """A topic with a user column ``partition``: a DataFrame read from it has
    columns id, partition, topic, _partition, offset, timestamp (checked with
    Spark). Written to a topic of the same schema, rows of topic without such a
    column keep their partitions; these all land in the task's partition 0."""
    fields: list[pa.Field[Any]] = [pa.field("id", pa.int64()), pa.field("partition", pa.string())]
    schema = pa.schema(fields)
    spec, log, _topic = make_topic(tmp_path, schema, partitions=3)
    read = pa.schema(
        [
            *fields,
            pa.field("topic", pa.string()),
            pa.field("_partition", pa.int32()),
            pa.field("offset", pa.int64()),
            pa.field("timestamp", pa.timestamp("us", tz="UTC")),
        ]
    )
    batch = pa.record_batch(
        [
            pa.array([0, 1, 2]),
            pa.array(["x", "y", "z"]),
            pa.array(["src"] * 3),
            pa.array([0, 1, 2], pa.int32()),
            pa.array([0, 0, 0]),
            pa.array([0, 0, 0], pa.timestamp("us", tz="UTC")),
        ],
        schema=read,
    )
    write_all(task_writer(spec, read), [batch])
    assert {p: ids(log, p) for p in range(3)} == {0: [0], 1: [1], 2: [2]}


def test_metadata_columns_under_prefixed_names_are_dropped_and_user_ones_kept(
    tmp_path: Path,
) -> None:
    """A topic with user columns topic, offset and timestamp (of the metadata
    kinds): a read's ``_topic``, ``_offset``, ``_timestamp`` are dropped, the
    user's columns written as they are, an int32 into int64 widened."""
    utc = pa.timestamp("us", tz="UTC")
    fields: list[pa.Field[Any]] = [
        pa.field("id", pa.int64()),
        pa.field("topic", pa.string()),
        pa.field("offset", pa.int64()),
        pa.field("timestamp", utc),
    ]
    schema = pa.schema(fields)
    spec, log, _topic = make_topic(tmp_path, schema, partitions=2)
    read = pa.schema(
        [
            pa.field("id", pa.int32()),
            *fields[1:],
            pa.field("_topic", pa.string()),
            pa.field("partition", pa.int32()),
            pa.field("_offset", pa.int64()),
            pa.field("_timestamp", utc),
        ]
    )
    batch = pa.record_batch(
        [
            pa.array([5, 6], pa.int32()),
            pa.array(["mine", "mine"]),
            pa.array([70, 71]),
            pa.array([1, 2], utc),
            pa.array(["src", "src"]),
            pa.array([1, 1], pa.int32()),
            pa.array([0, 1]),
            pa.array([9, 9], utc),
        ],
        schema=read,
    )
    write_all(task_writer(spec, read), [batch])
    table = log.consumer().read("t", 1)
    assert table.select(["id", "topic", "offset"]).to_pylist() == [
        {"id": 5, "topic": "mine", "offset": 70},
        {"id": 6, "topic": "mine", "offset": 71},
    ]
    assert ids(log, 0) == []
