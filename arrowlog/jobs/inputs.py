"""Input files and schemas given on the command line."""

from __future__ import annotations

import re
from collections.abc import Iterator
from pathlib import Path

import pyarrow as pa

from arrowlog.errors import InvalidConfigError, SchemaMismatchError

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
    batches: Iterator[pa.RecordBatch], schema: pa.Schema, path: str
) -> Iterator[pa.RecordBatch]:
    """``batches`` of the file ``path``, given ``schema``'s fields where they
    differ from it only by being nullable where the topic's are not, and the
    file proves before anything is written that those columns hold no null:
    pyarrow writes every Parquet column nullable, nulls or not. The proof is a
    Parquet file's footer (every row group's null count; the values of a
    nested column or one without statistics) or a pass over an Arrow file;
    without one (a CSV file) the batches are left as they are, and refused
    whole, before any write, if their schema differs. A load never writes
    part of a file and then refuses a null.

    Raises:
        SchemaMismatchError: a not-null column of the topic holds a null in
            the file (found before anything is written).
    """
    found = _nulls(path, schema)
    if found:
        raise SchemaMismatchError(
            f"column {found!r} of {path} holds null(s), and the topic's {found!r} is not "
            "null: nothing was written"
        )
    relabel = found is None
    return (_relabeled(b, schema) if relabel else b for b in batches)


def _relabeled(batch: pa.RecordBatch, schema: pa.Schema) -> pa.RecordBatch:
    got = batch.schema
    if (
        got.names == schema.names
        and not got.equals(schema, check_metadata=False)
        and all(g.type.equals(w.type) for g, w in zip(got, schema, strict=True))
    ):
        return pa.RecordBatch.from_arrays(batch.columns, schema=schema)
    return batch


def _nulls(path: str, schema: pa.Schema) -> str | None:
    """The first of ``schema``'s not-null top-level columns that holds a null
    in the file; None when the file proves none does; "" when it cannot say
    (a CSV file, a column it lacks)."""
    strict = [f.name for f in schema if not f.nullable]
    kind = _kind(path)
    if kind == "parquet":
        import pyarrow.parquet as pq

        pf = pq.ParquetFile(path)
        meta = pf.metadata
        if any(n not in pf.schema_arrow.names for n in strict):
            return ""  # the append says what is missing
        where = {meta.schema.column(i).path: i for i in range(meta.num_columns)}
        for name in strict:
            for g in range(meta.num_row_groups):
                if name in where:  # a leaf: its footer statistics say
                    stats = meta.row_group(g).column(where[name]).statistics
                    if stats is not None and stats.has_null_count:  # type: ignore[attr-defined]
                        if stats.null_count:
                            return name
                        continue
                # a struct, list or map, or no statistics: its row group's values
                if pf.read_row_group(g, columns=[name]).column(0).null_count:
                    return name
        return None
    if kind == "arrow":
        ipc = pa.ipc.open_file(path)
        if any(n not in ipc.schema.names for n in strict):
            return ""
        for i in range(ipc.num_record_batches):
            batch = ipc.get_batch(i)
            for name in strict:
                if batch.column(name).null_count:
                    return name
        return None
    return ""


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
