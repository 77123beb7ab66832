"""What the table exports (Delta, Iceberg) share: the next committed range of a
topic after the position the previous export recorded, and reading it.

An export records, in the same table commit as its rows, the offsets where it
ended and the incarnation of the topic they belong to (a topic deleted and
created again under its name is a new log, whose offsets name other records).
The next export starts there and ends at the ends of one read_committed
snapshot of the topic (:func:`arrowlog.read.visibility.snapshot_ends`): a transaction
committing meanwhile is in that export whole, or in the next one whole; asking
each partition's LSO in turn could cut it in two. The table commit is the only
point at which a range counts as exported, and it is conditional on the table
still recording what the export started from: a crash anywhere before it
leaves the recorded position as it was, and of two runs that planned the same
range only one commit lands.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterable, Iterator, Mapping
from dataclasses import dataclass, replace
from typing import Any, Literal

import pyarrow as pa

from arrowlog.errors import (
    CorruptObjectError,
    InvalidConfigError,
    OffsetOutOfRangeError,
    SegmentNotFoundError,
    TopicRecreatedError,
    UnknownTopicOrPartitionError,
    UnsupportedTypeError,
)
from arrowlog.log.client import ArrowLog
from arrowlog.read.scan import EARLIEST, ScanSegment, ScanTask, output_schema, plan_scan, read_task
from arrowlog.read.visibility import snapshot_ends

#: The key under which an export records where it ended, as JSON:
#: ``{"<partition>": <next offset>}`` in incarnation 0 of the topic,
#: ``{"incarnation": N, "offsets": {...}}`` in a topic created again
#: (:func:`format_recorded`).
OFFSETS_KEY = "arrowlog.offsets"
#: the topic an export's commit belongs to
TOPIC_KEY = "arrowlog.topic"
#: where an export's range started (-2: the log start)
STARTING_KEY = "arrowlog.starting-offsets"

#: What an export does when the table records offsets of a topic that was
#: deleted and created again since: ``"fail"`` (:class:`TopicRecreatedError`)
#: or ``"restart"`` (export the new topic from its start).
OnRecreated = Literal["fail", "restart"]
ON_RECREATED: tuple[OnRecreated, ...] = ("fail", "restart")
#: What an export does when records after the recorded offsets were deleted
#: (retention, ``delete_records``) before it read them: ``"fail"``
#: (:class:`OffsetOutOfRangeError`, nothing written) or ``"skip"`` (export from
#: the log start, as Spark's ``failOnDataLoss=false``).
OnDataLoss = Literal["fail", "skip"]
ON_DATA_LOSS: tuple[OnDataLoss, ...] = ("fail", "skip")


@dataclass(frozen=True)
class Recorded:
    """What a table records of the exports of one topic: the incarnation of
    the topic and the next offset of each of its partitions."""

    incarnation: int
    offsets: dict[str, int]


@dataclass(frozen=True)
class ExportRange:
    """Offsets ``[starting, ending)`` of every partition of ``topic`` (its
    incarnation ``incarnation``) to export next. A partition missing from the
    recorded offsets starts at -2 (its log start, resolved when the range is
    read)."""

    topic: str
    incarnation: int
    starting: dict[int, int]
    ending: dict[int, int]
    #: the offsets recorded in this incarnation (partition as a string); empty
    #: when nothing of it was exported yet
    recorded: dict[str, int]
    #: records deleted before they were read are skipped (else the read fails)
    skip_deleted: bool = False

    @property
    def nothing_new(self) -> bool:
        """True when every partition's recorded offset is already its end."""
        return all(self.recorded.get(str(p)) == end for p, end in self.ending.items())

    def starting_json(self) -> dict[str, int]:
        return {str(p): o for p, o in sorted(self.starting.items())}

    def ending_json(self) -> dict[str, int]:
        """The offsets to record once this range is exported."""
        return {str(p): o for p, o in sorted(self.ending.items())}

    def commit_metadata(self) -> dict[str, str]:
        """What an export's commit says about its range (a Delta commit's
        metadata, an Iceberg snapshot's summary)."""
        return {
            TOPIC_KEY: self.topic,
            OFFSETS_KEY: format_recorded(self.incarnation, self.ending_json()),
            STARTING_KEY: json.dumps(self.starting_json()),
        }


def next_range(
    log: ArrowLog,
    topic: str,
    recorded: Recorded | None,
    *,
    on_recreated: OnRecreated = "fail",
    on_data_loss: OnDataLoss = "fail",
    where: str,
) -> ExportRange:
    """The range to export after ``recorded`` (None: nothing exported yet), up
    to the ends of one read_committed snapshot of the topic. ``where`` names
    the table in messages.

    Raises:
        UnknownTopicOrPartitionError: no such topic.
        TopicRecreatedError: ``recorded`` belongs to an incarnation of the
            topic deleted since, and ``on_recreated`` is ``"fail"``.
        OffsetOutOfRangeError: records after ``recorded`` were deleted
            before they were exported, and ``on_data_loss`` is ``"fail"``.
        InvalidConfigError: ``recorded`` belongs to a later incarnation than
            the log's topic (the table was exported from another log), or
            ``on_recreated`` or ``on_data_loss`` is not one of its values.
    """
    check_on_recreated(on_recreated)
    check_on_data_loss(on_data_loss)
    skip = on_data_loss == "skip"
    while True:
        incarnation = log.topic(topic, refresh=True).incarnation
        exported = _past_deleted(
            log, topic, _resume(recorded, topic, incarnation, on_recreated, where), skip, where
        )
        try:
            ending = snapshot_ends(log, topic, exported)
        except OffsetOutOfRangeError:
            # records deleted since _past_deleted looked: look again (it skips
            # them, or fails with its own message); anything else is raised
            if not _below_start(log, topic, exported):
                raise
            continue
        # the partitions' listings say which topic they read: one created anew
        # after the lookup above is planned again, never read with these offsets
        if _incarnations(log, topic, ending) == {incarnation}:
            break
    starting = {p: exported.get(p, EARLIEST) for p in ending}
    recorded_now = {str(p): o for p, o in exported.items()}
    return ExportRange(topic, incarnation, starting, ending, recorded_now, skip_deleted=skip)


def check_on_recreated(on_recreated: str) -> None:
    """Raises:
    InvalidConfigError: ``on_recreated`` is neither ``"fail"`` nor ``"restart"``.
    """
    if on_recreated not in ON_RECREATED:
        raise InvalidConfigError(f"on_recreated must be 'fail' or 'restart', not {on_recreated!r}")


def check_on_data_loss(on_data_loss: str) -> None:
    """Raises:
    InvalidConfigError: ``on_data_loss`` is neither ``"fail"`` nor ``"skip"``.
    """
    if on_data_loss not in ON_DATA_LOSS:
        raise InvalidConfigError(f"on_data_loss must be 'fail' or 'skip', not {on_data_loss!r}")


def _past_deleted(
    log: ArrowLog, topic: str, exported: dict[int, int], skip: bool, where: str
) -> dict[int, int]:
    """``exported`` moved up to each partition's log start (``skip``), or
    checked against it. The log start as this client last listed it: no
    request when nothing moved; records deleted since are met by the snapshot
    (:func:`next_range` looks again) or by the read, which skip them too, or
    fail."""
    starts = {p: log.partition(topic, p).start_offset() for p in exported}
    lost = {p: (o, starts[p]) for p, o in exported.items() if o < starts[p]}
    if not lost or skip:
        return {p: max(o, starts[p]) for p, o in exported.items()}
    described = ", ".join(f"partition {p}: {o} to {s - 1}" for p, (o, s) in sorted(lost.items()))
    raise OffsetOutOfRangeError(
        f"{where}: records of topic {topic!r} were deleted (retention or delete-records) "
        f"before they were exported ({described}); nothing was exported. To skip them and "
        "export from the log start, run with --skip-deleted (on_data_loss='skip')"
    )


def _below_start(log: ArrowLog, topic: str, exported: Mapping[int, int]) -> bool:
    """Whether the log start of a partition moved past its offset in ``exported``."""
    return any(o < log.partition(topic, p).start_offset(refresh=True) for p, o in exported.items())


def _resume(
    recorded: Recorded | None,
    topic: str,
    incarnation: int,
    on_recreated: OnRecreated,
    where: str,
) -> dict[int, int]:
    """Where an export of ``topic`` (now ``incarnation``) starts, by partition."""
    if recorded is None:
        return {}
    if recorded.incarnation == incarnation:
        return {int(p): int(o) for p, o in recorded.offsets.items()}
    if recorded.incarnation > incarnation:
        raise InvalidConfigError(
            f"{where} records offsets of incarnation {recorded.incarnation} of topic "
            f"{topic!r}, but the log's topic {topic!r} is incarnation {incarnation}: the "
            "table was exported from another log (or the log was restored from an older copy)"
        )
    if on_recreated == "restart":
        return {}
    raise TopicRecreatedError(
        f"{where}: topic {topic!r} was deleted and created again since the last export "
        f"(the table records offsets {recorded.offsets} of incarnation "
        f"{recorded.incarnation}; the topic is now incarnation {incarnation}, a new log whose "
        "offsets name other records). To export the new topic from its start into this "
        "table, run again with --from-new-incarnation (on_recreated='restart'); to keep the "
        "table as the old topic's, export the new one to another table",
        topic=topic,
        recorded_incarnation=recorded.incarnation,
        incarnation=incarnation,
    )


def _incarnations(log: ArrowLog, topic: str, partitions: Mapping[int, int]) -> set[int]:
    return {log.partition(topic, p).opened_topic().incarnation for p in partitions}


def format_recorded(incarnation: int, offsets: Mapping[str, int]) -> str:
    """Offsets as a table keeps them: ``{"0": 42}`` in incarnation 0 (as
    exports always wrote them), ``{"incarnation": 2, "offsets": {"0": 42}}``
    in a topic created again, which an arrowlog that knows no incarnations
    refuses instead of taking for offsets of the topic it knew."""
    plain = {str(p): int(o) for p, o in offsets.items()}
    if incarnation == 0:
        return json.dumps(plain)
    return json.dumps({"incarnation": incarnation, "offsets": plain})


def parse_recorded(text: str, where: str) -> Recorded:
    """Offsets read back from a table (:func:`format_recorded`; a bare
    ``{"0": 42}`` is incarnation 0).

    Raises:
        CorruptObjectError: not such a JSON object.
    """
    try:
        value = json.loads(text)
        if not isinstance(value, dict):
            raise ValueError("not an object")
        incarnation = 0
        if "incarnation" in value:
            incarnation = value["incarnation"]
            value = value["offsets"]
            if isinstance(incarnation, bool) or not isinstance(incarnation, int):
                raise ValueError("the incarnation is not an integer")
            if not isinstance(value, dict):
                raise ValueError("the offsets are not an object")
        out = {str(int(p)): int(o) for p, o in value.items()}
    except (ValueError, TypeError, KeyError) as e:
        raise CorruptObjectError(f"recorded offsets {text!r} are not valid ({e})", key=where) from e
    if incarnation < 0 or any(o < 0 for o in out.values()):
        raise CorruptObjectError(f"recorded offsets {text!r} are not valid", key=where)
    return Recorded(incarnation, out)


def read_range_batches(
    log: ArrowLog,
    span: ExportRange,
    schema: pa.Schema | None = None,
    progress: Callable[[int], None] | None = None,
) -> Iterator[pa.RecordBatch]:
    """The records of ``span`` under read_committed, with the ``topic``,
    ``partition``, ``offset`` and ``timestamp`` columns the Spark source gives,
    as batches of ``schema`` (default: :func:`arrowlog.read.scan.output_schema`).
    Planned by the planner the Spark source uses, read here without Spark.
    ``progress`` is called with the offsets of each task read.

    Raises:
        OffsetOutOfRangeError: a recorded offset lies below the log start now
            (records were deleted before they were exported), unless the
            range skips deleted records.
        UnknownTopicOrPartitionError: the topic was deleted (or deleted and
            created again) since the range was planned.
    """
    plan = plan_scan(
        log,
        [span.topic],
        starting={(span.topic, p): o for p, o in span.starting.items()},
        ending={(span.topic, p): o for p, o in span.ending.items()},
        isolation_level="read_committed",
        fail_on_data_loss=not span.skip_deleted,
    )
    if _incarnations(log, span.topic, span.ending) != {span.incarnation}:
        raise UnknownTopicOrPartitionError(
            f"topic {span.topic!r} was deleted and created again during the export; "
            "nothing was exported: run it again"
        )
    out = schema or output_schema(log.topic(span.topic).schema)
    for task in plan.tasks:
        yield from _read_task(log, span, task, out)
        if progress is not None:
            progress(sum(s.hi - s.lo for s in task.segments))


def _read_task(
    log: ArrowLog, span: ExportRange, task: ScanTask, schema: pa.Schema
) -> Iterator[pa.RecordBatch]:
    """The records of ``task``. An object found missing is told apart from a
    corrupt log by the topic (created anew since the plan) and the log start
    (records deleted since the plan, then vacuumed): deleted records are
    skipped with ``span.skip_deleted``, else raised as what they are."""
    segments = task.segments
    while segments:
        read = 0  # of `segments`, those whose records were yielded
        try:
            for batch in read_task(log.store, replace(task, segments=segments), schema):
                read = _segments_read(segments, batch)
                yield batch
            return
        except SegmentNotFoundError as e:
            # every segment the object holds (a compacted one holds several)
            gone = [s for s in segments[read:] if s.key == e.key]
            if not gone:
                raise
            _check_deleted(log, span, task.partition, gone, e)
            segments = tuple(s for s in segments[read:] if s.key != e.key)


def _segments_read(segments: tuple[ScanSegment, ...], batch: pa.RecordBatch) -> int:
    """How many of ``segments`` were read once ``batch`` was: up to the one
    holding its last offset (the output schema's last column but one)."""
    if batch.num_rows == 0:
        return 0
    last = batch.column(batch.num_columns - 2)[-1].as_py()
    return next(i + 1 for i, s in enumerate(segments) if s.lo <= last < s.hi)


def _check_deleted(
    log: ArrowLog,
    span: ExportRange,
    partition: int,
    gone: list[ScanSegment],
    e: SegmentNotFoundError,
) -> None:
    """Returns if the segments ``gone`` were deleted (they lie below the log
    start now) and the range skips deleted records.

    Raises:
        UnknownTopicOrPartitionError: the topic was deleted, or created anew.
        OffsetOutOfRangeError: they lie below the log start now, and the
            range does not skip deleted records.
        SegmentNotFoundError: ``e``: the log lost records it still holds.
    """
    if log.topic(span.topic, refresh=True).incarnation != span.incarnation:
        raise UnknownTopicOrPartitionError(
            f"topic {span.topic!r} was deleted and created again during the export; "
            "nothing was exported: run it again"
        ) from e
    start = log.partition(span.topic, partition).start_offset(refresh=True)
    lo, hi = min(s.lo for s in gone), max(s.hi for s in gone)
    if hi > start:
        raise e
    if not span.skip_deleted:
        raise OffsetOutOfRangeError(
            f"{span.topic}/{partition}: records {lo} to {hi - 1} were deleted "
            f"(retention or delete-records; the log starts at {start} now) while the export "
            "read them; nothing was exported. To skip them and export from the log start, "
            "run with --skip-deleted (on_data_loss='skip')"
        ) from e


def cast_batches(
    batches: Iterator[pa.RecordBatch], schema: pa.Schema, table: str
) -> Iterator[pa.RecordBatch]:
    """``batches`` as ``schema`` (the table's types), by a safe cast: a value
    the table's type cannot hold exactly is refused, never changed.

    Raises:
        UnsupportedTypeError: such a value (nothing was committed).
    """
    for batch in batches:
        if batch.schema.equals(schema):
            yield batch
            continue
        try:
            yield batch.cast(schema)
        except (pa.ArrowInvalid, pa.ArrowNotImplementedError) as e:
            raise UnsupportedTypeError(
                f"{table}: a value cannot be written without loss ({e}); nothing was exported"
            ) from e


class CountedRows:
    """The batches a table writer (delta-rs, pyiceberg) pulls for one commit,
    counted, with what reading them raised kept apart: the writer reports a
    failure of its input as an error of its own, and the export raises the
    reader's instead (a deleted topic, deleted records, a corrupt segment)."""

    def __init__(self, batches: Callable[[], Iterable[pa.RecordBatch]]) -> None:
        self._batches = batches
        #: rows handed to the writer
        self.rows = 0
        #: whether the writer began reading
        self.started = False
        #: what reading raised, if it failed
        self.failed: BaseException | None = None

    def __iter__(self) -> Iterator[pa.RecordBatch]:
        self.started = True
        try:
            for batch in self._batches():
                self.rows += batch.num_rows
                yield batch
        except GeneratorExit:
            raise  # the writer stopped reading (its own failure is what it raises)
        except BaseException as e:
            if self.failed is None:
                self.failed = e
            raise

    def raise_failure(self) -> None:
        """Raise what reading raised, if it failed (as itself, not as the
        writer's error it caused)."""
        if self.failed is not None:
            raise self.failed from None


def tracker(
    log: ArrowLog, span: ExportRange, progress: Callable[[int, int], None]
) -> Callable[[int], None]:
    """A ``progress`` for :func:`read_range_batches` that reports
    ``progress(done, total)`` in offsets (markers and aborted records count)."""
    starts = log.start_offsets(span.topic)
    total = sum(end - max(span.starting[p], starts.get(p, 0)) for p, end in span.ending.items())
    done = [0]
    progress(0, total)

    def advance(offsets: int) -> None:
        done[0] += offsets
        progress(done[0], total)

    return advance


def explain_failed_read(log: ArrowLog, span: ExportRange, e: Exception) -> None:
    """Raise, as arrowlog's error, what made an engine's read of ``span``
    fail (``e``, Spark's error: it wraps or hides the reader's), when the log
    tells it; else return, and the caller raises ``e``.

    Raises:
        UnknownTopicOrPartitionError: the topic was deleted, or created anew.
        OffsetOutOfRangeError: records of the range were deleted (the log
            start moved past a start of it), and the range does not skip them.
    """
    if log.topic(span.topic, refresh=True).incarnation != span.incarnation:
        raise UnknownTopicOrPartitionError(
            f"topic {span.topic!r} was deleted and created again during the export; "
            "nothing was exported: run it again"
        ) from e
    if span.skip_deleted:
        return
    starts = {p: log.partition(span.topic, p).start_offset(refresh=True) for p in span.starting}
    lost = {p: (o, starts[p]) for p, o in span.starting.items() if 0 <= o < starts[p]}
    if lost:
        described = ", ".join(
            f"partition {p}: {o} to {n - 1}" for p, (o, n) in sorted(lost.items())
        )
        raise OffsetOutOfRangeError(
            f"records of topic {span.topic!r} were deleted (retention or delete-records) while "
            f"the export read them ({described}); nothing was exported. To skip them and "
            "export from the log start, run with --skip-deleted (on_data_loss='skip')"
        ) from e


def spark_reader(spark: Any, root: str, span: ExportRange, storage: Mapping[str, Any]) -> Any:
    """``span`` as a Spark DataFrame (``format("arrowlog")``, read_committed)."""
    # imported here: arrowlog.spark needs the spark extra, the exports without Spark do not
    from arrowlog.spark.options import spark_storage_options

    reader = (
        spark.read.format("arrowlog")
        .option("topic", span.topic)
        .option("startingOffsets", json.dumps({span.topic: span.starting_json()}))
        .option("endingOffsets", json.dumps({span.topic: span.ending_json()}))
        .option("isolationLevel", "read_committed")
        .option("failOnDataLoss", "false" if span.skip_deleted else "true")
    )
    for key, value in spark_storage_options(dict(storage)).items():
        reader = reader.option(key, value)
    return reader.load(root)
