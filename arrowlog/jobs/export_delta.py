"""Export the committed records of a topic to a Delta table, exactly once.

Each run appends what was committed since the previous run, in ONE Delta
commit (delta-rs) that also records where the run ended, as Delta app
transactions (``txn`` actions: the table's own record of an application's
progress, kept in its snapshots and checkpoints):

- ``arrowlog-export.<topic>``: the run number, 0 for the first export;
- ``arrowlog-export.<topic>/incarnation``: the incarnation of the topic the
  offsets belong to (a topic deleted and created again under its name is a
  new log);
- ``arrowlog-export.<prefix>/<partition>``: the next offset of each
  partition, ``<prefix>`` being the topic's name in incarnation 0 and
  ``<topic>=<incarnation>`` after (as the topic's objects are keyed); only
  partitions whose offset moved are written again.

The commit's metadata says the same for people (``arrowlog.topic``,
``arrowlog.offsets``, ``arrowlog.starting-offsets``), and names the commit
(``arrowlog.export-run``, an id of its own): a run whose commit landed behind a
lost reply (delta-rs then finds the version taken, by itself) finds its commit
there and reports it as its own. Tables written before
incarnations were recorded hold only the run number and the metadata: they are
read as incarnation 0, from the newest commit's metadata.

**Decided at commit time.** A run reads the recorded position from one version
of the table, plans the range after it, and commits on top of that very
version: delta-rs checks every commit that landed since for an app transaction
of the same id, and fails this one (``CommitFailedError``) if another export of
the topic got there first. Two runs that planned the same range never both
land; the loser reads the table again and exports what is left (often
nothing), up to :data:`MAX_ATTEMPTS` times, then raises
:class:`~arrowlog.errors.ExportConflictError`. Before writing any file a run
checks that the run number has not moved, so a run that starts after another
one committed writes nothing; a loser of a true race (both writing at once)
leaves its data files behind, referenced by no version: readers never see them,
and ``DeltaTable(path).vacuum(full=True, dry_run=False)`` deletes them once
older than the table's retention (7 days by default). A first export creates
the table empty (its columns, no rows) at version 0 and then appends as above;
of two first exports, one creates it and the other uses it.

**A re-created topic.** When the table records an older incarnation of the
topic than the log has, the run refuses (``on_recreated="fail"``, the default:
:class:`~arrowlog.errors.TopicRecreatedError`, nothing written) or exports the
new topic from its start (``on_recreated="restart"``, the command line's
``--from-new-incarnation``); never the new topic from the old offsets.

**Reading.** :func:`run_export` (and ``arrowlog export-delta``) read the range
with arrowlog's own scan planner and segment reader, the ones the Spark source
runs on its executors: the rows and the ``topic``/``partition``/``offset``/
``timestamp`` columns are the ones ``spark.read.format("arrowlog")`` gives,
without a JVM to start (12-18 s here) and streamed into delta-rs instead of
collected in one process. :func:`export` is the same export from a Spark job:
the range is read through the Spark session, and the same delta-rs commit
decides. Column types Delta lacks are mapped without loss (:func:`delta_schema`).

    arrowlog export-delta TOPIC DELTA_PATH --root ROOT [--delta-storage-options JSON]
    python -m arrowlog.jobs.export_delta ROOT TOPIC DELTA_PATH [options]
    spark-submit spark_jobs/export_delta.py --root ROOT TOPIC DELTA_PATH [options]

The Delta table's side (what it records, the conditional commit, delta-rs's
errors) is :mod:`arrowlog.jobs._delta_table`.
"""

from __future__ import annotations

import functools
import sys
import uuid
from collections.abc import Callable, Mapping
from typing import Any
from urllib.parse import urlsplit

import click
import pyarrow as pa

import arrowlog
from arrowlog._extras import require_extra
from arrowlog.errors import (
    ArrowLogError,
    ExportConflictError,
    InvalidConfigError,
    UnknownTopicOrPartitionError,
)
from arrowlog.jobs._delta_table import (
    Attempt,
    DeltaExport,
    ExportState,
    Read,
    app_id,
    commit,
    create_if_missing,
    delta_storage,
    exported_state,
    incarnation_app_id,
    landed,
    mapped,
    moved,
    offset_app_id,
    table_state,
)
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
    ExportRange,
    OnDataLoss,
    OnRecreated,
    cast_batches,
    check_on_data_loss,
    check_on_recreated,
    explain_failed_read,
    next_range,
    read_range_batches,
    spark_reader,
    tracker,
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

__all__ = [
    "MAX_ATTEMPTS",
    "OFFSETS_KEY",
    "STARTING_KEY",
    "TOPIC_KEY",
    "DeltaExport",
    "ExportState",
    "app_id",
    "check_path",
    "command",
    "delta_schema",
    "export",
    "exported_state",
    "incarnation_app_id",
    "main",
    "offset_app_id",
    "read_delta",
    "run_export",
]

#: lost commit races before giving up (each one means another export landed)
MAX_ATTEMPTS = 20
# --- types --------------------------------------------------------------------------


_DELTA = TableTypes("Delta", (pa.int16(), pa.int32(), pa.int64()), nanoseconds=True, nulls=True)


def delta_schema(topic_schema: pa.Schema) -> pa.Schema:
    """The Arrow schema an export writes: the topic's columns and the metadata
    columns (:func:`arrowlog.read.scan.output_schema`), each type mapped onto one
    Delta holds without loss: uint8 -> short, uint16 -> int, uint32 -> long,
    uint64 -> decimal(20, 0) (as Spark reads Parquet's UINT_64), float16 ->
    float, date64 -> date, timestamps -> microseconds (a zone -> UTC, the
    same instants; nanoseconds only where exact, as the Spark source reads
    them), dictionaries -> their values, string and binary views -> string
    and binary, decimal256 up to precision 38 -> decimal, fixed-size lists ->
    lists. delta-rs would otherwise write an unsigned value past the signed
    range as a failed cast and truncate nanoseconds.

    Raises:
        UnsupportedTypeError: a column has no Delta type (times of day,
            durations, wider decimals, unions, structs without fields...).
            Nothing was written.
    """
    return _DELTA.schema(topic_schema)


# --- the export ---------------------------------------------------------------------


def run_export(
    log: ArrowLog | str,
    topic: str,
    path: str,
    *,
    storage: Mapping[str, Any] | None = None,
    delta_storage: Mapping[str, str] | None = None,
    on_recreated: OnRecreated = "fail",
    on_data_loss: OnDataLoss = "fail",
    progress: Callable[[int, int], None] | None = None,
) -> DeltaExport:
    """Append the next committed range of ``topic`` to the Delta table at
    ``path`` (created on the first export), in one commit that records the
    offsets, read without Spark. ``log`` is a connected log or its root URL
    (with ``storage`` options); ``delta_storage`` are delta-rs's storage
    options for ``path`` (``AWS_ENDPOINT_URL``, ``AWS_ACCESS_KEY_ID``, ...).
    ``on_recreated``: what to do when the table records an incarnation of the
    topic deleted since (``"fail"`` or ``"restart"`` from the new topic's
    start). ``progress(done, total)`` follows the offsets read (markers and
    aborted records count too). ``on_data_loss``: what to do when records
    after the recorded offsets were deleted before this export read them
    (``"fail"``, or ``"skip"`` them and go on from the log start).

    Raises:
        UnknownTopicOrPartitionError: no such topic.
        TopicRecreatedError: the topic was deleted and created again since the
            last export, and ``on_recreated`` is ``"fail"`` (nothing written).
        UnsupportedTypeError: a column or value Delta cannot hold (nothing written).
        SchemaMismatchError: the table exists with columns that do not take
            the topic's (nothing written).
        OffsetOutOfRangeError: records after the recorded offsets were
            deleted before they were exported, and ``on_data_loss`` is
            ``"fail"`` (with ``"skip"`` the export goes on from the log start).
        ExportConflictError: other exports of the topic won
            :data:`MAX_ATTEMPTS` commit races in a row (retriable).
        ExportTableError: delta-rs failed otherwise (its error is the cause).
        InvalidConfigError: ``path`` names no place delta-rs can write to (an
            empty path, a URL scheme it has no store for); nothing read.
        MissingDependencyError: deltalake is not installed.
    """
    check_path(path)
    if not isinstance(log, str):
        return _export(
            log, topic, path, delta_storage, on_recreated, on_data_loss, _Reader(log, progress)
        )
    owned = arrowlog.connect(log, dict(storage or {}))
    try:
        return _export(
            owned, topic, path, delta_storage, on_recreated, on_data_loss, _Reader(owned, progress)
        )
    finally:
        owned.close()


def export(
    spark: Any,
    root: str,
    topic: str,
    path: str,
    storage: dict[str, Any],
    *,
    delta_storage: Mapping[str, str] | None = None,
    on_recreated: OnRecreated = "fail",
    on_data_loss: OnDataLoss = "fail",
) -> int:
    """:func:`run_export` from a Spark job: the range is read through
    ``spark`` (``format("arrowlog")``, read_committed) and committed by
    delta-rs as there. Returns the number of rows exported.

    Raises:
        What :func:`run_export` raises.
    """
    check_path(path)
    log = arrowlog.connect(root, storage)
    try:
        reader = _SparkReader(spark, root, storage, log)
        return _export(log, topic, path, delta_storage, on_recreated, on_data_loss, reader).rows
    finally:
        log.close()


class _Reader:
    """A range's rows as batches of the table's schema, read by arrowlog."""

    def __init__(self, log: ArrowLog, progress: Callable[[int, int], None] | None) -> None:
        self._log = log
        self._progress = progress

    def __call__(self, span: ExportRange, schema: pa.Schema, where: str) -> pa.RecordBatchReader:
        tracked = None if self._progress is None else tracker(self._log, span, self._progress)
        batches = read_range_batches(self._log, span, progress=tracked)
        return pa.RecordBatchReader.from_batches(schema, cast_batches(batches, schema, where))


class _SparkReader:
    """A range's rows as a Spark read gives them, collected, as the table's schema."""

    def __init__(self, spark: Any, root: str, storage: Mapping[str, Any], log: ArrowLog) -> None:
        self._spark, self._root, self._storage, self._log = spark, root, storage, log

    def __call__(self, span: ExportRange, schema: pa.Schema, where: str) -> pa.RecordBatchReader:
        try:
            table: pa.Table = spark_reader(self._spark, self._root, span, self._storage).toArrow()
        except ArrowLogError:
            raise
        except Exception as e:  # Spark's errors: what failed is told by the log, if it can
            explain_failed_read(self._log, span, e)
            raise
        # Spark reads the topic by name: one created anew since the range was
        # planned would have given its rows for the old one's offsets
        if self._log.topic(span.topic, refresh=True).incarnation != span.incarnation:
            raise UnknownTopicOrPartitionError(
                f"topic {span.topic!r} was deleted and created again during the export; "
                "nothing was exported: run it again"
            )
        batches = table.select(schema.names).to_batches()
        return pa.RecordBatchReader.from_batches(schema, cast_batches(iter(batches), schema, where))


def _export(
    log: ArrowLog,
    topic: str,
    path: str,
    delta_options: Mapping[str, str] | None,
    on_recreated: OnRecreated,
    on_data_loss: OnDataLoss,
    read: Read,
) -> DeltaExport:
    require_extra("delta")
    from deltalake import DeltaTable
    from deltalake.exceptions import CommitFailedError

    check_on_recreated(on_recreated)
    check_on_data_loss(on_data_loss)
    where = f"Delta table {path}"
    storage = delta_storage(delta_options)
    schema = delta_schema(log.topic(topic, refresh=True).schema)  # before anything is written
    with mapped(path):
        create_if_missing(path, schema, storage)
    lost: CommitFailedError | None = None
    tried: Attempt | None = None  # the last commit whose outcome delta-rs did not tell
    for attempt in range(1, MAX_ATTEMPTS + 1):
        with mapped(path):
            table = DeltaTable(path, storage_options=storage)
            state = table_state(table, topic, path)
            # a commit whose reply was lost lands all the same: delta-rs then
            # finds its version taken and reports a conflict with itself
            landed_at = None if tried is None else landed(table, tried)
        if tried is not None and landed_at is not None:
            return tried.result(landed_at, attempt - 1)
        tried = None
        span = next_range(
            log,
            topic,
            state.recorded(),
            on_recreated=on_recreated,
            on_data_loss=on_data_loss,
            where=where,
        )
        if span.nothing_new:
            return DeltaExport(0, state.offsets, state.incarnation, None, attempt)
        with mapped(path):
            if moved(path, storage, topic, state):
                continue  # another export committed since: plan again, no file written
        mine = Attempt(span, uuid.uuid4().hex, table.version())
        try:
            commit(table, mine, state, schema, read, where)
        except CommitFailedError as e:
            # another export's commit landed since `state` was read, or this
            # one did behind a lost reply: the table says which
            lost, tried = e, mine
            continue
        # delta-rs moved `table` to the version its commit landed at
        return mine.result(table.version(), attempt)
    raise ExportConflictError(
        f"{where}: {MAX_ATTEMPTS} commits in a row lost to other exports of topic {topic!r}; "
        "run the export again"
    ) from lost


def check_path(path: str) -> None:
    """Raises:
    InvalidConfigError: ``path`` is empty, or a URL whose scheme delta-rs
        has no store for (``ftp://``): a usage error, found before anything
        is read.
    MissingDependencyError: deltalake is not installed.
    """
    if not path.strip():
        raise InvalidConfigError("the Delta table path is empty: give a directory or a URL")
    scheme = urlsplit(path).scheme.lower() if "://" in path else ""
    known = _known_schemes()
    if scheme and known and scheme not in known:
        raise InvalidConfigError(
            f"Delta table {path}: delta-rs has no store for scheme {scheme!r} (it knows "
            f"{', '.join(sorted(known))})"
        )


@functools.cache
def _known_schemes() -> frozenset[str]:
    """The URL schemes delta-rs opens tables at (empty: not known), as it
    lists them refusing one it does not know; no I/O."""
    require_extra("delta")
    from deltalake import DeltaTable

    try:
        DeltaTable("arrowlog-no-such-scheme://probe")
    except Exception as e:  # noqa: BLE001 - delta-rs raises bare Exceptions too
        _, found, listed = str(e).partition("Known schemes:")
        if found:
            return frozenset(s.strip().lower() for s in listed.split(",") if s.strip())
    return frozenset()


def read_delta(path: str, *, storage_options: Mapping[str, str] | None = None) -> pa.Table:
    """The Delta table's rows (through pyarrow.dataset for a local table:
    DeltaTable.to_pyarrow_table was seen to crash the interpreter at exit
    here; through delta-rs's query engine for a remote one)."""
    import pyarrow.dataset as ds
    from deltalake import DeltaTable, QueryBuilder

    table = DeltaTable(path, storage_options=delta_storage(storage_options))
    if "://" not in path or path.startswith("file://"):
        # arro3's schema, taken through the Arrow C interface (the stubs know only lists)
        schema = pa.schema(table.schema().to_arrow())  # type: ignore[arg-type]
        return ds.dataset(table.file_uris(), schema=schema, format="parquet").to_table()
    batches = QueryBuilder().register("t", table).execute("SELECT * FROM t")
    return pa.table(batches.read_all())


# --- the command -------------------------------------------------------------------


@click.command("export-delta")
@click.argument("topic")
@click.argument("delta_path")
@click.option(
    "--delta-storage-options",
    metavar="JSON",
    help="delta-rs's storage options for DELTA_PATH, e.g. '{\"AWS_ENDPOINT_URL\": "
    '"http://127.0.0.1:8333", "AWS_ALLOW_HTTP": "true", "AWS_REGION": "us-east-1"}\' '
    "(credentials too, or from the AWS_* environment).",
)
@from_new_incarnation
@skip_deleted
@click.option("--no-progress", is_flag=True, help="No progress bar.")
@leaf(read_only=True)
@with_examples(
    "arrowlog export-delta events /data/delta/events",
    "arrowlog export-delta events s3://lake/delta/events --root s3://bucket/logs "
    '--delta-storage-options \'{"AWS_REGION": "eu-west-1"}\'',
    "arrowlog export-delta events /data/delta/events --from-new-incarnation",
)
def command(
    session: Session,
    topic: str,
    delta_path: str,
    delta_storage_options: str | None,
    from_new_incarnation: bool,
    skip_deleted: bool,
    no_progress: bool,
) -> None:
    """Export TOPIC's newly committed records to the Delta table at
    DELTA_PATH, exactly once.

    Each run appends from where the previous one ended to the end of one
    read_committed snapshot of the topic, in one Delta commit whose app
    transactions record the offsets and the topic's incarnation; the commit
    lands only if no other export of the topic committed since the run read
    them: a rerun, a crashed run's rerun or a second exporter racing this one
    never appends a row twice. The first run creates the table. The log is
    only read. Needs the delta extra (delta-rs).
    """
    options = json_object("--delta-storage-options", delta_storage_options)
    check_path(delta_path)  # a usage error, before the log is opened
    log = session.connect()
    result = run_with_progress(
        lambda progress: run_export(
            log, topic, delta_path,
            delta_storage={str(k): str(v) for k, v in (options or {}).items()},
            on_recreated="restart" if from_new_incarnation else "fail",
            on_data_loss="skip" if skip_deleted else "fail", progress=progress,
        ),
        enabled=not no_progress,
    )  # fmt: skip
    if session.output == "json":
        session.json(
            {"topic": topic, "table": delta_path, "rows": result.rows, "offsets": result.offsets,
             "incarnation": result.incarnation, "version": result.table_version,
             "attempts": result.attempts}
        )  # fmt: skip
        return
    where = f"version {result.table_version}" if result.table_version is not None else "no commit"
    click.echo(
        f"exported {result.rows:,} rows of {topic} to {delta_path} ({where}); "
        f"now at {position(result.offsets, result.incarnation)}"
    )


def main(argv: list[str] | None = None) -> int:
    """``python -m arrowlog.jobs.export_delta ROOT TOPIC DELTA_PATH [options]``: the
    same as ``arrowlog export-delta TOPIC DELTA_PATH --root ROOT [options]``."""
    return run_job(command, "export-delta", argv)


if __name__ == "__main__":
    sys.exit(main())
