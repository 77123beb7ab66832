"""Some columns of a segment: from a whole one, or from its head and ranged
reads of the rest, each range checked against the column table."""

from __future__ import annotations

from collections.abc import Callable, Iterator, Sequence

import crc32c
import pyarrow as pa

from arrowlog.errors import CorruptSegmentError, UnknownColumnError
from arrowlog.format.segment import column_table
from arrowlog.format.segment.column_table import COLUMNS_KEY, ColumnTable
from arrowlog.format.segment.dictionary import dictionary_decode
from arrowlog.format.segment.framing import CRC_PLACEHOLDER, CRC_VALUE, schema_region
from arrowlog.format.segment.header import (
    SegmentHeader,
    head_schema,
    header_from_metadata,
    user_metadata,
)


def column_indices(schema: pa.Schema, columns: Sequence[str]) -> list[int]:
    """Positions of ``columns`` in ``schema``, in the order asked.

    Raises:
        UnknownColumnError: a name is not a column of the schema, or is given twice,
            or no column is named.
    """
    if isinstance(columns, Iterator):
        raise UnknownColumnError("columns must be a list of column names, not an iterator")
    if isinstance(columns, str | bytes) or not columns:
        raise UnknownColumnError(
            f"columns must be a non-empty list of column names, got {columns!r}"
        )
    if len(set(columns)) != len(columns):
        raise UnknownColumnError(f"a column is named twice in {list(columns)}")
    names = schema.names
    missing = [c for c in columns if c not in names]
    if missing:
        raise UnknownColumnError(f"no column {missing[0]!r}: the topic has {names}")
    return [names.index(c) for c in columns]


def project(batch: pa.RecordBatch, key: str, wanted: Sequence[int] | None) -> pa.RecordBatch:
    """A segment's batch, read with only the columns at ``wanted`` (or all),
    dictionary-decoded, in the order of ``wanted``."""
    if wanted is None:
        return dictionary_decode(batch, key)
    included = sorted(wanted)
    batch = dictionary_decode(batch, key, included)
    if list(wanted) != included:
        order = [included.index(c) for c in wanted]
        fields = [batch.schema.field(i) for i in order]
        batch = pa.RecordBatch.from_arrays(
            [batch.column(i) for i in order],
            schema=pa.schema(fields).with_metadata(batch.schema.metadata or {}),
        )
    return batch


def checked(
    header: SegmentHeader, batch: pa.RecordBatch, key: str
) -> tuple[SegmentHeader, pa.RecordBatch]:
    # a commit object's records are in the staged objects it names, not in it
    held = 0 if header.refs is not None else header.record_count
    if held != batch.num_rows:
        raise CorruptSegmentError(
            f"header says {held} records, batch has {batch.num_rows}", key=key
        )
    return header, batch.replace_schema_metadata(user_metadata(batch.schema.metadata))


#: fetch these byte ranges of the segment (in parallel, in the order given)
RangeFetch = Callable[[list[tuple[int, int]]], list[bytes]]


def decode_columns(
    head: bytes, size: int, columns: Sequence[str], fetch: RangeFetch, *, key: str
) -> tuple[SegmentHeader, pa.RecordBatch] | None:
    """Some columns of a segment of ``size`` bytes from its first bytes
    (``head``) and ranged reads of the rest of its frame (everything before
    the record batch's body: schema, dictionaries, the batch's metadata) and of
    the columns' own bytes, each checked against the column table's CRCs
    before pyarrow parses it. Arrow's stream reader reads the file after its
    8-byte magic: the footer is never needed.

    Returns None when the segment has no usable column table (small, written
    before tables, a control record, or a table that fails its CRC): the caller
    reads it whole, and its checksum decides.

    Raises:
        CorruptSegmentError: the head is not a segment's, or a checked range
            fails its CRC.
        UnknownColumnError: ``columns`` names a column the segment lacks.
    """
    framed = _framed(head, key)
    if framed is None:
        return None
    schema, header, table = framed
    if table.body_end > size:
        return None
    wanted = column_indices(schema, columns)
    head_end = min(len(head), table.body_start)
    ranges = [] if head_end == table.body_start else [(head_end, table.body_start)]
    ranges += column_table.coalesce([table.columns[i][:2] for i in wanted], gap=_COALESCE_GAP)
    # Uninitialised: zeroing 8 MiB cost more than the column's GET. pyarrow reads
    # only the bytes written below (the frame and the included columns), every
    # one of them checked first.
    buf = pa.allocate_buffer(table.body_end)
    view = memoryview(buf).cast("B")
    view[:head_end] = head[:head_end]
    for (lo, hi), got in zip(ranges, fetch(ranges), strict=True):
        if len(got) != hi - lo:
            raise CorruptSegmentError(f"short range read at {lo}: {len(got)} bytes", key=key)
        view[lo:hi] = got
    _check_frame(view, table, key)
    _check_placement(view, table, schema, wanted, key)
    for i in wanted:
        lo, hi, crc = table.columns[i]
        if crc32c.crc32c(view[lo:hi]) != crc:
            raise CorruptSegmentError(f"checksum mismatch in column {schema.names[i]!r}", key=key)
    try:
        options = pa.ipc.IpcReadOptions(included_fields=sorted(wanted))
        stream = pa.ipc.open_stream(buf.slice(8), options=options)
        batch = project(stream.read_next_batch(), key, wanted)
    except (pa.ArrowException, OSError, StopIteration) as e:
        raise CorruptSegmentError(f"unreadable Arrow IPC: {e}", key=key) from e
    return checked(header, batch, key)


def frame_end(head: bytes | memoryview, key: str) -> int | None:
    """Where the frame of a segment ends (its body starts), from its first
    bytes: what a column read needs besides the columns. None if the segment
    is read whole anyway (no usable column table, a control record, a schema
    longer than ``head``).

    Raises:
        CorruptSegmentError: the head is not a segment's.
    """
    framed = _framed(head, key)
    return None if framed is None else framed[2].body_start


def _framed(
    head: bytes | memoryview, key: str
) -> tuple[pa.Schema, SegmentHeader, ColumnTable] | None:
    """The schema, header and column table in a segment's first bytes; None
    where it is read whole (a schema larger than the head, rare enough; a
    control record; no usable table)."""
    schema = head_schema(head, key)
    if isinstance(schema, int):
        return None
    meta = schema.metadata or {}
    header = header_from_metadata(meta, key, stats=False)
    raw = meta.get(COLUMNS_KEY)
    if header.identity.control or raw is None:
        return None
    table = ColumnTable.parse(raw, len(schema))
    return None if table is None else (schema, header, table)


# Columns closer than this are read in one request: on a store a request costs
# about as much as this many bytes.
_COALESCE_GAP = 256 * 1024


def _check_placement(
    view: memoryview, table: ColumnTable, schema: pa.Schema, wanted: list[int], key: str
) -> None:
    """Every buffer pyarrow will read for the wanted columns (as the record
    batch's checked metadata places them) lies within the column's range in
    the table: bytes outside the fetched ranges were never written into the
    buffer, nor checked.

    Raises:
        CorruptSegmentError: the metadata cannot be followed, or puts a buffer
            outside its column's range.
    """
    placed = column_table.placed_buffers(view, table.body_start, schema)
    if placed is None:
        raise CorruptSegmentError("record batch metadata does not match the schema", key=key)
    for i in wanted:
        lo, hi, _ = table.columns[i]
        if any(start < lo or end > hi for start, end in placed[i]):
            raise CorruptSegmentError(
                f"column {schema.names[i]!r} lies outside its range in the column table", key=key
            )


def _check_frame(view: memoryview, table: ColumnTable, key: str) -> None:
    """The frame's CRC, with the checksum and the column table of the schema
    message blanked as the writer had them (see :func:`fill_column_table`)."""
    where = [schema_region(view, key)]
    crc = [m.start(1) for m in CRC_VALUE.finditer(view, *where[0])]
    slots = column_table.table_slots(view, where)
    if len(crc) != 1 or not slots:
        raise CorruptSegmentError("checksum or column table missing", key=key)
    view[crc[0] : crc[0] + 8] = CRC_PLACEHOLDER
    width = column_table.table_width(len(table.columns))
    view[slots[0] : slots[0] + width] = b"-" * width
    if crc32c.crc32c(view[: table.body_start]) != table.frame_crc:
        raise CorruptSegmentError("checksum mismatch outside the columns", key=key)
