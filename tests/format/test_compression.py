"""Compressed segments: ZSTD by default, LZ4 and none as topic options; old
uncompressed segments read as before; ``max_batch_bytes`` counts stored bytes."""

from __future__ import annotations

import json
import os

import pyarrow as pa
import pytest

import arrowlog
from arrowlog import Compression, TopicConfig, _checked_json
from arrowlog.format.segment import DICTIONARY_KEY, SegmentHeader, decode_segment, encode_segment
from arrowlog.format.topic import Topic, segment_key
from arrowlog.storage import Store

FIELDS: list[pa.Field[pa.DataType]] = [
    pa.field("id", pa.int64()),
    pa.field("kind", pa.string()),
    pa.field("blob", pa.binary()),
]
SCHEMA = pa.schema(FIELDS)


def rows(start: int, count: int, *, random_blobs: int = 0) -> pa.RecordBatch:
    return pa.record_batch(
        {
            "id": pa.array(range(start, start + count), pa.int64()),
            "kind": pa.array(["click", "view", "buy", "view"] * (count // 4) + ["x"] * (count % 4)),
            "blob": pa.array([os.urandom(random_blobs) for _ in range(count)], pa.binary()),
        },
        schema=SCHEMA,
    )


def stored_bytes(store: Store, topic: str) -> int:
    return sum(o.size for o in store.list(f"{topic}/0/segments/"))


def test_new_topics_store_zstd_and_read_back_the_same_rows(store: Store) -> None:
    log = arrowlog.connect(store)
    for codec in Compression:
        log.create_topic(f"t-{codec.value}", SCHEMA, config=TopicConfig(compression=codec))
        log.append(f"t-{codec.value}", rows(0, 20_000))
    log.create_topic("default", SCHEMA)
    assert log.topic("default").config.compression is Compression.ZSTD
    log.append("default", rows(0, 20_000))
    sizes = {c: stored_bytes(store, f"t-{c.value}") for c in Compression}
    assert stored_bytes(store, "default") == sizes[Compression.ZSTD]
    assert sizes[Compression.ZSTD] * 4 < sizes[Compression.NONE]
    assert sizes[Compression.LZ4] < sizes[Compression.NONE]
    fresh = arrowlog.connect(store)  # another client reads them all
    for codec in Compression:
        got = fresh.read(f"t-{codec.value}")
        assert got.select(["id", "kind"]).equals(
            pa.Table.from_batches([rows(0, 20_000)]).select(["id", "kind"])
        )


def test_the_setting_takes_strings_and_refuses_anything_else() -> None:
    assert TopicConfig(compression="lz4").compression is Compression.LZ4  # type: ignore[arg-type]
    assert TopicConfig(compression="none").compression is Compression.NONE  # type: ignore[arg-type]
    with pytest.raises(
        arrowlog.InvalidConfigError, match="compression must be one of zstd, lz4, none, got 'gzip'"
    ):
        TopicConfig(compression="gzip")  # type: ignore[arg-type]


def test_a_topic_from_before_compression_keeps_writing_plain_segments() -> None:
    log = arrowlog.connect("memory://")
    log.create_topic("t", SCHEMA)
    raw = json.loads(log.topic("t").to_json())
    del raw["crc32c"]
    del raw["config"]["compression"]  # as a topic created before the setting existed
    old = Topic.from_json(_checked_json.dump(raw), key="t")
    assert old.config.compression is Compression.NONE


def test_old_uncompressed_segments_read_unchanged_among_new_ones(store: Store) -> None:
    log = arrowlog.connect(store)
    log.create_topic("t", SCHEMA)  # zstd
    # the first segment was written plain, by a writer from before compression
    first = rows(0, 1_000)
    plain = encode_segment(
        first, SegmentHeader(base_offset=0, record_count=1_000, timestamp_ms=0, append_id="old")
    )
    store.put_if_absent(segment_key("t", 0, 0), plain)
    assert log.append("t", rows(1_000, 1_000)).base_offset == 1_000
    keys = [o.key for o in store.list("t/0/segments/")]
    assert len(keys) == 2
    assert store.head(keys[1]).size * 2 < store.head(keys[0]).size  # the new one is compressed
    assert arrowlog.connect(store).read("t")["id"].to_pylist() == list(range(2_000))


def test_max_batch_bytes_counts_the_stored_bytes() -> None:
    """As Kafka's max.message.bytes: a batch that compresses under the limit is
    taken, whatever its size in memory; the same batch plain is refused."""
    log = arrowlog.connect("memory://")
    limit = 256 * 1024
    batch = rows(0, 40_000)  # about 1 MiB in memory, a tenth of that in ZSTD
    assert pa.ipc.get_record_batch_size(batch) > 3 * limit
    for codec in Compression:
        log.create_topic(
            f"t-{codec.value}", SCHEMA, config=TopicConfig(max_batch_bytes=limit, compression=codec)
        )
    assert log.append("t-zstd", batch).record_count == 40_000
    with pytest.raises(arrowlog.RecordBatchTooLargeError, match="over the topic's max_batch_bytes"):
        log.append("t-none", batch)
    assert log.end_offsets("t-none") == {0: 0}


def test_an_incompressible_batch_over_the_limit_is_refused_before_a_transaction_writes(
    store: Store,
) -> None:
    log = arrowlog.connect(store)
    limit = 64 * 1024
    log.create_topic("t", SCHEMA, config=TopicConfig(max_batch_bytes=limit))
    producer = log.producer(transactional_id="tx")
    producer.init_transactions()
    producer.begin_transaction()
    before = sorted(o.key for o in store.list(""))
    with pytest.raises(arrowlog.RecordBatchTooLargeError):
        producer.send("t", rows(0, 70, random_blobs=1024))  # 70 KiB of noise
    # refused before the partition joined the transaction: nothing written at all
    assert sorted(o.key for o in store.list("")) == before
    producer.send("t", rows(0, 10))
    producer.commit_transaction()
    assert log.read("t")["id"].to_pylist() == list(range(10))


def test_repeated_strings_are_stored_as_a_dictionary_and_read_back_plain() -> None:
    """Arrow IPC has no encodings: a string column's offsets differ on every row
    and compress badly. Compressed topics store a string column with repeated
    values dictionary-encoded; readers get the topic's type back."""
    words = pa.record_batch({"kind": ["click", "view", "buy", None] * 25_000})
    unique = pa.record_batch({"kind": [f"id-{i:06d}" for i in range(100_000)]})
    header = SegmentHeader(base_offset=0, record_count=100_000, timestamp_ms=0, append_id="a")
    for batch, dictionary in ((words, True), (unique, False)):
        plain = encode_segment(batch, header)
        zstd = encode_segment(batch, header, Compression.ZSTD)
        reader = pa.ipc.open_file(pa.py_buffer(zstd))
        assert (DICTIONARY_KEY in (reader.schema.metadata or {})) is dictionary
        assert pa.types.is_dictionary(reader.schema.field("kind").type) is dictionary
        got = decode_segment(zstd, key="k")[1]
        assert got.equals(batch) and got.schema == batch.schema
        if dictionary:
            assert len(zstd) * 50 < len(plain)  # 100,000 rows of four words: a few KB
