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
"""

from __future__ import annotations

import contextlib
import functools
import sys
import uuid
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any
from urllib.parse import urlsplit

import pyarrow as pa

import arrowlog
from arrowlog._extras import require_extra
from arrowlog.errors import (
    ArrowLogError,
    ExportConflictError,
    ExportTableError,
    InvalidConfigError,
    SchemaMismatchError,
    UnknownTopicOrPartitionError,
)
from arrowlog.format.topic import topic_prefix
from arrowlog.jobs._export_range import (
    OFFSETS_KEY,
    STARTING_KEY,
    TOPIC_KEY,
    ExportRange,
    OnDataLoss,
    OnRecreated,
    Recorded,
    cast_batches,
    check_on_data_loss,
    check_on_recreated,
    explain_failed_read,
    next_range,
    parse_recorded,
    read_range_batches,
    spark_reader,
    tracker,
)
from arrowlog.jobs._table_types import TableTypes
from arrowlog.log.client import ArrowLog

if TYPE_CHECKING:
    from deltalake import DeltaTable

__all__ = [
    "MAX_ATTEMPTS",
    "OFFSETS_KEY",
    "STARTING_KEY",
    "TOPIC_KEY",
    "DeltaExport",
    "ExportState",
    "app_id",
    "check_path",
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
#: a commit's metadata: an id of that commit alone, which tells a run whether
#: the commit it lost the reply to landed
RUN_KEY = "arrowlog.export-run"


@dataclass(frozen=True)
class ExportState:
    """What a Delta table records of the exports of a topic, as of one
    version of it."""

    #: the run number of the last export (-1: none yet)
    version: int
    #: the next offset of every partition exported
    offsets: dict[str, int]
    #: the incarnation of the topic those offsets belong to
    incarnation: int = 0
    #: the table version this was read from (-1: no table)
    table_version: int = -1
    #: read from the commit's metadata, as exports wrote before they recorded
    #: incarnations (no partition has an app transaction of its own yet)
    legacy: bool = False

    def recorded(self) -> Recorded | None:
        return None if self.version < 0 else Recorded(self.incarnation, self.offsets)


@dataclass(frozen=True)
class DeltaExport:
    """What one run did."""

    #: rows appended by this run (0: nothing new, or only markers and aborted records)
    rows: int
    #: the offsets the table records now
    offsets: dict[str, int]
    #: the incarnation of the topic they belong to
    incarnation: int
    #: the table version of this run's commit; None when it committed nothing
    table_version: int | None
    #: commits tried (more than 1: another export won a race)
    attempts: int


def app_id(topic: str) -> str:
    """The app transaction that numbers the exports of ``topic``; every export
    commit carries it, so two exports of the topic conflict."""
    return f"arrowlog-export.{topic}"


def incarnation_app_id(topic: str) -> str:
    """The app transaction whose version is the incarnation of ``topic`` the
    recorded offsets belong to (a topic name holds no ``/``)."""
    return f"{app_id(topic)}/incarnation"


def offset_app_id(topic: str, incarnation: int, partition: int) -> str:
    """The app transaction whose version is the next offset of ``partition``
    of that incarnation of ``topic``."""
    return f"{app_id(topic_prefix(topic, incarnation))}/{partition}"


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


# --- the table's record of what was exported ----------------------------------------


def exported_state(
    path: str, topic: str, *, storage_options: Mapping[str, str] | None = None
) -> ExportState:
    """What the Delta table at ``path`` records of the exports of ``topic``
    now (``version`` -1: none yet, or no table).

    Raises:
        CorruptObjectError: recorded offsets that are not valid.
        ExportTableError: the table cannot be read.
        MissingDependencyError: deltalake is not installed.
    """
    require_extra("delta")
    from deltalake import DeltaTable

    storage = _storage(storage_options)
    with _mapped(path):
        if not DeltaTable.is_deltatable(path, storage):
            return ExportState(-1, {})
        return _state(DeltaTable(path, storage_options=storage), topic, path)


def _state(table: DeltaTable, topic: str, path: str) -> ExportState:
    """The exports of ``topic`` as ``table`` (one loaded version) records them."""
    at = table.version()
    run = table.transaction_version(app_id(topic))
    if run is None:
        return ExportState(-1, {}, 0, at)
    incarnation = table.transaction_version(incarnation_app_id(topic))
    if incarnation is None:
        return _legacy_state(table, topic, path, run, at)
    offsets: dict[str, int] = {}
    # a partition is recorded once the topic has it, with every partition
    # below it: the recorded ones are 0, 1, ... up to the first missing
    while True:
        offset = table.transaction_version(offset_app_id(topic, incarnation, len(offsets)))
        if offset is None:
            return ExportState(run, offsets, incarnation, at)
        offsets[str(len(offsets))] = offset


def _legacy_state(table: DeltaTable, topic: str, path: str, run: int, at: int) -> ExportState:
    """A table whose exports recorded their offsets only in their commits'
    metadata: the newest such commit's. (delta-rs lists the newest commits
    whatever version ``table`` was loaded at; a newer export's commit read
    here carries this topic's app transaction, so the commit conflicts.)"""
    for commit in table.history():  # newest first
        if commit.get(TOPIC_KEY, topic) != topic:
            continue  # another topic's export into the same table
        offsets = commit.get(OFFSETS_KEY)
        if offsets is not None:
            recorded = parse_recorded(str(offsets), path)
            return ExportState(run, recorded.offsets, recorded.incarnation, at, legacy=True)
    raise ExportTableError(
        f"Delta table {path}: app transaction {app_id(topic)} is at {run} but no commit "
        "records its offsets (its log was cleaned up?)"
    )


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


_Read = Callable[[ExportRange, pa.Schema, str], pa.RecordBatchReader]


def _export(
    log: ArrowLog,
    topic: str,
    path: str,
    delta_storage: Mapping[str, str] | None,
    on_recreated: OnRecreated,
    on_data_loss: OnDataLoss,
    read: _Read,
) -> DeltaExport:
    require_extra("delta")
    from deltalake import DeltaTable
    from deltalake.exceptions import CommitFailedError

    check_on_recreated(on_recreated)
    check_on_data_loss(on_data_loss)
    where = f"Delta table {path}"
    storage = _storage(delta_storage)
    schema = delta_schema(log.topic(topic, refresh=True).schema)  # before anything is written
    with _mapped(path):
        _create_if_missing(path, schema, storage)
    lost: CommitFailedError | None = None
    tried: _Tried | None = None  # the last commit whose outcome delta-rs did not tell
    for attempt in range(1, MAX_ATTEMPTS + 1):
        with _mapped(path):
            table = DeltaTable(path, storage_options=storage)
            state = _state(table, topic, path)
            # a commit whose reply was lost lands all the same: delta-rs then
            # finds its version taken and reports a conflict with itself
            landed = None if tried is None else _landed(table, tried)
        if tried is not None and landed is not None:
            return tried.result(landed, attempt - 1)
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
        with _mapped(path):
            if _moved(path, storage, topic, state):
                continue  # another export committed since: plan again, no file written
        mine = _Tried(span, uuid.uuid4().hex, table.version())
        try:
            _commit(table, mine, state, schema, read, where)
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


@dataclass
class _Tried:
    """One commit of a range: what identifies it in the table's history."""

    span: ExportRange
    #: written in the commit's metadata (:data:`RUN_KEY`): this commit and no other
    run: str
    #: the table version it was planned on (it lands after it, or not at all)
    planned_at: int
    #: rows it wrote
    rows: int = 0

    def result(self, version: int, attempts: int) -> DeltaExport:
        """What the run did, this commit having landed at ``version``."""
        span = self.span
        return DeltaExport(self.rows, span.ending_json(), span.incarnation, version, attempts)


def _landed(table: DeltaTable, tried: _Tried) -> int | None:
    """The version ``tried`` landed at, if it did: a commit since it was
    planned carries its id."""
    since = table.version() - tried.planned_at
    if since <= 0:
        return None
    for commit in table.history(limit=since):  # the newest ones
        if commit.get(RUN_KEY) == tried.run:
            return int(commit["version"])
    return None


def _create_if_missing(path: str, schema: pa.Schema, storage: dict[str, str] | None) -> None:
    """Create the table, empty, at version 0, unless it exists. Of two
    exports creating it at once, one commit lands; the other's fails (no
    retry: a retried creation would land on top as a second version) and it
    uses the table the first one created."""
    from deltalake import CommitProperties, DeltaTable, write_deltalake
    from deltalake.exceptions import DeltaError

    if DeltaTable.is_deltatable(path, storage):
        return
    try:
        write_deltalake(
            path,
            schema.empty_table(),
            mode="error",
            storage_options=storage,
            commit_properties=CommitProperties(max_commit_retries=0),
        )
    except DeltaError:
        if not DeltaTable.is_deltatable(path, storage):
            raise


def _moved(path: str, storage: dict[str, str] | None, topic: str, state: ExportState) -> bool:
    """Whether an export of ``topic`` committed after ``state`` was read."""
    from deltalake import DeltaTable

    now = DeltaTable(path, storage_options=storage).transaction_version(app_id(topic))
    return (now if now is not None else -1) != state.version


def _commit(
    table: DeltaTable,
    tried: _Tried,
    state: ExportState,
    schema: pa.Schema,
    read: _Read,
    where: str,
) -> None:
    """Append ``tried.span`` on top of the version ``table`` was loaded at,
    with the app transactions that record it; ``tried.rows`` counts the rows
    written.

    Raises:
        CommitFailedError: another export of the topic committed since that
            version (nothing of this one landed).
    """
    from deltalake import CommitProperties, Transaction, write_deltalake
    from deltalake.exceptions import CommitFailedError

    span = tried.span
    topic, incarnation = span.topic, span.incarnation
    same = not state.legacy and state.incarnation == incarnation
    kept = state.offsets if same else {}
    transactions = [
        Transaction(app_id(topic), state.version + 1),
        Transaction(incarnation_app_id(topic), incarnation),
    ] + [
        Transaction(offset_app_id(topic, incarnation, int(p)), o)
        for p, o in span.ending_json().items()
        if kept.get(p) != o
    ]
    failed: list[BaseException] = []

    def counted() -> Iterator[pa.RecordBatch]:
        try:
            for batch in read(span, schema, where):
                tried.rows += batch.num_rows
                yield batch
        except GeneratorExit:
            raise  # delta-rs stopped reading (its own failure is what it raises)
        except BaseException as e:
            failed.append(e)  # delta-rs reports it as a DeltaError of its own
            raise

    data = pa.RecordBatchReader.from_batches(schema, counted())
    properties = CommitProperties(
        custom_metadata={**span.commit_metadata(), RUN_KEY: tried.run},
        app_transactions=transactions,
    )
    try:
        write_deltalake(table, data, mode="append", commit_properties=properties)
    except CommitFailedError:
        raise
    except Exception as e:  # mapped below
        if failed:
            raise failed[0] from None  # reading the range failed: its own error
        raise _delta_error(e, where) from e


# --- delta-rs's errors as arrowlog's -------------------------------------------------


@contextlib.contextmanager
def _mapped(path: str) -> Iterator[None]:
    """delta-rs's errors raised inside (only delta-rs is called there) as arrowlog's."""
    try:
        yield
    except ArrowLogError:
        raise
    except Exception as e:  # delta-rs raises bare Exceptions too
        raise _delta_error(e, f"Delta table {path}") from e


def _delta_error(e: Exception, where: str) -> ArrowLogError:
    """delta-rs's error as arrowlog's. delta-rs says little about what
    failed: its object store has already retried what a retry can fix."""
    from deltalake.exceptions import (
        CommitFailedError,
        DeltaProtocolError,
        TableNotFoundError,
    )
    from deltalake.exceptions import SchemaMismatchError as DeltaSchemaMismatchError

    text = " ".join(str(e).split())
    if isinstance(e, CommitFailedError):
        return ExportConflictError(f"{where}: another commit conflicted: {text}")
    if isinstance(e, DeltaSchemaMismatchError):
        return SchemaMismatchError(f"{where} does not take the topic's columns: {text}")
    if isinstance(e, DeltaProtocolError):
        return ExportTableError(f"{where} needs features delta-rs lacks: {text}")
    if isinstance(e, TableNotFoundError) and "Unknown scheme" in text:
        return InvalidConfigError(f"{where}: delta-rs has no store for it: {text}")
    if isinstance(e, TableNotFoundError):
        return ExportTableError(f"{where}: no table there (any more): {text}")
    if "Invalid data type for Delta Lake" in text or "Schema error" in text:
        return SchemaMismatchError(f"{where} cannot hold the topic's columns: {text}")
    return ExportTableError(f"{where}: delta-rs failed: {text}")


def _storage(options: Mapping[str, str] | None) -> dict[str, str] | None:
    return None if not options else {str(k): str(v) for k, v in options.items()}


def read_delta(path: str, *, storage_options: Mapping[str, str] | None = None) -> pa.Table:
    """The Delta table's rows (through pyarrow.dataset for a local table:
    DeltaTable.to_pyarrow_table was seen to crash the interpreter at exit
    here; through delta-rs's query engine for a remote one)."""
    import pyarrow.dataset as ds
    from deltalake import DeltaTable, QueryBuilder

    table = DeltaTable(path, storage_options=_storage(storage_options))
    if "://" not in path or path.startswith("file://"):
        # arro3's schema, taken through the Arrow C interface (the stubs know only lists)
        schema = pa.schema(table.schema().to_arrow())  # type: ignore[arg-type]
        return ds.dataset(table.file_uris(), schema=schema, format="parquet").to_table()
    batches = QueryBuilder().register("t", table).execute("SELECT * FROM t")
    return pa.table(batches.read_all())


def main(argv: list[str] | None = None) -> int:
    """``python -m arrowlog.jobs.export_delta ROOT TOPIC DELTA_PATH [options]``: the
    same as ``arrowlog export-delta TOPIC DELTA_PATH --root ROOT [options]``."""
    from arrowlog.cli import main as cli_main

    args = list(sys.argv[1:] if argv is None else argv)
    if not args or args[0].startswith("-"):
        return cli_main(["export-delta", *args])
    return cli_main(["export-delta", "--root", args[0], *args[1:]])


if __name__ == "__main__":
    sys.exit(main())
