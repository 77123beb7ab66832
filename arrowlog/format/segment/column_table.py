"""Where each column of a segment lies, so that a reader can fetch a few columns
of a large segment with range GETs and still check every byte it uses.

A segment's record batch body holds the buffers of each top-level column one
after the other (Arrow IPC lays them out depth-first, field by field), so every
column is one byte range. The writer puts a *column table* in the schema
metadata (``arrowlog.columns``): the body's bounds, a CRC32C of everything
outside the body (the *frame*: magic, schema and header, dictionaries, the
record batch's metadata, the footer), one ``(start, end, CRC32C)`` per column,
and a CRC32C of the table itself. The table has a fixed width, known from the
number of columns before anything is encoded: it is written as ``-`` of that
width, the file is encoded, the layout read back from the IPC metadata, and the
table filled in place (no offset moves). A table left all ``-`` means the layout
was not understood (a type whose buffer count depends on the data): readers
fetch such a segment whole.

The frame's CRC is taken with both copies of the column table and of the
whole-file checksum (see :mod:`arrowlog.format.segment`) blanked, since both are filled
in after it.

Only what the writer produced itself is parsed here (the flatbuffers of its own
footer and record batch message); a reader trusts the table only once its CRC
holds, and hands pyarrow only bytes whose CRC held.
"""

from __future__ import annotations

import functools
import re
import struct
from dataclasses import dataclass

import crc32c
import pyarrow as pa

COLUMNS_KEY = b"arrowlog.columns"
_TAG = b"arrowlog-columns:"
# body start, body end (12 hex digits: 256 TiB) and the frame's CRC; per column
# start, end and CRC; the table's own CRC last
_OFFSET = 12
_HEAD = 2 * _OFFSET + 8
_PER_COLUMN = 2 * _OFFSET + 8
#: segments of a batch at least this large (in memory) get a column table; a
#: smaller one is always read whole, and the table would only cost bytes
TABLE_MIN_BYTES = 256 * 1024


def table_width(columns: int) -> int:
    return _HEAD + _PER_COLUMN * columns + 8


def placeholder(columns: int) -> bytes:
    return _TAG + b"-" * table_width(columns)


@dataclass(frozen=True, slots=True)
class ColumnTable:
    """Byte ranges of a segment: the body ``[body_start, body_end)`` and each
    column's ``(start, end, crc)``, absolute offsets in the object."""

    body_start: int
    body_end: int
    frame_crc: int
    columns: tuple[tuple[int, int, int], ...]

    def to_text(self) -> bytes:
        parts = [b"%012x%012x%08x" % (self.body_start, self.body_end, self.frame_crc)]
        parts += [b"%012x%012x%08x" % column for column in self.columns]
        text = b"".join(parts)
        return text + b"%08x" % crc32c.crc32c(text)

    @classmethod
    def parse(cls, value: bytes, columns: int) -> ColumnTable | None:
        """The table from its metadata value, or None if it was never filled in
        or fails its CRC (the segment is then read whole, and its own checksum
        decides)."""
        if not value.startswith(_TAG):
            return None
        text = value[len(_TAG) :]
        if len(text) != table_width(columns) or text.startswith(b"-"):
            return None
        body, crc = text[:-8], text[-8:]
        try:
            if int(crc, 16) != crc32c.crc32c(body):
                return None
            numbers = [int(body[i : i + width], 16) for i, width in _fields(columns)]
        except ValueError:
            return None
        start, end, frame = numbers[:3]
        cols = tuple(
            (numbers[i], numbers[i + 1], numbers[i + 2]) for i in range(3, len(numbers), 3)
        )
        if not start <= end or any(not start <= a <= b <= end for a, b, _ in cols):
            return None
        return cls(start, end, frame, cols)


def _fields(columns: int) -> list[tuple[int, int]]:
    widths = [_OFFSET, _OFFSET, 8] * (columns + 1)
    out, at = [], 0
    for w in widths:
        out.append((at, w))
        at += w
    return out


def table_slots(data: bytes | bytearray | memoryview, regions: list[tuple[int, int]]) -> list[int]:
    """Where the column table's text starts in each region (schema message,
    footer); empty if the segment has none."""
    pattern = re.compile(re.escape(_TAG) + rb"[0-9a-f-]+")
    slots = []
    for lo, hi in regions:
        found = list(pattern.finditer(data, lo, hi))
        if len(found) == 1:
            slots.append(found[0].start() + len(_TAG))
    return slots if len(slots) == len(regions) else []


# --- the writer's side: the layout of its own IPC file ------------------------------


def _u32(b: memoryview, at: int) -> int:
    return int(struct.unpack_from("<I", b, at)[0])


def _field(b: memoryview, table: int, field: int) -> int | None:
    """Absolute position of a flatbuffer table's field, or None if absent."""
    vtable = table - int(struct.unpack_from("<i", b, table)[0])
    size = int(struct.unpack_from("<H", b, vtable)[0])
    slot = 4 + 2 * field
    if slot + 2 > size:
        return None
    at = int(struct.unpack_from("<H", b, vtable + slot)[0])
    return table + at if at else None


def _vector(b: memoryview, table: int, field: int) -> tuple[int, int]:
    """(position of the first element, element count) of a vector field."""
    at = _field(b, table, field)
    if at is None:
        return 0, 0
    vec = at + _u32(b, at)
    return vec + 4, _u32(b, vec)


def _message_buffers(meta: memoryview) -> list[tuple[int, int]]:
    """The ``(offset, length)`` of every body buffer of a record batch message."""
    message = _u32(meta, 0)
    header = _field(meta, message, 2)  # Message.header: the RecordBatch table
    if header is None:
        raise ValueError("message without header")
    batch = header + _u32(meta, header)
    first, count = _vector(meta, batch, 2)  # RecordBatch.buffers: [Buffer{offset, length}]
    return [struct.unpack_from("<qq", meta, first + 16 * i) for i in range(count)]


@functools.lru_cache(maxsize=256)
def _buffer_counts(schema_ipc: bytes) -> tuple[int, ...]:
    """How many body buffers each top-level field of a schema has, read from
    the message of an empty batch of that field alone."""
    schema = pa.ipc.read_schema(pa.py_buffer(schema_ipc))
    counts = []
    for f in schema:
        one = pa.schema([f])
        empty = pa.RecordBatch.from_arrays([pa.nulls(0, f.type)], schema=one)
        message = memoryview(empty.serialize()).cast("B")
        meta_len = int(struct.unpack_from("<i", message, 4)[0])
        counts.append(len(_message_buffers(message[8 : 8 + meta_len])))
    return tuple(counts)


def layout(data: memoryview, schema: pa.Schema) -> tuple[int, int, list[tuple[int, int]]] | None:
    """``(body_start, body_end, [(start, end) per column])`` of a one-batch IPC
    file this process just wrote, or None where the buffers do not map onto the
    columns (a type whose buffer count depends on its values)."""
    try:
        n = len(data)
        footer_len = int(struct.unpack_from("<i", data, n - 10)[0])
        footer = data[n - 10 - footer_len : n - 10]
        root = _u32(footer, 0)
        first, count = _vector(footer, root, 3)  # Footer.recordBatches: [Block]
        if count != 1:
            return None
        offset, meta_len, body_len = struct.unpack_from("<qi4xq", footer, first)
        meta = data[offset + 8 : offset + meta_len]
        buffers = _message_buffers(meta)
        counts = _buffer_counts(schema.serialize().to_pybytes())
        if sum(counts) != len(buffers):
            return None
        body_start = offset + meta_len
        ranges, i = [], 0
        for c in counts:
            mine = buffers[i : i + c]
            i += c
            if mine:
                lo = body_start + mine[0][0]
                hi = body_start + mine[-1][0] + mine[-1][1]
                ranges.append((lo, max(lo, hi)))
            else:
                ranges.append((body_start, body_start))
        return body_start, body_start + body_len, ranges
    except (struct.error, ValueError, IndexError, pa.ArrowException):
        return None


def placed_buffers(
    frame: memoryview, body_start: int, schema: pa.Schema
) -> list[list[tuple[int, int]]] | None:
    """Where the record batch's own metadata puts each top-level field's body
    buffers: ``[(start, end), ...]`` per field, in the file, empty buffers left
    out. It is the last message of the frame, the one whose body starts at
    ``body_start``. None where the frame or the buffers do not map that way."""
    try:
        at = 8  # past the file's magic: the stream's messages
        while at < body_start:
            if _u32(frame, at) != 0xFFFFFFFF:
                return None
            meta_end = at + 8 + int(struct.unpack_from("<i", frame, at + 4)[0])
            meta = frame[at + 8 : meta_end]
            if meta_end == body_start:
                buffers = _message_buffers(meta)
                break
            message = _u32(meta, 0)
            length = _field(meta, message, 3)  # Message.bodyLength
            at = meta_end + (
                0 if length is None else int(struct.unpack_from("<q", meta, length)[0])
            )
        else:
            return None
        counts = _buffer_counts(schema.remove_metadata().serialize().to_pybytes())
        if sum(counts) != len(buffers):
            return None
        placed, i = [], 0
        for c in counts:
            placed.append(
                [(body_start + o, body_start + o + n) for o, n in buffers[i : i + c] if n]
            )
            i += c
        return placed
    except (struct.error, ValueError, IndexError, pa.ArrowException):
        return None


def coalesce(ranges: list[tuple[int, int]], gap: int) -> list[tuple[int, int]]:
    """Sorted, merged ``ranges``: neighbours closer than ``gap`` bytes are read
    in one request (a request costs more than that many bytes)."""
    merged: list[tuple[int, int]] = []
    for lo, hi in sorted(r for r in ranges if r[1] > r[0]):
        if merged and lo - merged[-1][1] <= gap:
            merged[-1] = (merged[-1][0], max(merged[-1][1], hi))
        else:
            merged.append((lo, hi))
    return merged
