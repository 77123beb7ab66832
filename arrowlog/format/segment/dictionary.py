"""Top-level string and binary columns stored dictionary-encoded in compressed
segments, and decoded back on read."""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any

import pyarrow as pa

from arrowlog.errors import CorruptSegmentError
from arrowlog.format.segment.header import DICTIONARY_KEY
from arrowlog.format.stats import is_stringy


def has_dictionaries(schema: pa.Schema) -> bool:
    """Whether a schema holds a dictionary type anywhere: its values are not in
    :func:`segment_size_floor`, so no cheap bound covers its segments."""

    def walk(t: pa.DataType) -> bool:
        if pa.types.is_dictionary(t):
            return True
        return any(walk(t.field(i).type) for i in range(t.num_fields))

    return any(walk(f.type) for f in schema)


def dictionary_candidate(t: pa.DataType) -> bool:
    """Top-level column types stored dictionary-encoded when that makes them smaller."""
    return is_stringy(t)


def dictionary_encode(batch: pa.RecordBatch) -> tuple[pa.RecordBatch, list[int]]:
    """The batch with its string and binary columns dictionary-encoded where
    that takes fewer bytes, and the indices of those columns.

    Arrow IPC has no encodings but compression, and a string column's offsets
    (a different number on every row) compress badly: a column of four distinct
    words took 2.6 MB of ZSTD where Parquet's dictionary needs 9 KB. Indices are
    the narrowest integer the dictionary needs, and compress to almost nothing.
    Readers decode them back (:func:`dictionary_decode`); the field keeps its
    name, nullability and metadata."""
    replaced: dict[int, pa.Array[Any]] = {}
    for i, (f, column) in enumerate(zip(batch.schema, batch.columns, strict=True)):
        if not dictionary_candidate(f.type) or len(column) < 2:
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


def dictionary_decode(
    batch: pa.RecordBatch, key: str, included: Sequence[int] | None = None
) -> pa.RecordBatch:
    """Undo :func:`dictionary_encode` on a batch read from a segment; with
    ``included``, the batch holds only those columns of the segment (ascending)."""
    raw = (batch.schema.metadata or {}).get(DICTIONARY_KEY)
    if raw is None:
        return batch
    position = {c: i for i, c in enumerate(included)} if included is not None else None
    replaced: dict[int, pa.Array[Any]] = {}
    try:
        encoded = json.loads(raw)
        if not isinstance(encoded, list) or len(set(encoded)) != len(encoded):
            raise ValueError("not a list of distinct column indices")
        for c in encoded:
            if type(c) is not int:
                raise ValueError(f"no column {c!r}")
            i = c if position is None else position.get(c, -1)
            if position is not None and i < 0:
                continue  # a column not read
            if not 0 <= i < batch.num_columns:
                raise ValueError(f"no column {c!r}")
            f = batch.schema.field(i)
            if not pa.types.is_dictionary(f.type) or not dictionary_candidate(f.type.value_type):
                raise ValueError(f"column {f.name!r} is no dictionary of strings or bytes")
            column: Any = batch.column(i)  # a DictionaryArray: checked above
            replaced[i] = column.dictionary_decode()
    except (ValueError, TypeError, IndexError, RecursionError, pa.ArrowException) as e:
        raise CorruptSegmentError(f"bad dictionary columns: {e}", key=key) from e
    return _with_columns(batch, replaced)
