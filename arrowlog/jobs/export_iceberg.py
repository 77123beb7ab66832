"""Export the committed records of a topic to an Iceberg table, exactly once.

Each run appends what was committed since the previous run, in ONE Iceberg
snapshot whose summary records the offsets where the run ended
(``arrowlog.topic``, ``arrowlog.offsets`` as JSON ``{"<partition>": <next
offset>}``, or ``{"incarnation": N, "offsets": {...}}`` once the topic was
deleted and created again, and ``arrowlog.starting-offsets``). The next run
walks the main branch back from its current snapshot, takes the newest summary
of its topic and starts after it. If the table records an older incarnation of
the topic than the log has, the run refuses (``on_recreated="fail"``, the
default: :class:`~arrowlog.errors.TopicRecreatedError`) or exports the new
topic from its start (``"restart"``); never the new topic from the old
offsets. The range itself (one read_committed snapshot of the topic: a
transaction is in one export whole, never split between two), the position's
incarnation and the "nothing new" check are shared with the Delta export
(:mod:`arrowlog.jobs._export_range`).

Exactly once rests on the catalog's commit being a compare-and-swap: a snapshot
is committed only on top of the snapshot the run read its offsets from. Of two
exporters racing over the same range, one commit lands; the other gets
``CommitFailedException``, reloads the table, reads the offsets now recorded and
exports what is left after them (often nothing), up to :data:`MAX_ATTEMPTS`
times (then :class:`~arrowlog.errors.ExportConflictError`). pyiceberg's own retry would
instead rebase the append onto the winner's snapshot without looking at the
offsets, exporting the range twice: every export commits with it turned off (in
memory; the table's ``commit.retry.*`` properties are left as they are).

A crash (or SIGKILL) before the commit, or a lost race, leaves files that no
snapshot references (data files; after a crash also manifests, perhaps a
metadata file): readers never see them, the rerun exports the same range again,
and an orphan-file cleanup removes them. Apart from creating the table on a
first run, the catalog is written only by the commit. The offsets are also kept
in the table property ``arrowlog.offsets.<topic>``, set in the same commit: a
table whose arrowlog snapshots were expired (say, after compaction) still knows
where it is.

The range is read by arrowlog's own scan planner and segment reader (the ones
the Spark source runs on its executors), not through Spark: the rows and the
``topic``/``partition``/``offset``/``timestamp`` columns are the same as
``spark.read.format("arrowlog")`` gives, without a JVM (12-18 s to start here)
for a command-line job, and batches stream into the Iceberg writer instead of
being collected in the driver.

Catalog: pyiceberg's SQL catalog on SQLite by default (:meth:`CatalogConfig.sqlite`:
``<warehouse>/catalog.db``), or any pyiceberg catalog by its properties or by
name (``.pyiceberg.yaml``). The table (and namespace) is created on the first
export from the topic's schema, mapped onto Iceberg's types (:func:`iceberg_schema`).

    arrowlog export-iceberg TOPIC NAMESPACE.TABLE --root ROOT --warehouse DIR
    python -m arrowlog.jobs.export_iceberg ROOT TOPIC NAMESPACE.TABLE --warehouse DIR
    spark-submit spark_jobs/export_iceberg.py --root ROOT TOPIC NAMESPACE.TABLE --warehouse DIR
"""

from __future__ import annotations

import sys
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import click
import pyarrow as pa

import arrowlog
from arrowlog.errors import ArrowLogError, ExportConflictError, SchemaMismatchError
from arrowlog.jobs._export_options import (
    from_new_incarnation,
    position,
    run_with_progress,
    skip_deleted,
)
from arrowlog.jobs._export_range import (
    OFFSETS_KEY,
    STARTING_KEY,
    TOPIC_KEY,
    CountedRows,
    ExportRange,
    OnDataLoss,
    OnRecreated,
    Recorded,
    cast_batches,
    check_on_data_loss,
    check_on_recreated,
    format_recorded,
    next_range,
    parse_recorded,
    read_range_batches,
    tracker,
)
from arrowlog.jobs._iceberg_catalog import (
    CatalogConfig,
    check_identifier,
    iceberg_error,
    load_or_create,
    mapped,
)
from arrowlog.jobs._table_types import TableTypes
from arrowlog.jobs.commandline import (
    Session,
    json_object,
    leaf,
    run_job,
    with_examples,
)
from arrowlog.log.client import ArrowLog

if TYPE_CHECKING:
    from pyiceberg.catalog import Catalog
    from pyiceberg.table import Table

__all__ = [
    "OFFSETS_KEY",
    "STARTING_KEY",
    "TOPIC_KEY",
    "CatalogConfig",
    "IcebergExport",
    "check_identifier",
    "command",
    "export",
    "exported_offsets",
    "exported_position",
    "iceberg_schema",
    "main",
    "read_iceberg",
]

#: the table property holding a topic's offsets: ``arrowlog.offsets.<topic>``
PROPERTY_PREFIX = OFFSETS_KEY + "."
#: lost commit races before giving up (each one means another export landed)
MAX_ATTEMPTS = 20

#: pyiceberg's table property for its automatic commit retries
_COMMIT_RETRIES = "commit.retry.num-retries"


@dataclass(frozen=True)
class IcebergExport:
    """What one run did."""

    #: rows appended by this run (0: nothing new, or only markers and aborted records)
    rows: int
    #: the offsets the table records now
    offsets: dict[str, int]
    #: this run's snapshot; None when it committed nothing
    snapshot_id: int | None
    #: commits tried (more than 1: another exporter won a race)
    attempts: int
    #: the incarnation of the topic the offsets belong to
    incarnation: int = 0


# --- types --------------------------------------------------------------------------


_ICEBERG = TableTypes(
    "Iceberg", (pa.int32(), pa.int32(), pa.int64()), widen_small_ints=True, times=True
)


def iceberg_schema(topic_schema: pa.Schema) -> pa.Schema:
    """The Arrow schema an export writes: the topic's columns and the metadata
    columns (:func:`arrowlog.read.scan.output_schema`), each type mapped onto one
    Iceberg holds without loss: int8/int16/uint8/uint16 -> int, uint32 -> long,
    uint64 -> decimal(20, 0) (as Spark reads Parquet's UINT_64), float16 ->
    float, date64 -> date, time32 -> time (us), timestamps in seconds or
    milliseconds -> microseconds, a timestamp's zone -> UTC (the same instants),
    dictionaries -> their values, string and binary views -> string and binary,
    decimal256 up to precision 38 -> decimal, fixed-size lists -> lists.

    Raises:
        UnsupportedTypeError: a column has no lossless Iceberg type (nanosecond
            times and timestamps, durations, nulls, wider decimals, unions,
            structs without fields...).
            Nothing was written.
    """
    return _ICEBERG.schema(topic_schema)


# --- the table's record of what was exported ----------------------------------------


def exported_position(table: Table, topic: str) -> Recorded | None:
    """Where the newest export of ``topic`` ended, and the incarnation of the
    topic: the newest snapshot of the main branch's history whose summary
    names the topic; if its arrowlog snapshots were all expired, the table
    property ``arrowlog.offsets.<topic>``. None: nothing exported yet.

    Raises:
        CorruptObjectError: recorded offsets that are not valid.
    """
    from pyiceberg.table.snapshots import ancestors_of

    where = f"Iceberg table {'.'.join(table.name())}"
    for snapshot in ancestors_of(table.current_snapshot(), table.metadata):
        summary = snapshot.summary
        if summary is None or summary.get(TOPIC_KEY) != topic:
            continue
        offsets = summary.get(OFFSETS_KEY)
        if offsets is not None:
            return parse_recorded(offsets, f"{where}, snapshot {snapshot.snapshot_id}")
    kept = table.properties.get(PROPERTY_PREFIX + topic)
    return None if kept is None else parse_recorded(kept, where)


def exported_offsets(table: Table, topic: str) -> dict[str, int]:
    """The offsets of :func:`exported_position` (empty: nothing exported yet)."""
    recorded = exported_position(table, topic)
    return {} if recorded is None else recorded.offsets


# --- the export ---------------------------------------------------------------------


def export(
    log: ArrowLog | str,
    topic: str,
    identifier: str,
    *,
    catalog: Catalog | CatalogConfig,
    storage: Mapping[str, Any] | None = None,
    on_recreated: OnRecreated = "fail",
    on_data_loss: OnDataLoss = "fail",
    progress: Callable[[int, int], None] | None = None,
) -> IcebergExport:
    """Append the next committed range of ``topic`` to the Iceberg table
    ``identifier`` (created, with its namespace, if missing), in one snapshot
    that records the offsets. ``log`` is a connected log or its root URL (with
    ``storage`` options). ``on_recreated``: what to do when the table records
    an incarnation of the topic deleted since (``"fail"``, or ``"restart"``
    from the new topic's start). ``progress(done, total)`` follows the offsets
    read (markers and aborted records count too). ``on_data_loss``: what to
    do when records after the recorded offsets were deleted before this
    export read them (``"fail"``, or ``"skip"`` them and go on from the log
    start).

    Raises:
        InvalidNameError: a bad table identifier.
        UnknownTopicOrPartitionError: no such topic.
        TopicRecreatedError: the topic was deleted and created again since the
            last export, and ``on_recreated`` is ``"fail"`` (nothing written).
        UnsupportedTypeError: a column or value Iceberg cannot hold (nothing written).
        SchemaMismatchError: the table exists with columns that do not take
            the topic's (nothing written).
        OffsetOutOfRangeError: records after the recorded offsets were
            deleted before they were exported, and ``on_data_loss`` is
            ``"fail"`` (with ``"skip"`` the export goes on from the log start).
        ExportConflictError: other exporters won :data:`MAX_ATTEMPTS` commit
            races in a row (retriable).
        ExportTableError: pyiceberg or its catalog failed otherwise (its error
            is the cause).
        MissingDependencyError: pyiceberg is not installed.
    """
    parts = check_identifier(identifier)
    if not isinstance(log, str):
        return _export(log, topic, parts, catalog, on_recreated, on_data_loss, progress)
    owned = arrowlog.connect(log, dict(storage or {}))
    try:
        return _export(owned, topic, parts, catalog, on_recreated, on_data_loss, progress)
    finally:
        owned.close()


def _export(
    log: ArrowLog,
    topic: str,
    parts: tuple[str, ...],
    catalog: Catalog | CatalogConfig,
    on_recreated: OnRecreated,
    on_data_loss: OnDataLoss,
    progress: Callable[[int, int], None] | None,
) -> IcebergExport:
    check_on_recreated(on_recreated)
    check_on_data_loss(on_data_loss)
    where = f"Iceberg table {'.'.join(parts)}"
    schema = iceberg_schema(log.topic(topic, refresh=True).schema)  # before anything is written
    with mapped(where):
        if isinstance(catalog, CatalogConfig):
            catalog = catalog.open()
        table = load_or_create(catalog, parts, schema)
    lost: Exception | None = None
    for attempt in range(1, MAX_ATTEMPTS + 1):
        recorded = exported_position(table, topic)
        span = next_range(
            log, topic, recorded, on_recreated=on_recreated, on_data_loss=on_data_loss, where=where
        )
        if span.nothing_new:
            assert recorded is not None  # else every partition would be new
            return IcebergExport(0, recorded.offsets, None, attempt, recorded.incarnation)
        done = _append(table, log, span, schema, progress)
        if isinstance(done, tuple):
            rows, snapshot_id = done
            return IcebergExport(rows, span.ending_json(), snapshot_id, attempt, span.incarnation)
        lost = done
        with mapped(where):  # decide again from what the table records now
            table = catalog.load_table(parts)
    raise ExportConflictError(
        f"{where}: {MAX_ATTEMPTS} commits in a row lost to other writers; run the export again"
    ) from lost


def _append(
    table: Table,
    log: ArrowLog,
    span: ExportRange,
    schema: pa.Schema,
    progress: Callable[[int, int], None] | None,
) -> tuple[int, int] | Exception:
    """Append ``span`` to ``table`` in one snapshot recording its offsets, as
    a compare-and-swap on the snapshot ``table`` is at. Returns the rows and
    the snapshot id; pyiceberg's error if the commit did not land, or may not
    have."""
    from pyiceberg.exceptions import CommitFailedException, CommitStateUnknownException

    where = f"Iceberg table {'.'.join(table.name())}"
    tracked = None if progress is None else tracker(log, span, progress)
    counted = CountedRows(
        lambda: cast_batches(read_range_batches(log, span, progress=tracked), schema, where)
    )
    tx = _without_commit_retries(table).transaction()
    try:
        tx.append(_data(table, schema, counted), snapshot_properties=span.commit_metadata())
    except Exception as e:
        counted.raise_failure()  # reading the range failed: its own error
        if isinstance(e, ArrowLogError):
            raise
        if not counted.started and isinstance(e, ValueError):
            # pyiceberg checks the columns before it reads a row or writes a file
            raise SchemaMismatchError(
                f"{where} does not take topic {span.topic!r}'s columns: {e}"
            ) from e
        raise iceberg_error(e, where) from e
    with mapped(where):
        tx.set_properties(
            {PROPERTY_PREFIX + span.topic: format_recorded(span.incarnation, span.ending_json())}
        )
    try:
        committed = tx.commit_transaction()
    except CommitFailedException as e:
        # another commit landed first; this attempt's data files stay behind,
        # unreferenced, as after a crash (pyiceberg removes only its manifests)
        return e
    except CommitStateUnknownException as e:
        # (a REST catalog) nothing is cleaned up after an unknown outcome. The
        # commit was a CAS on the snapshot this attempt started from: if it
        # landed, the table records its offsets and the caller finds nothing
        # new; if not, the range is exported again, and should this attempt
        # land late after all, the new one fails its CAS
        return e
    except Exception as e:
        raise iceberg_error(e, where) from e
    snapshot = committed.current_snapshot()
    assert snapshot is not None
    return counted.rows, snapshot.snapshot_id


def _without_commit_retries(table: Table) -> Table:
    """``table`` as it is, but with pyiceberg's automatic commit retries off
    (an append retried onto another export's snapshot would export its range
    twice). The property lives in this copy of the metadata only."""
    from pyiceberg.table import Table

    properties = {**table.metadata.properties, _COMMIT_RETRIES: "0"}
    metadata = table.metadata.model_copy(update={"properties": properties})
    return Table(table.name(), metadata, table.metadata_location, table.io, table.catalog)


def _data(table: Table, schema: pa.Schema, rows: CountedRows) -> pa.Table | pa.RecordBatchReader:
    """The range's ``rows`` for ``append``: a stream (pyiceberg writes it in
    file-sized parts) into an unpartitioned table, one Arrow table into a
    partitioned one (pyiceberg streams only into unpartitioned tables)."""
    if table.spec().is_unpartitioned():
        return pa.RecordBatchReader.from_batches(schema, iter(rows))
    return pa.Table.from_batches(list(rows), schema)


def read_iceberg(catalog: Catalog | CatalogConfig, identifier: str) -> pa.Table:
    """The table's rows as the main branch's current snapshot holds them."""
    if isinstance(catalog, CatalogConfig):
        catalog = catalog.open()
    return catalog.load_table(check_identifier(identifier)).scan().to_arrow()


# --- the command -------------------------------------------------------------------


@click.command("export-iceberg")
@click.argument("topic")
@click.argument("table")
@click.option(
    "--warehouse",
    envvar="ARROWLOG_ICEBERG_WAREHOUSE",
    show_envvar=True,
    help="Where tables are written; a local one also keeps the default SQLite catalog "
    "(WAREHOUSE/catalog.db).",
)
@click.option(
    "--catalog-uri",
    envvar="ARROWLOG_ICEBERG_CATALOG_URI",
    show_envvar=True,
    help="The SQL catalog's SQLAlchemy URL (default: sqlite:///WAREHOUSE/catalog.db).",
)
@click.option(
    "--catalog-name",
    default="arrowlog",
    show_default=True,
    help="The catalog's name; alone, a catalog configured for pyiceberg (.pyiceberg.yaml).",
)
@click.option(
    "--catalog-properties",
    metavar="JSON",
    help='Any pyiceberg catalog, e.g. \'{"type": "rest", "uri": "http://..."}\'.',
)
@from_new_incarnation
@skip_deleted
@click.option("--no-progress", is_flag=True, help="No progress bar.")
@leaf(read_only=True)
@with_examples(
    "arrowlog export-iceberg events analytics.events --warehouse /data/iceberg",
    "arrowlog export-iceberg events analytics.events --root s3://bucket/logs "
    "--warehouse /data/iceberg",
    "arrowlog export-iceberg events db.events --catalog-properties "
    '\'{"type": "rest", "uri": "http://localhost:8181"}\'',
)
def command(
    session: Session,
    topic: str,
    table: str,
    warehouse: str | None,
    catalog_uri: str | None,
    catalog_name: str,
    catalog_properties: str | None,
    from_new_incarnation: bool,
    skip_deleted: bool,
    no_progress: bool,
) -> None:
    """Export TOPIC's newly committed records to the Iceberg table TABLE
    (NAMESPACE.NAME), exactly once.

    Each run appends from where the previous one ended to the end of one
    read_committed snapshot of the topic, in one Iceberg snapshot whose summary
    records the offsets and the topic's incarnation: a rerun, a crashed run's
    rerun or a second exporter racing this one never appends a row twice. The
    first run creates the table. The log is only read. Needs the iceberg extra.
    """
    check_identifier(table)
    if not (warehouse or catalog_uri or catalog_properties or catalog_name != "arrowlog"):
        raise click.UsageError(
            "no Iceberg catalog: pass --warehouse DIR (an SQLite catalog is kept there as "
            "catalog.db), --catalog-properties JSON, or --catalog-name NAME (.pyiceberg.yaml)",
            ctx=click.get_current_context(),
        )
    properties = json_object("--catalog-properties", catalog_properties or None)
    config = CatalogConfig.resolve(
        name=catalog_name, warehouse=warehouse, uri=catalog_uri, properties=properties
    )
    log = session.connect()
    result = run_with_progress(
        lambda progress: export(
            log, topic, table, catalog=config,
            on_recreated="restart" if from_new_incarnation else "fail",
            on_data_loss="skip" if skip_deleted else "fail", progress=progress,
        ),
        enabled=not no_progress,
    )  # fmt: skip
    if session.output == "json":
        session.json(
            {"topic": topic, "table": table, "rows": result.rows, "offsets": result.offsets,
             "incarnation": result.incarnation, "snapshot_id": result.snapshot_id,
             "attempts": result.attempts}
        )  # fmt: skip
        return
    where = f"snapshot {result.snapshot_id}" if result.snapshot_id else "no new snapshot"
    click.echo(
        f"exported {result.rows:,} rows of {topic} to {table} ({where}); "
        f"now at {position(result.offsets, result.incarnation)}"
    )


def main(argv: list[str] | None = None) -> int:
    """``python -m arrowlog.jobs.export_iceberg ROOT TOPIC TABLE [options]``: the
    same as ``arrowlog export-iceberg TOPIC TABLE --root ROOT [options]``."""
    return run_job(command, "export-iceberg", argv)


if __name__ == "__main__":
    sys.exit(main())
