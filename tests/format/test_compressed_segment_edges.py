"""Attacks on compressed segments (TopicConfig.compression, dictionary-encoded
string columns, checksums over stored bytes, max_batch_bytes counting stored
bytes). Strict xfails are defects; plain tests are attacks that held.

Origin: the attack on compressed segments (was tests/attack/test_compression_attack.py)."""

from __future__ import annotations

import os

import pyarrow as pa
import pytest

import arrowlog
from arrowlog import Compression, TopicConfig
from arrowlog.format.segment import (
    DICTIONARY_KEY,
    HEADER_SLACK,
    SegmentHeader,
    compression_slack,
    decode_segment,
    encode_segment,
    has_dictionaries,
    segment_size_floor,
)
from arrowlog.format.topic import segment_key

CODECS = list(Compression)


def _header(rows: int, base: int = 0) -> SegmentHeader:
    return SegmentHeader(base_offset=base, record_count=rows, timestamp_ms=0, append_id="a")


def _check_fits_bound(batch: pa.RecordBatch) -> int:
    """The size up to which Producer.send's check_fits trusts the estimate and
    does not encode (floor + header slack + compression slack)."""
    return segment_size_floor(batch) + HEADER_SLACK + compression_slack(batch)


def _send_over_the_limit(schema: pa.Schema, batch: pa.RecordBatch, codec: Compression) -> None:
    """A transactional send of a batch whose stored segment is over the limit:
    refused, and nothing at all written to the store."""
    log = arrowlog.connect("memory://")
    stored = len(encode_segment(batch, _header(batch.num_rows), codec))
    # the bound check_fits trusts must cover the segment (else it would let the
    # send register the partition and refuse only at the append) ...
    assert stored <= _check_fits_bound(batch) or has_dictionaries(schema)
    # ... and a limit just under the segment refuses it before anything is written
    limit = stored - 1
    log.create_topic("t", schema, config=TopicConfig(max_batch_bytes=limit, compression=codec))
    producer = log.producer(transactional_id="tx")
    producer.init_transactions()
    producer.begin_transaction()
    before = sorted(o.key for o in log.store.list(""))
    with pytest.raises(arrowlog.RecordBatchTooLargeError):
        producer.send("t", batch)
    assert sorted(o.key for o in log.store.list("")) == before


# -- promise 3: max_batch_bytes and the transactional check -------------------


@pytest.mark.parametrize("codec", [Compression.ZSTD, Compression.LZ4])
def test_compression_slack_bounds_single_row_null_columns(codec: Compression) -> None:
    batch = pa.record_batch({f"c{i}": pa.array([None], pa.int64()) for i in range(20)})
    plain = len(encode_segment(batch, _header(1)))
    assert len(encode_segment(batch, _header(1), codec)) <= plain + compression_slack(batch)


def test_transactional_send_many_tiny_buffers_writes_nothing() -> None:
    schema = pa.schema([(f"c{i}", pa.int64()) for i in range(300)])
    batch = pa.record_batch([pa.array([None], pa.int64())] * 300, schema=schema)
    _send_over_the_limit(schema, batch, Compression.ZSTD)


def test_transactional_send_large_incompressible_buffer_writes_nothing() -> None:
    n = 4 << 20
    schema = pa.schema([("x", pa.int64())])
    noise = pa.Array.from_buffers(pa.int64(), n, [None, pa.py_buffer(os.urandom(8 * n))])
    batch = pa.RecordBatch.from_arrays([noise], schema=schema)
    _send_over_the_limit(schema, batch, Compression.LZ4)


@pytest.mark.parametrize("codec", CODECS)
def test_transactional_send_large_dictionary_writes_nothing(codec: Compression) -> None:
    schema = pa.schema([("d", pa.dictionary(pa.int32(), pa.string()))])
    values = pa.array([os.urandom(50_000).hex()])
    column = pa.DictionaryArray.from_arrays(pa.array([0], pa.int32()), values)
    _send_over_the_limit(schema, pa.RecordBatch.from_arrays([column], schema=schema), codec)


def test_plain_append_is_refused_exactly_at_the_stored_size() -> None:
    """Held: a non-transactional append is refused iff its stored bytes pass the limit."""
    batch = pa.record_batch({f"c{i}": pa.array([None], pa.int64()) for i in range(50)})
    log = arrowlog.connect("memory://")
    log.create_topic("probe", batch.schema)
    log.append("probe", batch)
    size = next(iter(log.store.list("probe/0/segments/"))).size
    for limit, fits in ((size, True), (size - 1, False)):
        name = f"t{limit}"
        log.create_topic(name, batch.schema, config=TopicConfig(max_batch_bytes=limit))
        if fits:
            assert log.append(name, batch).record_count == 1
        else:
            with pytest.raises(arrowlog.RecordBatchTooLargeError):
                log.append(name, batch)


# -- promise 2: forged arrowlog.dictionary entries ------------------------------


def _forged(batch: pa.RecordBatch, entry: bytes) -> memoryview:
    """A segment with a valid checksum whose arrowlog.dictionary is ``entry``
    (encode_segment keeps the batch's own metadata when it encodes nothing)."""
    meta = {**(batch.schema.metadata or {}), DICTIONARY_KEY: entry}
    return encode_segment(batch.replace_schema_metadata(meta), _header(batch.num_rows))


def test_deeply_nested_dictionary_entry_is_corrupt() -> None:
    batch = pa.record_batch({"s": ["a", "b"]})
    data = _forged(batch, b"[" * 100_000 + b"]" * 100_000)
    with pytest.raises(arrowlog.CorruptSegmentError):
        decode_segment(data, key="k")


def test_dictionary_entry_naming_a_topic_dictionary_column_is_corrupt() -> None:
    schema = pa.schema([("d", pa.dictionary(pa.int8(), pa.string()))])
    column = pa.DictionaryArray.from_arrays(pa.array([0, 1, 0], pa.int8()), pa.array(["x", "y"]))
    batch = pa.RecordBatch.from_arrays([column], schema=schema)
    log = arrowlog.connect("memory://")
    log.create_topic("t", schema)
    log.store.put_if_absent(segment_key("t", 0, 0), _forged(batch, b"[0]"))
    with pytest.raises(arrowlog.CorruptSegmentError):
        log.read("t")


@pytest.mark.parametrize(
    "entry", [b"null", b"5", b'"0"', b'{"0": 1}', b"[9]", b"[1.0]", b"[NaN]", b"[0, 0]", b"[1]"]
)
def test_malformed_dictionary_entries_are_corrupt(entry: bytes) -> None:
    """Held: garbage entries (with a valid checksum) are CorruptSegmentError."""
    batch = pa.record_batch({"s": pa.array(["a", "a"]).dictionary_encode(), "i": [1, 2]})
    with pytest.raises(arrowlog.CorruptSegmentError):
        decode_segment(_forged(batch, entry), key="k")


@pytest.mark.parametrize("codec", [Compression.ZSTD, Compression.LZ4])
def test_every_byte_flip_and_truncation_of_a_dictionary_segment_is_caught(
    codec: Compression,
) -> None:
    """Held: exhaustive over one small segment with a dictionary-encoded column."""
    batch = pa.record_batch({"s": ["a", "a", "b", None] * 5, "i": list(range(20))})
    data = bytes(encode_segment(batch, _header(20), codec))
    assert b"arrowlog.dictionary" in data
    for i in range(len(data)):
        flipped = bytearray(data)
        flipped[i] ^= 0xFF
        with pytest.raises(arrowlog.CorruptSegmentError):
            decode_segment(bytes(flipped), key="k")
    for n in range(len(data)):
        with pytest.raises(arrowlog.CorruptSegmentError):
            decode_segment(data[:n], key="k")


# -- promise 1 and 4: round trips through a topic -------------------------------

_META = pa.schema(
    [
        pa.field("s", pa.string(), nullable=False, metadata={"k": "v"}),
        pa.field("d", pa.dictionary(pa.int16(), pa.large_string())),
        pa.field("lb", pa.large_binary()),
        pa.field("n", pa.string()),
        pa.field("e", pa.string()),
        pa.field("l", pa.list_(pa.string())),
        pa.field("st", pa.struct([("x", pa.binary())])),
    ],
    metadata={"m": "1"},
)


def _edge_batch(rows: int) -> pa.RecordBatch:
    words = ["é😀", "é😀", "\x00", "", "ß"]
    return pa.RecordBatch.from_arrays(
        [
            pa.array([words[i % 5] for i in range(rows)]),
            pa.array([None if i % 3 == 0 else f"w{i % 2}" for i in range(rows)], pa.large_string())
            .dictionary_encode()
            .cast(pa.dictionary(pa.int16(), pa.large_string())),
            pa.array([b"\xff" if i % 2 else None for i in range(rows)], pa.large_binary()),
            pa.array([None] * rows, pa.string()),
            pa.array([""] * rows, pa.string()),
            pa.array([["a", "a"] if i % 2 else None for i in range(rows)], pa.list_(pa.string())),
            pa.array([{"x": b"q"} for _ in range(rows)], _META.field("st").type),
        ],
        schema=_META,
    )


@pytest.mark.parametrize("codec", CODECS)
def test_edge_batches_read_back_exactly_with_the_topic_schema(codec: Compression) -> None:
    """Held: a topic dictionary column, large types, all-null and empty strings,
    nested strings, unicode, metadata; a sliced batch, a single row and a
    chunked table; among an old plain segment; via log.read, iter_batches and
    consumer.read_many."""
    log = arrowlog.connect("memory://")
    log.create_topic("t", _META, config=TopicConfig(compression=codec))
    full = _edge_batch(40)
    old = _edge_batch(3)
    log.store.put_if_absent(segment_key("t", 0, 0), encode_segment(old, _header(3)))
    sent = [old, full.slice(7, 20), full.slice(39, 1)]
    log.append("t", sent[1])
    log.append("t", sent[2])
    chunked = pa.Table.from_batches([full.slice(0, 5), full.slice(5, 6)])
    log.append("t", chunked)
    expected = pa.Table.from_batches([*sent, *chunked.to_batches()])
    got = log.read("t")
    assert got.equals(expected)
    assert got.schema.equals(_META, check_metadata=True)
    for batch in log.iter_batches("t"):
        assert batch.schema.equals(_META, check_metadata=True)
    many = log.consumer().read_many({("t", 0): (None, None)})[("t", 0)]
    assert many.equals(expected)
    assert many.schema.equals(_META, check_metadata=True)
