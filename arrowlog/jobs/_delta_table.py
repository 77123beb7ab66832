"""The Delta table's side of an export (:mod:`arrowlog.jobs.export_delta`):
what the table records of the exports of a topic (app transactions, and the
commits' metadata before incarnations were recorded), the conditional commit
that appends a range and records it, and delta-rs's errors as arrowlog's.

A commit lands on top of the table version its run read the recorded position
from, or not at all: delta-rs fails it (``CommitFailedError``) when a commit
since carries an app transaction of the same id, which every export of the
topic does. Each commit names itself in its metadata (:data:`RUN_KEY`), so a
run whose reply was lost finds out from the table's history whether it landed.
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING

import pyarrow as pa

from arrowlog._extras import require_extra
from arrowlog.errors import (
    ArrowLogError,
    ExportConflictError,
    ExportTableError,
    InvalidConfigError,
    SchemaMismatchError,
)
from arrowlog.format.topic import topic_prefix
from arrowlog.jobs._export_range import (
    OFFSETS_KEY,
    TOPIC_KEY,
    CountedRows,
    ExportRange,
    Recorded,
    parse_recorded,
)

if TYPE_CHECKING:
    from deltalake import DeltaTable

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

    storage = delta_storage(storage_options)
    with mapped(path):
        if not DeltaTable.is_deltatable(path, storage):
            return ExportState(-1, {})
        return table_state(DeltaTable(path, storage_options=storage), topic, path)


def table_state(table: DeltaTable, topic: str, path: str) -> ExportState:
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


# --- the commit -------------------------------------------------------------------


#: how an export reads a range: its rows as batches of the table's schema
Read = Callable[[ExportRange, pa.Schema, str], pa.RecordBatchReader]


@dataclass
class Attempt:
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


def landed(table: DeltaTable, tried: Attempt) -> int | None:
    """The version ``tried`` landed at, if it did: a commit since it was
    planned carries its id."""
    since = table.version() - tried.planned_at
    if since <= 0:
        return None
    for commit in table.history(limit=since):  # the newest ones
        if commit.get(RUN_KEY) == tried.run:
            return int(commit["version"])
    return None


def create_if_missing(path: str, schema: pa.Schema, storage: dict[str, str] | None) -> None:
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


def moved(path: str, storage: dict[str, str] | None, topic: str, state: ExportState) -> bool:
    """Whether an export of ``topic`` committed after ``state`` was read."""
    from deltalake import DeltaTable

    now = DeltaTable(path, storage_options=storage).transaction_version(app_id(topic))
    return (now if now is not None else -1) != state.version


def commit(
    table: DeltaTable,
    tried: Attempt,
    state: ExportState,
    schema: pa.Schema,
    read: Read,
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
    counted = CountedRows(lambda: read(span, schema, where))
    data = pa.RecordBatchReader.from_batches(schema, iter(counted))
    properties = CommitProperties(
        custom_metadata={**span.commit_metadata(), RUN_KEY: tried.run},
        app_transactions=transactions,
    )
    try:
        write_deltalake(table, data, mode="append", commit_properties=properties)
    except CommitFailedError:
        raise
    except Exception as e:  # mapped below
        counted.raise_failure()  # reading the range failed: its own error
        raise delta_error(e, where) from e
    finally:
        tried.rows = counted.rows


# --- delta-rs's errors as arrowlog's -------------------------------------------------


@contextlib.contextmanager
def mapped(path: str) -> Iterator[None]:
    """delta-rs's errors raised inside (only delta-rs is called there) as arrowlog's."""
    try:
        yield
    except ArrowLogError:
        raise
    except Exception as e:  # delta-rs raises bare Exceptions too
        raise delta_error(e, f"Delta table {path}") from e


def delta_error(e: Exception, where: str) -> ArrowLogError:
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


def delta_storage(options: Mapping[str, str] | None) -> dict[str, str] | None:
    """delta-rs's storage options as it takes them (None: none given)."""
    return None if not options else {str(k): str(v) for k, v in options.items()}


__all__ = [
    "RUN_KEY",
    "Attempt",
    "DeltaExport",
    "ExportState",
    "Read",
    "app_id",
    "commit",
    "create_if_missing",
    "delta_error",
    "delta_storage",
    "exported_state",
    "incarnation_app_id",
    "landed",
    "mapped",
    "moved",
    "offset_app_id",
    "table_state",
]
