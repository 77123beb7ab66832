"""The on-store format of one segment: an Arrow IPC file holding one record batch.

A segment is a plain Arrow IPC file (``pyarrow.ipc.open_file`` reads it), with
arrowlog's header in the schema's custom metadata:

``arrowlog.header``
    compact JSON: format version, base offset, record count, producer id, epoch,
    base sequence, transactional and control flags, transactional id, append
    timestamp (ms) and the append id that lets a writer recognise its own write
    after a lost reply.
``arrowlog.header_crc32c``
    CRC32C of the header JSON, so that the header can be trusted from the first
    few KiB of the object alone (opening a partition reads only that much of the
    last segment).
``arrowlog.crc32c``
    CRC32C of the whole file, computed with this value's 8 hex digits replaced by
    ``-`` (the value sits twice in the file, in the schema message and in the
    footer's copy of the schema; both are replaced). Every byte flip and every
    truncation is detected, padding and footer included.

The CRC is checked before pyarrow parses the body, so corrupt bytes never reach
the IPC reader.
"""

from __future__ import annotations

import functools
import json
import re
import struct
from dataclasses import dataclass
from typing import Any, Literal

import crc32c
import pyarrow as pa

from arrowlog.config import Compression
from arrowlog.errors import CorruptSegmentError, InvalidConfigError

FORMAT_VERSION = 1
HEADER_KEY = b"arrowlog.header"
HEADER_CRC_KEY = b"arrowlog.header_crc32c"
CRC_KEY = b"arrowlog.crc32c"
#: JSON list of the columns stored dictionary-encoded (compressed topics only)
DICTIONARY_KEY = b"arrowlog.dictionary"
#: pyarrow's name of each topic compression
_IPC_CODECS: dict[Compression, Literal["lz4", "zstd"] | None] = {
    Compression.ZSTD: "zstd",
    Compression.LZ4: "lz4",
    Compression.NONE: None,
}
_CRC_TAG = b"arrowlog-crc32c:"
_CRC_PLACEHOLDER = b"--------"
_CRC_VALUE = re.compile(re.escape(_CRC_TAG) + rb"([0-9a-f]{8}|-{8})")
_MAGIC = b"ARROW1"
_CONTINUATION = 0xFFFFFFFF
# Enough for the schema message of any ordinary topic; larger schemas cost one more
# ranged read.
HEAD_BYTES = 16 * 1024


@dataclass(frozen=True, kw_only=True, slots=True)
class WriterIdentity:
    """Who wrote a batch, and in what role; defaults describe a plain append."""

    producer_id: int = -1
    producer_epoch: int = -1
    base_sequence: int = -1
    transactional: bool = False
    #: "COMMIT" or "ABORT" for a control record (a transaction marker), else None.
    control_type: str | None = None
    transactional_id: str | None = None
    #: for a marker: the transaction's records in this partition lie below this
    #: offset (its bound, fixed at PREPARE_COMMIT); records of it at or past the
    #: bound never belong to it
    txn_bound: int = -1

    @property
    def control(self) -> bool:
        return self.control_type is not None


PLAIN_APPEND = WriterIdentity()
_IDENTITY_FIELDS = tuple(WriterIdentity.__dataclass_fields__)


@dataclass(frozen=True, kw_only=True, slots=True)
class SegmentHeader:
    """What a segment says about itself. Offsets ``[base_offset, next_offset)``."""

    base_offset: int
    record_count: int
    timestamp_ms: int
    append_id: str
    identity: WriterIdentity = PLAIN_APPEND

    @property
    def next_offset(self) -> int:
        return self.base_offset + self.record_count

    @property
    def last_offset(self) -> int:
        return self.base_offset + self.record_count - 1

    def to_json(self) -> bytes:
        # One flat JSON object: the identity's fields sit beside the offsets.
        fields = {
            "v": FORMAT_VERSION,
            "base_offset": self.base_offset,
            "record_count": self.record_count,
            "timestamp_ms": self.timestamp_ms,
            "append_id": self.append_id,
            # not dataclasses.asdict: its deep copy was a tenth of an append's CPU
            **{name: getattr(self.identity, name) for name in _IDENTITY_FIELDS},
        }
        return json.dumps(fields, sort_keys=True, separators=(",", ":")).encode()

    @classmethod
    def from_json(cls, raw: bytes, *, key: str) -> SegmentHeader:
        try:
            fields = json.loads(raw)
            version = fields.pop("v")
            if version != FORMAT_VERSION:
                raise CorruptSegmentError(f"unsupported segment format version {version}", key=key)
            identity = {f: fields.pop(f) for f in _IDENTITY_FIELDS if f in fields}
            header = cls(**fields, identity=WriterIdentity(**identity))
        except CorruptSegmentError:
            raise
        except (ValueError, TypeError, KeyError) as e:
            raise CorruptSegmentError(f"unreadable segment header: {e}", key=key) from e
        if header.base_offset < 0 or header.record_count < 1:
            raise CorruptSegmentError("segment header has impossible offsets", key=key)
        return header


def _hex(value: int) -> bytes:
    return b"%08x" % value


def encode_segment(
    batch: pa.RecordBatch, header: SegmentHeader, compression: Compression = Compression.NONE
) -> memoryview:
    """Serialise ``batch`` with ``header`` into the bytes of one segment (a view of
    Arrow-owned memory: the segment is written and checksummed without a copy).
    With ``compression``, Arrow compresses each buffer of the record batch (the
    schema message, and so the header, stay plain), and top-level string and
    binary columns with repeated values are stored dictionary-encoded (see
    :func:`_dictionary_encode`); the checksum covers the stored bytes."""
    header_json = header.to_json()
    encoded: list[int] = []
    if compression is not Compression.NONE:
        batch, encoded = _dictionary_encode(batch)
    metadata = dict(batch.schema.metadata or {})
    if encoded:
        metadata[DICTIONARY_KEY] = json.dumps(encoded).encode()
    metadata[HEADER_KEY] = header_json
    metadata[HEADER_CRC_KEY] = _hex(crc32c.crc32c(header_json))
    metadata[CRC_KEY] = _CRC_TAG + _CRC_PLACEHOLDER
    sink = pa.BufferOutputStream()
    options = pa.ipc.IpcWriteOptions(compression=_IPC_CODECS[compression])
    with pa.ipc.new_file(sink, batch.schema.with_metadata(metadata), options=options) as writer:
        writer.write_batch(batch)
    data = memoryview(sink.getvalue()).cast("B")
    slots = _crc_slots(data, key="<new segment>")
    crc = _file_crc(data, slots)
    for start in slots:
        data[start : start + 8] = _hex(crc)
    return data


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
    strings = sum(1 for f in batch.schema if _dictionary_candidate(f.type))
    return 64 + 48 * (len(buffers) + 1) + blocks + 512 * strings


def has_dictionaries(schema: pa.Schema) -> bool:
    """Whether a schema holds a dictionary type anywhere: its values are not in
    :func:`segment_size_floor`, so no cheap bound covers its segments."""

    def walk(t: pa.DataType) -> bool:
        if pa.types.is_dictionary(t):
            return True
        return any(walk(t.field(i).type) for i in range(t.num_fields))

    return any(walk(f.type) for f in schema)


def _dictionary_candidate(t: pa.DataType) -> bool:
    """Top-level column types stored dictionary-encoded when that makes them smaller."""
    return bool(
        pa.types.is_string(t)
        or pa.types.is_large_string(t)
        or pa.types.is_binary(t)
        or pa.types.is_large_binary(t)
    )


def _dictionary_encode(batch: pa.RecordBatch) -> tuple[pa.RecordBatch, list[int]]:
    """The batch with its string and binary columns dictionary-encoded where
    that takes fewer bytes, and the indices of those columns.

    Arrow IPC has no encodings but compression, and a string column's offsets
    (a different number on every row) compress badly: a column of four distinct
    words took 2.6 MB of ZSTD where Parquet's dictionary needs 9 KB. Indices are
    the narrowest integer the dictionary needs, and compress to almost nothing.
    Readers decode them back (:func:`_dictionary_decode`); the field keeps its
    name, nullability and metadata."""
    replaced: dict[int, pa.Array[Any]] = {}
    for i, (f, column) in enumerate(zip(batch.schema, batch.columns, strict=True)):
        if not _dictionary_candidate(f.type) or len(column) < 2:
            continue
        dictionary: Any = column.dictionary_encode()  # the stubs type it too narrowly
        size = len(dictionary.dictionary)
        width = pa.int8() if size < 2**7 else pa.int16() if size < 2**15 else pa.int32()
        narrow = pa.DictionaryArray.from_arrays(
            dictionary.indices.cast(width), dictionary.dictionary
        )
        if narrow.nbytes < column.nbytes:
            replaced[i] = narrow
    return _with_columns(batch, replaced), sorted(replaced)


def _with_columns(batch: pa.RecordBatch, replaced: dict[int, pa.Array[Any]]) -> pa.RecordBatch:
    """``batch`` with columns replaced by others of the same values in another
    type; each field keeps its name, nullability and metadata."""
    if not replaced:
        return batch
    columns = list(batch.columns)
    fields = list(batch.schema)
    for i, column in replaced.items():
        f = fields[i]
        columns[i] = column
        fields[i] = pa.field(f.name, column.type, nullable=f.nullable, metadata=f.metadata)
    schema = pa.schema(fields).with_metadata(batch.schema.metadata or {})
    return pa.RecordBatch.from_arrays(columns, schema=schema)


def _dictionary_decode(batch: pa.RecordBatch, key: str) -> pa.RecordBatch:
    """Undo :func:`_dictionary_encode` on a batch read from a segment."""
    raw = (batch.schema.metadata or {}).get(DICTIONARY_KEY)
    if raw is None:
        return batch
    replaced: dict[int, pa.Array[Any]] = {}
    try:
        encoded = json.loads(raw)
        if not isinstance(encoded, list) or len(set(encoded)) != len(encoded):
            raise ValueError("not a list of distinct column indices")
        for i in encoded:
            if type(i) is not int or not 0 <= i < batch.num_columns:
                raise ValueError(f"no column {i!r}")
            f = batch.schema.field(i)
            if not pa.types.is_dictionary(f.type) or not _dictionary_candidate(f.type.value_type):
                raise ValueError(f"column {f.name!r} is no dictionary of strings or bytes")
            column: Any = batch.column(i)  # a DictionaryArray: checked above
            replaced[i] = column.dictionary_decode()
    except (ValueError, TypeError, IndexError, RecursionError, pa.ArrowException) as e:
        raise CorruptSegmentError(f"bad dictionary columns: {e}", key=key) from e
    return _with_columns(batch, replaced)


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
    if _CRC_TAG in schema.serialize().to_pybytes():
        where = [
            f"field {f.name!r}"
            for f in schema
            if _CRC_TAG in pa.schema([f]).serialize().to_pybytes()
        ]
        raise InvalidConfigError(
            f"{(where or ['the schema metadata'])[0]} contains {_CRC_TAG.decode()!r}, "
            "arrowlog's checksum tag"
        )


def _regions(
    data: bytes | bytearray | memoryview, key: str
) -> tuple[tuple[int, int], tuple[int, int]]:
    """The byte ranges of the schema message and of the footer, from the framing."""
    n = len(data)
    if n < 26 or data[:6] != _MAGIC or data[-6:] != _MAGIC:
        raise CorruptSegmentError(f"not an Arrow IPC file ({n} bytes; truncated?)", key=key)
    continuation, schema_len = struct.unpack_from("<Ii", data, 8)
    (footer_len,) = struct.unpack_from("<i", data, n - 10)
    schema_end = 16 + schema_len
    footer_start = n - 10 - footer_len
    if continuation != _CONTINUATION or schema_len <= 0 or footer_len <= 0:
        raise CorruptSegmentError("bad IPC framing", key=key)
    if not schema_end <= footer_start < n - 10:
        raise CorruptSegmentError("bad IPC framing (overlapping regions)", key=key)
    return (16, schema_end), (footer_start, n - 10)


def _crc_slots(data: bytes | bytearray | memoryview, key: str) -> tuple[int, int]:
    slots = []
    for lo, hi in _regions(data, key):
        found = list(_CRC_VALUE.finditer(data, lo, hi))
        if len(found) != 1:
            raise CorruptSegmentError("checksum field missing or repeated", key=key)
        slots.append(found[0].start(1))
    if data[slots[0] : slots[0] + 8] != data[slots[1] : slots[1] + 8]:
        raise CorruptSegmentError("checksum fields disagree", key=key)
    return slots[0], slots[1]


def _file_crc(data: bytes | bytearray | memoryview, slots: tuple[int, int]) -> int:
    view = memoryview(data)
    a, b = slots
    crc = crc32c.crc32c(view[:a])
    crc = crc32c.crc32c(_CRC_PLACEHOLDER, crc)
    crc = crc32c.crc32c(view[a + 8 : b], crc)
    crc = crc32c.crc32c(_CRC_PLACEHOLDER, crc)
    return int(crc32c.crc32c(view[b + 8 :], crc))


def decode_segment(data: bytes | memoryview, *, key: str) -> tuple[SegmentHeader, pa.RecordBatch]:
    """Verify and parse a whole segment.

    Raises:
        CorruptSegmentError: the checksum does not match, the object is truncated
            or not a segment.
    """
    slots = _crc_slots(data, key)
    stored = bytes(data[slots[0] : slots[0] + 8])
    if stored == _CRC_PLACEHOLDER or int(stored, 16) != _file_crc(data, slots):
        raise CorruptSegmentError("checksum mismatch", key=key)
    try:
        reader = pa.ipc.open_file(pa.py_buffer(data))
        if reader.num_record_batches != 1:
            raise CorruptSegmentError(
                f"a segment holds one record batch, found {reader.num_record_batches}", key=key
            )
        batch = reader.get_batch(0)
    except pa.ArrowException as e:
        raise CorruptSegmentError(f"unreadable Arrow IPC: {e}", key=key) from e
    header = _header_from_metadata(batch.schema.metadata, key)
    batch = _dictionary_decode(batch, key)
    if header.record_count != batch.num_rows:
        raise CorruptSegmentError(
            f"header says {header.record_count} records, batch has {batch.num_rows}", key=key
        )
    return header, batch.replace_schema_metadata(_user_metadata(batch.schema.metadata))


def read_header(head: bytes | memoryview, *, key: str) -> SegmentHeader | int:
    """The header from the first bytes of a segment, checked by its own CRC.

    Returns the number of bytes needed instead, if ``head`` is too short to hold
    the whole schema message.

    Raises:
        CorruptSegmentError: the bytes are not the start of a segment.
    """
    if len(head) < 16 or head[:6] != _MAGIC:
        raise CorruptSegmentError("not an Arrow IPC file", key=key)
    continuation, schema_len = struct.unpack_from("<Ii", head, 8)
    if continuation != _CONTINUATION or schema_len <= 0:
        raise CorruptSegmentError("bad IPC framing", key=key)
    if len(head) < 16 + schema_len:
        return int(16 + schema_len)
    try:
        schema = pa.ipc.read_schema(pa.py_buffer(head[8 : 16 + schema_len]))
    except pa.ArrowException as e:
        raise CorruptSegmentError(f"unreadable schema message: {e}", key=key) from e
    return _header_from_metadata(schema.metadata, key)


def _header_from_metadata(metadata: dict[bytes, bytes] | None, key: str) -> SegmentHeader:
    metadata = metadata or {}
    raw = metadata.get(HEADER_KEY)
    crc = metadata.get(HEADER_CRC_KEY)
    if raw is None or crc is None:
        raise CorruptSegmentError("no arrowlog header: not a segment", key=key)
    if crc != _hex(crc32c.crc32c(raw)):
        raise CorruptSegmentError("header checksum mismatch", key=key)
    return SegmentHeader.from_json(raw, key=key)


def _user_metadata(metadata: dict[bytes, bytes] | None) -> dict[bytes, bytes] | None:
    kept = {k: v for k, v in (metadata or {}).items() if not k.startswith(b"arrowlog.")}
    return kept or None
