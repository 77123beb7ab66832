"""Whole segments: encode, decode, size bounds, and the schemas that can be
written."""

from __future__ import annotations

import dataclasses
import functools
import json
from collections.abc import Sequence
from typing import Literal

import crc32c
import pyarrow as pa

from arrowlog.config import Compression
from arrowlog.errors import CorruptSegmentError, InvalidConfigError, RecordBatchTooLargeError
from arrowlog.format.segment import column_table
from arrowlog.format.segment.column_table import COLUMNS_KEY, ColumnTable
from arrowlog.format.segment.dictionary import dictionary_candidate, dictionary_encode
from arrowlog.format.segment.framing import (
    CRC_PLACEHOLDER,
    CRC_TAG,
    crc_slots,
    file_crc,
    regions,
)
from arrowlog.format.segment.header import (
    CRC_KEY,
    DICTIONARY_KEY,
    HEADER_CRC_KEY,
    HEADER_KEY,
    SegmentHeader,
    WriterIdentity,
    compaction_metadata,
    head_schema,
    header_from_metadata,
    hex8,
    refs_metadata,
    stats_metadata,
)
from arrowlog.format.segment.projection import checked, column_indices, project
from arrowlog.format.stats import column_stats, json_bound

#: pyarrow's name of each topic compression
_IPC_CODECS: dict[Compression, Literal["lz4", "zstd"] | None] = {
    Compression.ZSTD: "zstd",
    Compression.LZ4: "lz4",
    Compression.NONE: None,
}


def encode_segment(
    batch: pa.RecordBatch, header: SegmentHeader, compression: Compression = Compression.NONE
) -> memoryview:
    """The bytes of one segment: :func:`encode` with ``header`` as given."""
    return encode(batch, header, compression)[0]


def encode(
    batch: pa.RecordBatch,
    header: SegmentHeader,
    compression: Compression = Compression.NONE,
    *,
    stats: bool = False,
) -> tuple[memoryview, SegmentHeader]:
    """Serialise ``batch`` with ``header`` into the bytes of one segment (a view of
    Arrow-owned memory: the segment is written and checksummed without a copy).
    With ``compression``, Arrow compresses each buffer of the record batch (the
    schema message, and so the header, stay plain), and top-level string and
    binary columns with repeated values are stored dictionary-encoded (see
    :func:`dictionary_encode`); the checksum covers the stored bytes. A batch
    of at least :data:`~arrowlog.format.segment.column_table.TABLE_MIN_BYTES` gets a column
    table, for reads of some of its columns. With ``stats``, the header gets
    the batch's column statistics (:func:`arrowlog.format.stats.column_stats`, string
    bounds from the dictionaries just built); returns the header written."""
    header_json = header.to_json()
    tabled = batch.num_columns > 0 and batch.nbytes >= column_table.TABLE_MIN_BYTES
    encoded: list[int] = []
    original = batch
    if compression is not Compression.NONE:
        batch, encoded = dictionary_encode(batch)
    if stats:
        dictionaries = {i: batch.column(i).dictionary for i in encoded}  # type: ignore[attr-defined]
        header = dataclasses.replace(header, stats=column_stats(original, dictionaries))
    metadata = dict(batch.schema.metadata or {})
    if encoded:
        metadata[DICTIONARY_KEY] = json.dumps(encoded).encode()
    metadata[HEADER_KEY] = header_json
    metadata[HEADER_CRC_KEY] = hex8(crc32c.crc32c(header_json))
    metadata.update(stats_metadata(header))
    metadata.update(compaction_metadata(header))
    metadata.update(refs_metadata(header))
    metadata[CRC_KEY] = CRC_TAG + CRC_PLACEHOLDER
    if tabled:
        metadata[COLUMNS_KEY] = column_table.placeholder(batch.num_columns)
    sink = pa.BufferOutputStream()
    options = pa.ipc.IpcWriteOptions(compression=_IPC_CODECS[compression])
    with pa.ipc.new_file(sink, batch.schema.with_metadata(metadata), options=options) as writer:
        writer.write_batch(batch)
    data = memoryview(sink.getvalue()).cast("B")
    slots = crc_slots(data, key="<new segment>")
    if tabled:
        fill_column_table(data, batch.schema)
    crc = file_crc(data, slots)
    for start in slots:
        data[start : start + 8] = hex8(crc)
    return data, header


def fill_column_table(data: memoryview, schema: pa.Schema) -> None:
    """Write the column table over its placeholders. Runs before the file's CRC
    is filled in: both still read ``-`` when the frame's CRC is taken (over
    everything before the body), as a reader will see them once it blanks them."""
    found = column_table.layout(data, schema)
    if found is None:
        return  # left blank: readers fetch the segment whole
    body_start, body_end, ranges = found
    frame = crc32c.crc32c(data[:body_start])
    table = ColumnTable(
        body_start,
        body_end,
        frame,
        tuple((lo, hi, crc32c.crc32c(data[lo:hi])) for lo, hi in ranges),
    ).to_text()
    for start in column_table.table_slots(data, list(regions(data, "<new segment>"))):
        data[start : start + len(table)] = table


# The shortest header JSON any writer produces: one-digit offset, count and ids,
# `true`, an empty transactional id, a 13-digit timestamp (every time from 2001 to
# 2286). Segment sizes below are lower bounds for every real header.
_SHORTEST_HEADER = SegmentHeader(
    base_offset=0,
    record_count=1,
    timestamp_ms=10**12,
    append_id="0" * 32,
    identity=WriterIdentity(
        producer_id=0, producer_epoch=0, base_sequence=0, transactional=True, transactional_id=""
    ),
)


# Keyed by the serialized schema: pa.Schema's == and hash ignore field metadata,
# which is part of the size.
@functools.lru_cache(maxsize=256)
def _overhead(schema_ipc: bytes) -> int:
    """Bytes of a segment of this schema besides its record batch message (magic,
    schema message with the shortest header, empty dictionaries, footer)."""
    empty = empty_batch(pa.ipc.read_schema(pa.py_buffer(schema_ipc)))
    return len(encode_segment(empty, _SHORTEST_HEADER)) - pa.ipc.get_record_batch_size(empty)


def empty_batch(schema: pa.Schema) -> pa.RecordBatch:
    """A batch of no rows (``pa.nulls`` builds every type; ``from_pylist`` has no
    unions)."""
    return pa.RecordBatch.from_arrays([pa.nulls(0, f.type) for f in schema], schema=schema)


#: more than a real segment header can add to the shortest one (ids, offsets,
#: a transactional id of up to 249 characters, the timestamp)
HEADER_SLACK = 1024


def one_batch(table: pa.Table) -> pa.RecordBatch:
    """``table``'s rows as one record batch.

    Raises:
        RecordBatchTooLargeError: they do not fit one: a string or binary column
            past 2 GiB (32-bit offsets) stays in several chunks, and taking the
            first would drop the others' rows.
    """
    chunks = table.combine_chunks().to_batches()
    if len(chunks) > 1:
        raise RecordBatchTooLargeError(
            f"{table.num_rows} rows of {table.nbytes} bytes do not fit one record batch "
            "(a string or binary column past 2 GiB); split them"
        )
    return chunks[0] if chunks else empty_batch(table.schema)


def segment_size_floor(batch: pa.RecordBatch) -> int:
    """A lower bound on the size of ``batch``'s segment, without encoding the data:
    cheap enough to check every batch before anything is written. Exact but for
    dictionaries and the header (a real header's offsets and ids are longer than
    the shortest one's). For an empty batch, it is the smallest segment the schema
    can have.

    Raises:
        pyarrow.ArrowException: the batch cannot be written as Arrow IPC.
    """
    return _overhead(batch.schema.serialize().to_pybytes()) + pa.ipc.get_record_batch_size(batch)


def metadata_slack(batch: pa.RecordBatch) -> int:
    """How many bytes the column statistics and the column table can add to a
    segment beyond :func:`segment_size_floor` (both sit twice in the file: in
    the schema message and in the footer's copy)."""
    slack = 2 * (json_bound(batch.schema) + 64)
    if batch.nbytes >= column_table.TABLE_MIN_BYTES:
        slack += 2 * (len(column_table.placeholder(batch.num_columns)) + 64)
    return slack


def compression_slack(batch: pa.RecordBatch) -> int:
    """How many bytes compression can add to a batch's segment at most. pyarrow
    compresses every buffer, even one that does not shrink: each gets an 8-byte
    length, its codec's frame (a header of up to 18 bytes, and a few bytes per
    64 KiB block of an incompressible buffer) and up to 8 bytes of padding; the
    record batch message names its codec. A string column stored
    dictionary-encoded is never larger than plain, but adds a dictionary message
    and its description in the schema."""
    buffers = [b for column in batch.columns for b in column.buffers() if b is not None]
    blocks = sum(b.size for b in buffers) // 8192  # 8 bytes per 64 KiB, LZ4's 4 doubled
    strings = sum(1 for f in batch.schema if dictionary_candidate(f.type))
    return 64 + 48 * (len(buffers) + 1) + blocks + 512 * strings


def check_schema(schema: pa.Schema) -> None:
    """Refuse a schema whose segments could not be written or read back.

    Raises:
        InvalidConfigError: a schema metadata key starts with ``arrowlog.`` (the
            header's namespace: such keys would be overwritten or dropped), or the
            checksum tag appears anywhere in the schema (a name, metadata, a time
            zone): the checksum is found by that tag in the schema message, so
            every segment of the schema would be refused as corrupt.
    """
    reserved = [k for k in schema.metadata or {} if k.startswith(b"arrowlog.")]
    if reserved:
        raise InvalidConfigError(
            f"schema metadata key {reserved[0].decode(errors='replace')!r} is reserved: "
            "arrowlog keeps its segment header under 'arrowlog.'"
        )
    if CRC_TAG in schema.serialize().to_pybytes():
        where = [
            f"field {f.name!r}"
            for f in schema
            if CRC_TAG in pa.schema([f]).serialize().to_pybytes()
        ]
        raise InvalidConfigError(
            f"{(where or ['the schema metadata'])[0]} contains {CRC_TAG.decode()!r}, "
            "arrowlog's checksum tag"
        )


def decode_segment(
    data: bytes | memoryview,
    *,
    key: str,
    columns: Sequence[str] | None = None,
    stats: bool = False,
) -> tuple[SegmentHeader, pa.RecordBatch]:
    """Verify and parse a whole segment; with ``columns``, only those columns
    of a data segment are decoded (a control record's are all kept); with
    ``stats``, the header keeps its column statistics.

    Raises:
        CorruptSegmentError: the checksum does not match, the object is truncated
            or not a segment.
        UnknownColumnError: ``columns`` names a column the segment lacks.
    """
    slots = crc_slots(data, key)
    stored = bytes(data[slots[0] : slots[0] + 8])
    if stored == CRC_PLACEHOLDER or int(stored, 16) != file_crc(data, slots):
        raise CorruptSegmentError("checksum mismatch", key=key)
    try:
        if columns is None:
            simple = _read_simple(data, key)
            if simple is not None:
                header = header_from_metadata(simple.schema.metadata, key, stats=stats)
                return checked(header, project(simple, key, None), key)
        reader = pa.ipc.open_file(pa.py_buffer(data))
        # the header of the schema message at the head, as the simple read
        # and every listing take it, not of the footer's copy
        head = head_schema(data, key)
        if isinstance(head, int):
            raise CorruptSegmentError("segment truncated inside its schema", key=key)
        header = header_from_metadata(head.metadata, key, stats=stats)
        wanted = None
        if columns is not None and not header.identity.control:
            wanted = column_indices(reader.schema, columns)
            options = pa.ipc.IpcReadOptions(
                included_fields=sorted(wanted), use_threads=len(data) >= SMALL_DECODE_MAX_BYTES
            )
            reader = pa.ipc.open_file(pa.py_buffer(data), options=options)
        if reader.num_record_batches != 1:
            raise CorruptSegmentError(
                f"a segment holds one record batch, found {reader.num_record_batches}", key=key
            )
        batch = project(reader.get_batch(0), key, wanted)
    except (pa.ArrowException, OSError) as e:
        raise CorruptSegmentError(f"unreadable Arrow IPC: {e}", key=key) from e
    return checked(header, batch, key)


#: the end-of-stream marker that follows a file's last message
_EOS = b"\xff\xff\xff\xff\x00\x00\x00\x00"

#: A segment stored in fewer bytes is decoded on the calling thread alone.
#: Arrow decompresses a batch's buffers on its own threads: for the small
#: buffers of a small compressed segment, handing them over costs more than
#: decompressing them (measured: a 64 KiB batch stored as 9 KiB of ZSTD took
#: 290 us of CPU that way against 125 us on one thread; LZ4 158 against 65).
#: From about 100 KiB stored the threads gain a little time for their CPU.
SMALL_DECODE_MAX_BYTES = 64 * 1024
_ONE_THREAD = pa.ipc.IpcReadOptions(use_threads=False)


def _read_simple(data: bytes | memoryview, key: str) -> pa.RecordBatch | None:
    """The batch of a segment without dictionaries, read message by message
    after the magic: a third of the file reader's cost, which parses the
    footer and the schema a second time (most of a small segment's decoding).
    None for a segment with dictionaries: the file reader reads those.

    Raises:
        CorruptSegmentError: a second batch follows the first.
    """
    stream = pa.BufferReader(pa.py_buffer(data))
    stream.seek(8)
    schema = pa.ipc.read_schema(pa.ipc.read_message(stream))
    message = pa.ipc.read_message(stream)
    if message.type != "record batch":
        return None
    end = stream.tell()
    if bytes(data[end : end + 8]) != _EOS:
        raise CorruptSegmentError("a segment holds one record batch, found more", key=key)
    if len(data) < SMALL_DECODE_MAX_BYTES:
        # the same schema and batch, read as a stream: its reader takes options
        one = pa.ipc.open_stream(pa.py_buffer(data)[8 : end + 8], options=_ONE_THREAD)
        return one.read_next_batch()
    return pa.ipc.read_record_batch(message, schema)
