"""The segment format: every batch round-trips, every corruption is caught."""

from __future__ import annotations

import dataclasses
from typing import Any

import pyarrow as pa
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from arrowlog.config import Compression
from arrowlog.errors import CorruptSegmentError
from arrowlog.format.segment import (
    HEAD_BYTES,
    SegmentHeader,
    WriterIdentity,
    compression_slack,
    decode_segment,
    encode_segment,
    read_header,
    segment_size_floor,
)
from tests.support.strategies import record_batches

IDENTITIES = st.builds(
    WriterIdentity,
    producer_id=st.integers(-1, 2**63 - 1),
    producer_epoch=st.integers(-1, 2**15),
    base_sequence=st.integers(-1, 2**31 - 1),
    transactional=st.booleans(),
    control_type=st.sampled_from([None, "COMMIT", "ABORT"]),
    transactional_id=st.one_of(st.none(), st.text(max_size=30)),
)
HEADERS = st.builds(
    SegmentHeader,
    base_offset=st.integers(0, 2**63 - 10**6),
    record_count=st.just(1),
    timestamp_ms=st.integers(0, 2**45),
    append_id=st.uuids().map(lambda u: u.hex),
    identity=IDENTITIES,
)


def _header_for(batch: pa.RecordBatch, header: SegmentHeader) -> SegmentHeader:
    return dataclasses.replace(header, record_count=batch.num_rows)


CODECS = st.sampled_from(list(Compression))


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(batch=record_batches(), header=HEADERS, codec=CODECS)
def test_batches_round_trip_unchanged(
    batch: pa.RecordBatch, header: SegmentHeader, codec: Compression
) -> None:
    header = _header_for(batch, header)
    data = encode_segment(batch, header, codec)
    got_header, got = decode_segment(data, key="k")
    assert got_header == header
    assert got.equals(batch)
    assert got.schema.equals(batch.schema, check_metadata=True)
    assert read_header(data[:HEAD_BYTES], key="k") in (
        header,
        16 + int.from_bytes(data[12:16], "little"),
    )
    # A segment is a plain Arrow IPC file: pyarrow alone reads it (compressed, a
    # string column may come back dictionary-encoded: the same values)
    plain = pa.ipc.open_file(pa.py_buffer(data)).get_batch(0)
    for i in range(plain.num_columns):
        column: Any = plain.column(i)
        if pa.types.is_dictionary(column.type) and not pa.types.is_dictionary(batch.column(i).type):
            assert codec is not Compression.NONE
            column = column.dictionary_decode()
        assert column.equals(batch.column(i))


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(batch=record_batches(), header=HEADERS, at=st.integers(0, 30))
def test_the_size_floor_is_never_above_the_segment(
    batch: pa.RecordBatch, header: SegmentHeader, at: int
) -> None:
    # any header a writer writes: its timestamp is the time of the append
    header = dataclasses.replace(_header_for(batch, header), timestamp_ms=1_700_000_000_000)
    for part in (batch, batch.slice(min(at, batch.num_rows - 1))):
        header = dataclasses.replace(header, record_count=part.num_rows)
        assert segment_size_floor(part) <= len(encode_segment(part, header))


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    batch=record_batches(max_rows=10),
    header=HEADERS,
    where=st.floats(0, 1, exclude_max=True),
    bit=st.integers(0, 7),
    codec=CODECS,
)
def test_every_single_bit_flip_is_detected(
    batch: pa.RecordBatch, header: SegmentHeader, where: float, bit: int, codec: Compression
) -> None:
    # compressed, the checksum covers the stored bytes: a flip never reaches the
    # decompressor
    data = bytearray(encode_segment(batch, _header_for(batch, header), codec))
    data[int(where * len(data))] ^= 1 << bit
    with pytest.raises(CorruptSegmentError):
        decode_segment(bytes(data), key="topic/0/segments/x.arrow")


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(batch=record_batches(), header=HEADERS, codec=CODECS)
def test_compression_adds_at_most_its_slack(
    batch: pa.RecordBatch, header: SegmentHeader, codec: Compression
) -> None:
    """What lets a writer decide, without compressing, that a batch fits the
    topic's max_batch_bytes: compressed, it is never larger than plain by more
    than compression_slack (an incompressible buffer is stored as it is)."""
    header = _header_for(batch, header)
    plain = len(encode_segment(batch, header))
    assert len(encode_segment(batch, header, codec)) <= plain + compression_slack(batch)


def test_compression_shrinks_what_compresses() -> None:
    batch = pa.record_batch({"id": pa.array(range(100_000), pa.int64()),
                             "kind": ["click", "view", "buy", "view"] * 25_000})  # fmt: skip
    header = SegmentHeader(base_offset=0, record_count=100_000, timestamp_ms=0, append_id="a")
    sizes = {c: len(encode_segment(batch, header, c)) for c in Compression}
    assert sizes[Compression.ZSTD] * 4 < sizes[Compression.NONE]
    assert sizes[Compression.LZ4] < sizes[Compression.NONE]
    for codec in Compression:
        assert decode_segment(encode_segment(batch, header, codec), key="k")[1].equals(batch)


@settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    batch=record_batches(max_rows=10),
    header=HEADERS,
    keep=st.floats(0, 1, exclude_max=True),
    codec=CODECS,
)
def test_every_truncation_is_detected(
    batch: pa.RecordBatch, header: SegmentHeader, keep: float, codec: Compression
) -> None:
    data = encode_segment(batch, _header_for(batch, header), codec)
    with pytest.raises(CorruptSegmentError):
        decode_segment(data[: int(keep * len(data))], key="k")


@settings(max_examples=100, deadline=None)
@given(garbage=st.binary(max_size=400))
def test_garbage_is_never_taken_for_a_segment(garbage: bytes) -> None:
    with pytest.raises(CorruptSegmentError):
        decode_segment(garbage, key="k")


def test_the_error_names_the_object() -> None:
    batch = pa.record_batch({"x": [1, 2, 3]})
    data = bytearray(
        encode_segment(
            batch, SegmentHeader(base_offset=0, record_count=3, timestamp_ms=0, append_id="a")
        )
    )
    data[-30] ^= 0xFF
    with pytest.raises(
        CorruptSegmentError, match=r"events/0/segments/00000000000000000000\.arrow"
    ) as info:
        decode_segment(bytes(data), key="events/0/segments/00000000000000000000.arrow")
    assert info.value.key == "events/0/segments/00000000000000000000.arrow"


def test_a_corrupt_header_is_caught_from_the_head_alone() -> None:
    batch = pa.record_batch({"x": [1]})
    data = bytes(
        encode_segment(
            batch, SegmentHeader(base_offset=7, record_count=1, timestamp_ms=0, append_id="a")
        )
    )
    at = data.index(b'"base_offset":7') + len('"base_offset":')
    forged = data[:at] + b"8" + data[at + 1 :]
    with pytest.raises(CorruptSegmentError, match="header checksum"):
        read_header(forged[:HEAD_BYTES], key="k")


def test_a_large_schema_needs_a_longer_head() -> None:
    batch = pa.record_batch({f"column_{i:04d}": [i] for i in range(800)})
    data = encode_segment(
        batch, SegmentHeader(base_offset=0, record_count=1, timestamp_ms=0, append_id="a")
    )
    need = read_header(data[:HEAD_BYTES], key="k")
    assert isinstance(need, int) and need > HEAD_BYTES
    assert isinstance(read_header(data[:need], key="k"), SegmentHeader)


def _sealed(data: bytes) -> bytes:
    """``data`` with its whole-file CRC filled in, as the writer would."""
    from arrowlog.format.segment.framing import CRC_PLACEHOLDER, crc_slots, file_crc

    out = bytearray(data)
    slots = crc_slots(out, "k")
    for at in slots:
        out[at : at + 8] = CRC_PLACEHOLDER
    value = b"%08x" % file_crc(out, slots)
    for at in slots:
        out[at : at + 8] = value
    return bytes(out)


@pytest.mark.parametrize("columns", [None, ["x"]])
def test_a_checksummed_file_of_two_batches_is_no_segment(columns: list[str] | None) -> None:
    # The checksum proves the bytes are what was written, not that arrowlog wrote
    # them: a segment's decoder still insists on exactly one batch.
    batch = pa.record_batch({"x": [1, 2]})
    one = bytes(
        encode_segment(
            batch, SegmentHeader(base_offset=0, record_count=2, timestamp_ms=0, append_id="a")
        )
    )
    schema = pa.ipc.open_file(pa.py_buffer(one)).schema
    sink = pa.BufferOutputStream()
    with pa.ipc.new_file(sink, schema) as writer:
        writer.write_batch(batch.replace_schema_metadata(None))
        writer.write_batch(batch.replace_schema_metadata(None))
    two = _sealed(sink.getvalue().to_pybytes())
    assert pa.ipc.open_file(pa.py_buffer(two)).num_record_batches == 2
    with pytest.raises(CorruptSegmentError, match="one record batch"):
        decode_segment(two, key="k", columns=columns)
