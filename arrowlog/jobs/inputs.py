"""Input files and schemas given on the command line."""

from __future__ import annotations

import re
from collections.abc import Iterator
from pathlib import Path

import pyarrow as pa

from arrowlog.errors import InvalidConfigError

_FIELD = re.compile(r"\s*([^:\s]+)\s*:\s*(.+?)\s*(\bnot null)?\s*$", re.IGNORECASE)


def _kind(path: str) -> str:
    suffix = Path(path).suffix.lower()
    for kind, suffixes in (
        ("parquet", (".parquet", ".pq")),
        ("csv", (".csv",)),
        ("arrow", (".arrow", ".feather", ".ipc")),
    ):
        if suffix in suffixes:
            return kind
    raise InvalidConfigError(f"cannot read {path}: use .parquet, .csv or .arrow")


def open_input(path: str) -> tuple[pa.Schema, Iterator[pa.RecordBatch]]:
    """Schema and batches of a Parquet, CSV or Arrow IPC file.

    Raises:
        InvalidConfigError: an unknown file type.
        FileNotFoundError, pyarrow.ArrowInvalid: a missing or unreadable file.
    """
    kind = _kind(path)
    if kind == "parquet":
        import pyarrow.parquet as pq

        pf = pq.ParquetFile(path)
        return pf.schema_arrow, pf.iter_batches(batch_size=65_536)
    if kind == "csv":
        import pyarrow.csv as pcsv

        reader = pcsv.open_csv(path)
        return reader.schema, iter(reader)
    ipc = pa.ipc.open_file(path)
    return ipc.schema, (ipc.get_batch(i) for i in range(ipc.num_record_batches))


def as_topic_nullability(
    batches: Iterator[pa.RecordBatch], schema: pa.Schema
) -> Iterator[pa.RecordBatch]:
    """``batches`` whose top-level columns differ from ``schema`` only by being
    nullable where the topic's are not, given the topic's fields: pyarrow writes
    every Parquet column nullable, nulls or not. Data is not looked at here:
    a null under a not-null field is still refused when the batch is appended
    (SchemaMismatchError), as is any other difference."""
    for batch in batches:
        got = batch.schema
        if got.names == schema.names and not got.equals(schema, check_metadata=False):
            same = all(g.type.equals(w.type) for g, w in zip(got, schema, strict=True))
            if same:
                batch = pa.RecordBatch.from_arrays(batch.columns, schema=schema)
        yield batch


def row_count(path: str) -> int | None:
    """Rows in an input file, cheaply where the format says (None for CSV: it
    would take a pass over the file)."""
    kind = _kind(path)
    if kind == "parquet":
        import pyarrow.parquet as pq

        return int(pq.ParquetFile(path).metadata.num_rows)
    if kind == "arrow":
        ipc = pa.ipc.open_file(path)
        return sum(ipc.get_batch(i).num_rows for i in range(ipc.num_record_batches))
    return None


def parse_schema(text: str) -> pa.Schema:
    """A compact schema: ``"id: int64 not null, name: string, ts: timestamp[ms]"``.
    Types are pyarrow's aliases (``pa.type_for_alias``); nested types need a
    schema file (``--schema-from``).

    Raises:
        InvalidConfigError: the text is not such a schema.
    """
    fields = []
    for part in text.split(","):
        match = _FIELD.fullmatch(part)
        if match is None:
            raise InvalidConfigError(
                f"schema field {part.strip()!r}: write NAME: TYPE [not null], e.g. 'id: int64'"
            )
        name, alias, not_null = match.groups()
        try:
            kind = pa.type_for_alias(alias.strip().lower())  # type: ignore[arg-type]
        except ValueError:
            raise InvalidConfigError(
                f"schema field {name!r}: unknown type {alias!r} (use pyarrow names: int64, "
                "float64, string, bool, date32, timestamp[ms], ...)"
            ) from None
        fields.append(pa.field(name, kind, nullable=not_null is None))
    return pa.schema(fields)


def schema_of_file(path: str) -> pa.Schema:
    return open_input(path)[0]
