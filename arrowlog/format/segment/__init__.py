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
``arrowlog.compacted``
    in compacted objects only: the offsets they cover and the runs of records
    they hold (see :class:`~arrowlog.format.segment.header.Compaction`), with its CRC32C
    in ``arrowlog.compacted_crc32c``.
``arrowlog.columns``
    in segments of large batches only: where each column lies and its CRC32C
    (see :mod:`arrowlog.format.segment.column_table`), so that a reader of a few columns
    fetches and checks only those.

The CRC is checked before pyarrow parses the body, so corrupt bytes never reach
the IPC reader.
"""

from arrowlog.format.segment.codec import (
    HEADER_SLACK,
    check_schema,
    compression_slack,
    decode_segment,
    empty_batch,
    encode,
    encode_segment,
    metadata_slack,
    one_batch,
    segment_size_floor,
)
from arrowlog.format.segment.column_table import COLUMNS_KEY
from arrowlog.format.segment.dictionary import has_dictionaries
from arrowlog.format.segment.header import (
    CRC_KEY,
    DICTIONARY_KEY,
    FORMAT_VERSION,
    HEAD_BYTES,
    HEADER_CRC_KEY,
    HEADER_KEY,
    PLAIN_APPEND,
    STAGED_VERSION,
    Compaction,
    Ref,
    SegmentHeader,
    WriterIdentity,
    head_length,
    read_header,
)
from arrowlog.format.segment.projection import RangeFetch, column_indices, decode_columns

__all__ = [
    "HEADER_SLACK",
    "Compaction",
    "COLUMNS_KEY",
    "CRC_KEY",
    "DICTIONARY_KEY",
    "FORMAT_VERSION",
    "HEADER_CRC_KEY",
    "HEADER_KEY",
    "HEAD_BYTES",
    "PLAIN_APPEND",
    "STAGED_VERSION",
    "RangeFetch",
    "Ref",
    "SegmentHeader",
    "WriterIdentity",
    "head_length",
    "check_schema",
    "column_indices",
    "compression_slack",
    "decode_columns",
    "decode_segment",
    "empty_batch",
    "one_batch",
    "encode",
    "encode_segment",
    "has_dictionaries",
    "metadata_slack",
    "read_header",
    "segment_size_floor",
]
