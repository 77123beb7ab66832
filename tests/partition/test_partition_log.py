"""The partition log on every backend: appends, expected offsets, reads,
checkpoints, and bad input that must write nothing."""

from __future__ import annotations

import functools
import operator
import re
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pyarrow as pa
import pytest

import arrowlog
import arrowlog.format.checkpoint
from arrowlog import ArrowLog, Compression, TopicConfig
from arrowlog.format.segment import WriterIdentity, segment_size_floor
from arrowlog.format.topic import Topic, topic_key
from arrowlog.storage import Store
from arrowlog.testing.scripted import ScriptedStore
from tests.support.stores import shared_store_spec_on_clouds_too, store_spec_on_clouds_too  # noqa: F401  (fixtures: these schedules run on the clouds' emulators too)

FIELDS: list[pa.Field[Any]] = [
    pa.field("id", pa.int64(), nullable=False),
    pa.field("name", pa.string()),
]
SCHEMA = pa.schema(FIELDS)


def batch(start: int, rows: int) -> pa.RecordBatch:
    return pa.record_batch(
        {
            "id": list(range(start, start + rows)),
            "name": [f"n{i}" for i in range(start, start + rows)],
        },
        schema=SCHEMA,
    )


def snapshot(store: Store) -> dict[str, int]:
    return {o.key: o.size for o in store.list("")}


@pytest.fixture
def log(make_log: Callable[..., ArrowLog]) -> ArrowLog:
    log = make_log()
    log.create_topic("events", SCHEMA, partitions=3, config=TopicConfig(checkpoint_interval=4))
    return log


# --- topics ---------------------------------------------------------------------


def test_topics_are_created_once_listed_and_described(
    log: ArrowLog, make_log: Callable[..., ArrowLog]
) -> None:
    with pytest.raises(arrowlog.TopicExistsError):
        log.create_topic("events", SCHEMA)
    other = make_log()
    other.create_topic("clicks", pa.schema([("x", pa.int8())]))
    assert sorted(other.list_topics()) == ["clicks", "events"]
    topic = other.topic("events")
    assert topic.schema.equals(SCHEMA) and topic.partitions == 3
    assert topic.config.checkpoint_interval == 4
    log.append("events", batch(0, 5), partition=1)
    desc = other.describe_topic("events")
    assert [(p.partition, p.high_watermark, p.segments) for p in desc.partitions] == [
        (0, 0, 0),
        (1, 5, 1),
        (2, 0, 0),
    ]


def test_topic_lookups_retry_transient_store_failures(log: ArrowLog) -> None:
    scripted = ScriptedStore(log.store)
    fast = arrowlog.LogConfig(retry=arrowlog.RetryPolicy(initial_backoff=0.001, deadline=5))
    other = arrowlog.connect(scripted, config=fast)
    scripted.throttle("get", "_arrowlog/topics/events.json", times=3)
    scripted.throttle("list", "_arrowlog/topics/", times=3)
    assert other.topic("events").partitions == 3
    assert other.list_topics() == ["events"]
    assert scripted.history.count(("get", "_arrowlog/topics/events.json")) == 4


@pytest.mark.parametrize(
    "name",
    ["", ".", "..", "a/b", "../x", "_arrowlog", "_private", "-x", "a b", "é", "a" * 250, "x\n"],
)
def test_bad_topic_names_are_refused_and_write_nothing(log: ArrowLog, name: str) -> None:
    before = snapshot(log.store)
    with pytest.raises(arrowlog.InvalidNameError):
        log.create_topic(name, SCHEMA)
    assert snapshot(log.store) == before


@pytest.mark.parametrize("partitions", [0, -1, 10_001, 1.5, True])
def test_bad_partition_counts_are_refused(log: ArrowLog, partitions: object) -> None:
    before = snapshot(log.store)
    with pytest.raises(arrowlog.InvalidConfigError):
        log.create_topic("t2", SCHEMA, partitions)  # type: ignore[arg-type]
    assert snapshot(log.store) == before


@pytest.mark.parametrize(
    "field,value",
    [
        *[
            ("max_batch_bytes", v)
            for v in (0, -1, 1023, 5 * 1024**3 + 1, True, 4096.0, "4096", None)
        ],
        *[("checkpoint_interval", v) for v in (0, -1, 901, True, 2.5, "10")],
        *[("max_transaction_timeout_ms", v) for v in (0, 999, True, 60_000.5, None)],
    ],
)
def test_nonsense_topic_configs_are_refused(field: str, value: object) -> None:
    # a float checkpoint_interval used to pass, then fail appends after their segment
    # was written; a string failed with a TypeError. (A config is refused before
    # create_topic could write anything.)
    with pytest.raises(arrowlog.InvalidConfigError, match=field):
        TopicConfig(**{field: value})  # type: ignore[arg-type]


@pytest.mark.parametrize(
    "make",
    [
        lambda: arrowlog.LogConfig(read_ahead=True),
        lambda: arrowlog.LogConfig(read_ahead=2.0),  # type: ignore[arg-type]
        lambda: arrowlog.LogConfig(retry=None),  # type: ignore[arg-type]
        lambda: arrowlog.RetryPolicy(deadline="60"),  # type: ignore[arg-type]
        lambda: arrowlog.RetryPolicy(initial_backoff=True),
        lambda: arrowlog.RetryPolicy(max_backoff=float("nan")),
    ],
)
def test_nonsense_client_configs_are_refused(make: Callable[[], object]) -> None:
    with pytest.raises(arrowlog.InvalidConfigError):
        make()


TAG = "arrowlog-crc32c:--------"


@pytest.mark.parametrize(
    "schema,message",
    [
        (pa.schema([("a", pa.int64()), ("b", pa.int8()), ("a", pa.int64())]), "named 'a'"),
        (pa.schema([("s", pa.struct([("x", pa.int8()), ("x", pa.int8())]))]), "named 's.x'"),
        (pa.schema([("a", pa.int8())], metadata={"arrowlog.header": "{}"}), "'arrowlog.header'"),
        (pa.schema([("a", pa.int8())], metadata={"arrowlog.mine": ""}), "'arrowlog.mine' is res"),
        (pa.schema([(TAG, pa.int8())]), f"field '{TAG}' contains 'arrowlog-crc32c:'"),
        (pa.schema([("s", pa.struct([(TAG, pa.int8())]))]), "field 's' contains"),
        (pa.schema([pa.field("a", pa.int8(), metadata={"k": TAG})]), "field 'a' contains"),
        (pa.schema([("t", pa.timestamp("ms", tz=TAG))]), "field 't' contains"),
        (pa.schema([("a", pa.int8())], metadata={"note": TAG}), "the schema metadata contains"),
    ],
)
def test_schemas_that_appends_would_trip_on_are_refused_at_create(
    log: ArrowLog, schema: pa.Schema, message: str
) -> None:
    before = snapshot(log.store)
    with pytest.raises(arrowlog.InvalidConfigError, match=message):
        log.create_topic("bad", schema)
    assert snapshot(log.store) == before


def test_a_stored_topic_is_loaded_without_the_rules_for_new_ones(log: ArrowLog) -> None:
    # What the rule at create prevents: before it, a topic with the checksum tag in
    # a field name was accepted, and then every append failed as a corrupt segment.
    schema = pa.schema([(TAG, pa.int8())])
    with pytest.raises(arrowlog.InvalidConfigError, match="checksum tag"):
        log.create_topic("tagged", schema)
    stored = Topic(name="tagged", schema=schema, partitions=1, new=False)
    log.store.put_if_absent(topic_key("tagged"), stored.to_json())
    assert log.topic("tagged").schema.equals(schema)  # stored topics stay readable
    with pytest.raises(arrowlog.CorruptSegmentError, match="checksum field"):
        log.append("tagged", pa.record_batch([pa.array([1], pa.int8())], schema=schema))


def test_a_batch_s_own_metadata_cannot_collide_with_the_header(log: ArrowLog) -> None:
    tagged = batch(0, 2).replace_schema_metadata({"arrowlog.crc32c": TAG, "arrowlog.header": "x"})
    log.append("events", tagged)  # appended under the topic's schema
    assert log.read("events").equals(pa.Table.from_batches([batch(0, 2)]))


def test_unknown_topics_and_partitions(log: ArrowLog) -> None:
    with pytest.raises(arrowlog.UnknownTopicOrPartitionError, match="unknown topic"):
        log.append("nope", batch(0, 1))
    for p in (3, -1):
        with pytest.raises(arrowlog.UnknownTopicOrPartitionError, match=r"partitions 0\.\.2"):
            log.append("events", batch(0, 1), partition=p)


# --- bad batches ----------------------------------------------------------------


@pytest.mark.parametrize(
    "bad",
    [
        pa.record_batch({"id": [1], "name": ["a"]}),  # id nullable, topic says not null
        pa.record_batch({"id": pa.array([1], pa.int32()), "name": ["a"]}),
        pa.record_batch({"name": ["a"], "id": pa.array([1], pa.int64())}),
        pa.record_batch({"id": pa.array([1], pa.int64())}),
        pa.record_batch(
            [pa.array([1]), pa.array(["a"]), pa.array([2])], names=["id", "name", "extra"]
        ),
        pa.record_batch(
            [pa.array([1]), pa.array(["a"]), pa.array(["b"])], names=["id", "name", "name"]
        ),
    ],
)
def test_a_batch_of_another_schema_is_refused_and_writes_nothing(
    log: ArrowLog, bad: pa.RecordBatch
) -> None:
    before = snapshot(log.store)
    with pytest.raises(arrowlog.SchemaMismatchError, match="events"):
        log.append("events", bad)
    assert snapshot(log.store) == before


def test_empty_oversize_and_non_arrow_batches_are_refused(
    make_log: Callable[..., ArrowLog],
) -> None:
    log = make_log()
    # plain segments: the bound below is on the uncompressed size (compressed
    # topics: tests/format/test_compression.py)
    log.create_topic(
        "small", SCHEMA, config=TopicConfig(max_batch_bytes=4096, compression=Compression.NONE)
    )
    before = snapshot(log.store)
    with pytest.raises(arrowlog.InvalidBatchError, match="empty"):
        log.append("small", batch(0, 0))
    with pytest.raises(arrowlog.InvalidBatchError, match="empty"):
        log.append("small", pa.Table.from_batches([], schema=SCHEMA))
    with pytest.raises(arrowlog.RecordBatchTooLargeError, match="max_batch_bytes"):
        log.append("small", batch(0, 2000))
    with pytest.raises(arrowlog.InvalidBatchError):
        log.append("small", [{"id": 1, "name": "a"}])  # type: ignore[arg-type]
    assert snapshot(log.store) == before
    assert log.append("small", batch(0, 10)).base_offset == 0


NESTED_FIELDS: list[pa.Field[Any]] = [
    pa.field("s", pa.struct([pa.field("x", pa.int64(), nullable=False)])),
    pa.field("l", pa.list_(pa.field("item", pa.int64(), nullable=False))),
]
NESTED = pa.schema(NESTED_FIELDS)


def nested(s: list[Any], l: list[Any]) -> pa.RecordBatch:  # noqa: E741
    return pa.RecordBatch.from_arrays(
        [pa.array(s, NESTED.field("s").type), pa.array(l, NESTED.field("l").type)], schema=NESTED
    )


def ids(values: list[int | None]) -> pa.RecordBatch:
    return pa.RecordBatch.from_arrays(
        [pa.array(values), pa.array(["a"] * len(values))], schema=SCHEMA
    )


@pytest.mark.parametrize(
    "topic,bad,message",
    [
        ("events", ids([1, None, None]), "column 'id' has 2 null"),
        ("nested", nested([{"x": 1}, {"x": None}], [[1], [2]]), "column 's.x' has 1 null"),
        ("nested", nested([{"x": 1}, None], [[1], [2, None]]), "column 'l.item' has 1 null"),
    ],
)
def test_nulls_under_a_not_null_field_are_refused_and_write_nothing(
    log: ArrowLog, topic: str, bad: pa.RecordBatch, message: str
) -> None:
    # the schemas are equal; only the data breaks the topic's not-null promise
    log.create_topic("nested", NESTED)
    assert bad.schema.equals(log.topic(topic).schema)
    before = snapshot(log.store)
    for data in (bad, pa.Table.from_batches([bad])):
        with pytest.raises(arrowlog.SchemaMismatchError, match=message):
            log.append(topic, data)
    assert snapshot(log.store) == before


@pytest.mark.slow
def test_a_table_that_does_not_fit_one_record_batch_is_refused_not_cut(tmp_path: Path) -> None:
    """Two chunks of 1.1 GiB of binary: combined, the column passes 2 GiB (its
    offsets are 32-bit) and stays in two chunks. The append is refused whole;
    taking the first chunk would drop the second's rows without a word. (One
    store: the check comes before any request, and each run takes 4 GiB.)"""
    log = arrowlog.connect(str(tmp_path / "log"), {"fsync": False})
    schema = pa.schema([pa.field("blob", pa.binary())])
    log.create_topic("blobs", schema, config=TopicConfig(max_batch_bytes=5 * 1024**3))
    chunk = pa.record_batch([pa.array([b"x" * (1100 * 1024 * 1024)], pa.binary())], schema=schema)
    before = snapshot(log.store)
    with pytest.raises(arrowlog.RecordBatchTooLargeError, match="do not fit one record batch"):
        log.append("blobs", pa.Table.from_batches([chunk, chunk]))
    assert snapshot(log.store) == before


def test_nulls_in_a_not_null_map_value_are_refused_within_the_slice(log: ArrowLog) -> None:
    """A map is a list of key-value structs: its values are checked like a
    list's items, only those of non-null maps inside the batch's slice."""
    kind = pa.map_(pa.string(), pa.field("value", pa.int64(), nullable=False))  # type: ignore[call-overload]
    schema = pa.schema([pa.field("m", kind)])
    log.create_topic("maps", schema)
    loose = pa.array([[("a", 1)], None, [("b", None), ("c", 3)], [("d", 4)]],
                     pa.map_(pa.string(), pa.int64()))  # fmt: skip
    bad = pa.RecordBatch.from_arrays([loose.cast(kind)], schema=schema)  # the cast checks nothing
    before = snapshot(log.store)
    with pytest.raises(arrowlog.SchemaMismatchError, match=r"column 'm\.value' has 1 null"):
        log.append("maps", bad)
    assert snapshot(log.store) == before
    log.append("maps", bad.slice(0, 2))  # a null map holds no values
    log.append("maps", bad.slice(3))
    assert log.read("maps").num_rows == 3


def test_nulls_allowed_by_the_schema_are_appended(log: ArrowLog) -> None:
    log.create_topic("nested", NESTED)
    # a null struct may hide a null child; a null list has no items; a null outside
    # the slice that is appended is not in the batch
    hidden = pa.StructArray.from_arrays(
        [pa.array([None, 1])], fields=list(NESTED.field("s").type), mask=pa.array([True, False])
    )
    assert hidden.field(0).null_count == 1
    ok = pa.RecordBatch.from_arrays(
        [hidden, pa.array([None, [1]], NESTED.field("l").type)], schema=NESTED
    )
    log.append("nested", ok)
    log.append("events", ids([None, 1, 2]).slice(1))
    log.append("nested", nested([{"x": 1}, {"x": None}], [[1], [None]]).slice(0, 1))
    assert log.read("nested").num_rows == 3 and log.read("events").num_rows == 2


def test_an_oversize_batch_is_refused_before_a_transaction_writes_anything(
    make_log: Callable[..., ArrowLog],
) -> None:
    log = make_log()
    # plain segments: the bound below is on the uncompressed size (compressed
    # topics: tests/format/test_compression.py)
    log.create_topic(
        "small", SCHEMA, config=TopicConfig(max_batch_bytes=4096, compression=Compression.NONE)
    )
    producer = log.producer(transactional_id="big")
    producer.init_transactions()
    producer.begin_transaction()
    before = snapshot(log.store)
    with pytest.raises(arrowlog.RecordBatchTooLargeError, match="at least"):
        producer.send("small", batch(0, 2000), partition=0)
    assert snapshot(log.store) == before  # not even the partition's registration


def test_a_batch_just_over_the_limit_is_refused_before_a_transaction_writes_anything(
    make_log: Callable[..., ArrowLog],
) -> None:
    """The cheap size check is a lower bound: a batch whose real segment is a
    few bytes over the limit passes it. A transaction still refuses it before
    registering the partition."""
    log = make_log()
    # plain segments: the bound below is on the uncompressed size (compressed
    # topics: tests/format/test_compression.py)
    log.create_topic(
        "small", SCHEMA, config=TopicConfig(max_batch_bytes=4096, compression=Compression.NONE)
    )
    rows = max(n for n in range(1, 300) if segment_size_floor(batch(0, n)) <= 4096)
    log.partition("small", 0).prepare_batch(batch(0, rows))  # the floor lets it through
    # a long transactional id: the real header is a few hundred bytes longer
    producer = log.producer(transactional_id="big-" + "x" * 200)
    producer.init_transactions()
    producer.begin_transaction()
    before = snapshot(log.store)
    with pytest.raises(arrowlog.RecordBatchTooLargeError, match="over the topic"):
        producer.send("small", batch(0, rows), partition=0)
    assert snapshot(log.store) == before


@pytest.mark.parametrize("columns,max_batch_bytes", [(1, 1024), (60, 8192)])
def test_max_batch_bytes_below_the_smallest_segment_is_refused_at_create(
    log: ArrowLog, columns: int, max_batch_bytes: int
) -> None:
    schema = pa.schema([(f"c{i}", pa.int64()) for i in range(columns)])
    before = snapshot(log.store)
    with pytest.raises(arrowlog.InvalidConfigError, match=r"is below \d+, the size") as e:
        log.create_topic("t", schema, config=TopicConfig(max_batch_bytes=max_batch_bytes))
    assert snapshot(log.store) == before
    smallest = int(re.search(r"below (\d+)", str(e.value)).group(1))  # type: ignore[union-attr]
    log.create_topic("t", schema, config=TopicConfig(max_batch_bytes=smallest))
    one_row = pa.RecordBatch.from_pylist([dict.fromkeys(schema.names, 0)], schema=schema)
    with pytest.raises(arrowlog.RecordBatchTooLargeError):
        log.append("t", one_row)  # the minimum is a floor: no batch is smaller
    assert set(snapshot(log.store)) == {*before, topic_key("t")}


def test_a_table_is_appended_as_one_segment(log: ArrowLog) -> None:
    table = pa.Table.from_batches([batch(0, 3), batch(3, 4)])
    result = log.append("events", table)
    assert (result.base_offset, result.record_count) == (0, 7)
    assert len(log.partition("events", 0).segments()) == 1
    assert log.read("events").equals(table.combine_chunks())


# --- appends and expected offsets -----------------------------------------------


def test_appends_get_contiguous_offsets(log: ArrowLog) -> None:
    results = [log.append("events", batch(i * 10, 1 + i % 3)) for i in range(10)]
    offset = 0
    for r in results:
        assert r.base_offset == offset
        offset = r.next_offset
    assert log.end_offsets("events") == {0: offset, 1: 0, 2: 0}


def test_expected_offset_appends_land_exactly_there(log: ArrowLog) -> None:
    offset = 0
    for _i in range(6):
        r = log.append("events", batch(offset, 3), expected_offset=offset, partition=2)
        assert r.base_offset == offset
        offset = r.next_offset
    assert log.read("events", 2)["id"].to_pylist() == list(range(18))


@pytest.mark.parametrize("expected", [8, 100, 3, 0, 4, 5, -1])
def test_a_wrong_expected_offset_raises_and_changes_nothing(log: ArrowLog, expected: int) -> None:
    # The log holds [0, 3) and [3, 6): 8 and 100 are ahead of the end, 3 and 0 are
    # behind it at segment boundaries, 4 and 5 are inside a segment.
    log.append("events", batch(0, 3))
    log.append("events", batch(3, 3))
    before = snapshot(log.store)
    with pytest.raises(arrowlog.OffsetMismatchError) as info:
        log.append("events", batch(99, 2), expected_offset=expected)
    assert info.value.log_end_offset == 6
    assert snapshot(log.store) == before
    assert log.read("events")["id"].to_pylist() == list(range(6))


def test_a_stale_writer_appends_at_the_real_end_or_gets_a_mismatch(
    log: ArrowLog, make_log: Callable[..., ArrowLog]
) -> None:
    stale = make_log()
    assert stale.end_offsets("events")[0] == 0  # opens partition 0 at end 0
    log.append("events", batch(0, 4))
    with pytest.raises(arrowlog.OffsetMismatchError) as info:
        stale.append("events", batch(100, 1), expected_offset=0)
    assert info.value.log_end_offset == 4
    stale_too = make_log()
    stale_too.end_offsets("events")
    log.append("events", batch(4, 2))
    assert (
        stale_too.append("events", batch(6, 1)).base_offset == 6
    )  # lost the race, retried at the end
    assert log.read("events")["id"].to_pylist() == list(range(7))


# --- reads ----------------------------------------------------------------------


def test_reads_of_any_range_across_segments_and_checkpoints(
    log: ArrowLog, make_log: Callable[..., ArrowLog]
) -> None:
    sizes = [1, 4, 2, 7, 3, 1, 5, 2, 6, 1, 3, 2, 4, 1]  # 14 segments, 3 checkpoints of 4
    offset = 0
    for n in sizes:
        log.append("events", batch(offset, n))
        offset += n
    total = offset
    fresh = make_log()
    for start, end in [
        (0, total),
        (0, 1),
        (5, 6),
        (4, 20),
        (13, 40),
        (total - 1, total),
        (7, 7),
        (0, None),
        (30, None),
    ]:
        want = list(range(start, total if end is None else end))
        for reader in (log, fresh):
            assert reader.read("events", 0, start, end)["id"].to_pylist() == want
            streamed = [b["id"].to_pylist() for b in reader.iter_batches("events", 0, start, end)]
            assert functools.reduce(operator.iadd, streamed, []) == want
    assert fresh.read("events", 0).num_rows == total


@pytest.mark.parametrize("start,end", [(-1, 3), (0, 99), (5, 3), (20, 21)])
def test_reads_outside_the_log_raise(log: ArrowLog, start: int, end: int) -> None:
    log.append("events", batch(0, 10))
    with pytest.raises(arrowlog.OffsetOutOfRangeError):
        log.read("events", 0, start, end)


def test_a_corrupt_segment_raises_naming_the_object(
    log: ArrowLog, make_log: Callable[..., ArrowLog]
) -> None:
    log.append("events", batch(0, 3))
    log.append("events", batch(3, 3))
    key = "events/0/segments/00000000000000000003.arrow"
    data = bytearray(log.store.get(key))
    data[len(data) // 2] ^= 0x10
    log.store.delete(key)
    log.store.put_if_absent(key, bytes(data))
    with pytest.raises(arrowlog.CorruptSegmentError, match=key):
        make_log().read("events", 0, 0, 6)
    assert make_log().read("events", 0, 0, 3).num_rows == 3


def test_a_deleted_segment_inside_a_checkpoint_window_is_a_typed_error_naming_it(
    log: ArrowLog, make_log: Callable[..., ArrowLog]
) -> None:
    for i in range(6):
        log.append("events", batch(i * 2, 2))  # a checkpoint covers segments 0..3
    key = "events/0/segments/00000000000000000002.arrow"
    log.store.delete(key)
    for reader in (log, make_log()):
        with pytest.raises(arrowlog.SegmentNotFoundError, match=key) as info:
            reader.read("events", 0)
        assert isinstance(info.value, arrowlog.CorruptSegmentError)
        assert info.value.key == key and not info.value.retriable
        assert reader.read("events", 0, 4, 12).num_rows == 8  # the rest is readable


def test_a_truncated_last_segment_is_not_trusted_on_open(
    log: ArrowLog, make_log: Callable[..., ArrowLog]
) -> None:
    log.append("events", batch(0, 3))
    key = "events/0/segments/00000000000000000000.arrow"
    data = log.store.get(key)
    log.store.delete(key)
    log.store.put_if_absent(key, bytes(data[:40]))
    with pytest.raises(arrowlog.CorruptSegmentError, match=key):
        make_log().end_offsets("events")


# --- checkpoints and request counts ---------------------------------------------


def test_checkpoints_are_written_every_interval(log: ArrowLog) -> None:
    for i in range(9):
        log.append("events", batch(i * 2, 2))
    keys = [o.key for o in log.store.list("events/0/checkpoints/")]
    assert len(keys) == 2  # windows [0, 8) and [8, 16); the 9th segment is tail
    assert "events/0/checkpoints/99999999999999999999.json" in keys


def test_a_checkpoint_with_a_flipped_digit_is_never_trusted(
    log: ArrowLog, make_log: Callable[..., ArrowLog]
) -> None:
    for i in range(5):
        log.append("events", batch(i * 2, 2))
    key = "events/0/checkpoints/99999999999999999999.json"
    raw = bytes(log.store.get(key))
    assert b'"end":8' in raw
    log.store.delete(key)
    log.store.put_if_absent(key, raw.replace(b'"end":8', b'"end":9'))
    with pytest.warns(RuntimeWarning, match=f"unusable checkpoint: {key}: checksum mismatch"):
        reader = make_log()
        assert reader.end_offsets("events")[0] == 10  # from the segments, not the checkpoint
    assert reader.read("events", 0)["id"].to_pylist() == list(range(10))


def test_a_corrupt_topic_config_is_reported(
    log: ArrowLog, make_log: Callable[..., ArrowLog]
) -> None:
    key = "_arrowlog/topics/events.json"
    raw = bytes(log.store.get(key))
    log.store.delete(key)
    log.store.put_if_absent(key, raw.replace(b'"partitions":3', b'"partitions":4'))
    with pytest.raises(arrowlog.CorruptObjectError, match=r"events\.json: checksum mismatch"):
        make_log().topic("events")


def test_the_writer_identity_is_stored_in_each_segment(log: ArrowLog) -> None:
    who = WriterIdentity(
        producer_id=42,
        producer_epoch=3,
        base_sequence=0,
        transactional=True,
        transactional_id="etl.0",
    )
    log.partition("events", 0).append(batch(0, 2), identity=who)
    log.append("events", batch(2, 1))
    headers = [h for h, _ in log.partition("events", 0).iter_segments()]
    assert headers[0].identity == who
    assert headers[1].identity == WriterIdentity()
    assert headers[0].timestamp_ms <= headers[1].timestamp_ms


@pytest.mark.parametrize("read_ahead", [1, 3, 8])
def test_streaming_reads_in_parallel_keep_order_and_can_stop_early(
    log: ArrowLog, make_log: Callable[..., ArrowLog], read_ahead: int
) -> None:
    for i in range(20):
        log.append("events", batch(i * 3, 3))
    reader = make_log(config=arrowlog.LogConfig(read_ahead=read_ahead))
    ids = [v for b in reader.iter_batches("events", 0, 4, 50) for v in b["id"].to_pylist()]
    assert ids == list(range(4, 50))
    stream = reader.iter_batches("events", 0)
    assert next(stream)["id"].to_pylist() == [0, 1, 2]
    stream.close()  # abandons the read-ahead without leaking or failing


def test_streaming_a_long_range_keeps_memory_flat(tmp_path: Path) -> None:
    # The local store reads into Arrow's memory pool, so the pool's allocation is
    # what a streaming reader holds.
    log = arrowlog.connect(str(tmp_path), {"fsync": False})
    # plain: a segment's size is what its batch holds in memory
    log.create_topic("big", SCHEMA, config=TopicConfig(compression=Compression.NONE))
    rows = 20_000  # about 400 KB per segment
    for i in range(60):
        log.append("big", batch(i * rows, rows))
    segment = max(ref.size for ref in log.partition("big", 0).segments())
    base = pa.total_allocated_bytes()
    peak = 0
    seen = 0
    for b in arrowlog.connect(str(tmp_path)).iter_batches("big", 0):
        seen += b.num_rows
        peak = max(peak, pa.total_allocated_bytes() - base)
        del b
    assert seen == 60 * rows
    assert peak < 3 * segment, f"streaming held {peak} bytes; one segment is {segment}"


def test_a_checkpoint_that_cannot_be_written_never_fails_an_append(log: ArrowLog) -> None:
    topic = log.create_topic("cp", SCHEMA, config=TopicConfig(checkpoint_interval=2))

    def coordinator_down(txn: object) -> arrowlog.format.checkpoint.Decision:
        raise arrowlog.TransientStoreError("coordinator unreachable", maybe_applied=False)

    part = arrowlog.PartitionLog(log.store, topic, 0, log.config, decide=coordinator_down)
    txn = WriterIdentity(producer_id=5, producer_epoch=0, base_sequence=0, transactional=True,
                         transactional_id="t")  # fmt: skip
    part.append(batch(0, 1), identity=txn)  # an open transaction: the checkpoint asks about it
    assert part.append(batch(1, 1)).base_offset == 1  # the window is complete, the append stands
    assert list(log.store.list("cp/0/checkpoints/")) == []
    part._shared.decide = lambda t: arrowlog.format.checkpoint.Decision.UNDECIDED
    part.append(batch(2, 1))
    assert len(list(log.store.list("cp/0/checkpoints/"))) == 1


def test_a_long_lived_reader_holds_no_more_than_a_window_while_others_checkpoint(
    log: ArrowLog, make_log: Callable[..., ArrowLog]
) -> None:
    """A client that only reads writes no checkpoint; the writers do. Its
    partition object, kept for 20 windows of appends and asked after each
    one, starts its tail after the windows whose checkpoints it finds, as a
    client opening then would: the segment summaries it holds stay below one
    window (4), not every segment listed since it opened (they grew to 80:
    an attack found it, with compaction planned only up to where the object
    opened); its state, summaries and records are a fresh client's."""
    reader = make_log().partition("events", 0)
    reader.end_offset()  # opens on an empty partition
    idem = log.producer()
    held = []
    for i in range(80):
        if i % 3:
            log.append("events", batch(i, 1))
        else:
            idem.send("events", batch(i, 1), partition=0)
            idem.flush()
        end, state = reader.state()
        assert end == i + 1
        held.append(len(reader._summaries))
    assert max(held) < 4, held
    fresh = make_log().partition("events", 0)
    assert (end, state) == fresh.state()
    assert reader.summaries() == fresh.summaries()
    assert reader.read()["id"].to_pylist() == list(range(80))


@pytest.mark.parametrize("rows", [3, 350_000])
def test_threads_keep_fetching_behind_a_slow_segment_within_a_memory_budget(
    tmp_path: Path, rows: int
) -> None:
    """While the first segment's GET hangs, the other thread fetches on: up to
    four times ``read_ahead`` segments may wait for the reader, while they hold
    at most QUEUED_BYTES beyond the first ``read_ahead`` (large segments: fewer)."""
    from arrowlog.partition.reads import QUEUED_BYTES
    from arrowlog.storage.local import LocalStore
    from arrowlog.storage.wrappers import CountingStore

    inner = LocalStore(tmp_path, fsync=False)
    log = arrowlog.connect(inner)
    log.create_topic("q", SCHEMA, config=TopicConfig(compression=Compression.NONE))
    count = 20 if rows < 1000 else 10
    for i in range(count):
        log.append("q", batch(i * rows, rows))
    sizes = [ref.size for ref in log.partition("q", 0).segments()]
    ahead, allowed = 2, 2
    while allowed < 4 * ahead and sum(sizes[: allowed + 1]) <= QUEUED_BYTES:
        allowed += 1
    # small segments: four times read_ahead; large ones: the budget binds first
    assert allowed == 8 if rows < 1000 else 2 < allowed < 8
    counting = CountingStore(inner)
    scripted = ScriptedStore(counting)
    reader = arrowlog.connect(scripted, config=arrowlog.LogConfig(read_ahead=ahead))
    part = reader.partition("q", 0)
    part.end_offset()
    first = part.segments()[0].key
    gate = scripted.hold("get", first)
    counting.reset()
    stream = reader.iter_batches("q", 0)
    taken: list[pa.RecordBatch] = []
    puller = threading.Thread(target=lambda: taken.extend(stream))
    puller.start()
    gate.wait_reached()

    def others() -> int:
        return len({k for k in counting.keys_read if "/segments/" in k and k != first})

    deadline = time.monotonic() + 20
    while others() < allowed - 1 and time.monotonic() < deadline:
        time.sleep(0.01)  # the other thread fetches what it may meanwhile
    time.sleep(0.3)  # and no more than that
    assert others() == allowed - 1
    gate.release()
    puller.join(timeout=30)
    assert sum(b.num_rows for b in taken) == count * rows
