"""A segment stored in fewer than SMALL_DECODE_MAX_BYTES is decoded on the
calling thread alone (Arrow's threads cost a small batch more than they gain):
it decodes to exactly what was written, on either side of the bound, for every
codec, and what a segment must not hold is refused alike."""

from __future__ import annotations

import os

import pyarrow as pa
import pytest

from arrowlog import Compression
from arrowlog.errors import CorruptSegmentError
from arrowlog.format.segment import SegmentHeader, decode_segment, encode_segment
from arrowlog.format.segment.codec import SMALL_DECODE_MAX_BYTES


def _header(rows: int) -> SegmentHeader:
    return SegmentHeader(base_offset=0, record_count=rows, timestamp_ms=0, append_id="a")


def _batch(rows: int) -> pa.RecordBatch:
    noise = os.urandom(rows)  # incompressible: the stored size follows the rows
    return pa.record_batch(
        {
            "id": pa.array(range(rows), pa.int64()),
            "b": pa.array([noise[i : i + 1] for i in range(rows)], pa.binary()),
            "s": pa.array([f"k{i % 7}" if i % 5 else None for i in range(rows)], pa.string()),
        }
    )


def _stored_near_the_bound(codec: Compression) -> list[tuple[pa.RecordBatch, memoryview]]:
    """Segments stored in just under and just over SMALL_DECODE_MAX_BYTES."""
    found: dict[bool, tuple[pa.RecordBatch, memoryview]] = {}
    rows = 64
    while len(found) < 2:
        batch = _batch(rows)
        data = encode_segment(batch, _header(rows), codec)
        small = len(data) < SMALL_DECODE_MAX_BYTES
        if small or len(data) < 2 * SMALL_DECODE_MAX_BYTES:
            found[small] = (batch, data)
        rows = int(rows * 1.15) + 1
    return list(found.values())


@pytest.mark.parametrize("codec", list(Compression))
def test_segments_on_either_side_of_the_bound_decode_to_what_was_written(
    codec: Compression,
) -> None:
    for batch, data in _stored_near_the_bound(codec):
        header, decoded = decode_segment(data, key="t/0/segments/x.arrow")
        assert header.record_count == batch.num_rows
        assert decoded.equals(batch)
        _, some = decode_segment(data, key="t/0/segments/x.arrow", columns=["s"])
        assert some.equals(batch.select(["s"]))


@pytest.mark.parametrize("codec", list(Compression))
def test_a_small_segment_whose_checksum_fails_is_refused(codec: Compression) -> None:
    data = bytearray(encode_segment(_batch(100), _header(100), codec))
    assert len(data) < SMALL_DECODE_MAX_BYTES
    data[len(data) // 2] ^= 0x01
    with pytest.raises(CorruptSegmentError):
        decode_segment(memoryview(data), key="t/0/segments/x.arrow")
