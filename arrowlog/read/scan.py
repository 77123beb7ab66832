"""Planning and reading committed offset ranges in parallel: the engine behind
the Spark source and the Delta export, free of Spark itself.

Planning (on one machine) resolves the offsets, then plans the read_committed
scan as one snapshot (:func:`arrowlog.read.visibility.plan_snapshot`), so the scan is
atomic across partitions: a transaction is in it everywhere or nowhere. It
returns tasks: runs of consecutive visible segments of one partition, sized by
bytes. Reading a task (anywhere) needs only the store and the task: every segment
is fetched by key, checked (CRC32C, offsets), cut to the range, and given its
metadata columns.
"""

from __future__ import annotations

import json
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from typing import Any, Literal

import numpy as np
import pyarrow as pa

from arrowlog.errors import (
    CorruptSegmentError,
    InvalidConfigError,
    OffsetOutOfRangeError,
    SegmentNotFoundError,
    UnknownTopicOrPartitionError,
)
from arrowlog.format.checkpoint import PartitionState, SegmentSummary
from arrowlog.format.segment import Compaction, SegmentHeader
from arrowlog.format.stats import Predicate, check_predicates, may_match
from arrowlog.format.topic import (
    Topic,
    batch_key,
    compacted_prefix_of,
    compacted_start_after,
    parse_compacted_key,
)
from arrowlog.partition import CompactedRef, PartitionLog, fetch_compacted, fetch_segment
from arrowlog.read.visibility import (
    CommittedPlan,
    IsolationLevel,
    last_stable_offset,
    plan_snapshot,
)
from arrowlog.storage import Store
from arrowlog.txn.resolver import Snapshot
from arrowlog.txn.view import LogView

EARLIEST = -2
LATEST = -1
METADATA_COLUMNS = ("topic", "partition", "offset", "timestamp")
DEFAULT_TARGET_BYTES = 128 * 1024 * 1024

TopicPartition = tuple[str, int]
OffsetSpec = Literal["earliest", "latest"] | dict[TopicPartition, int]


def parse_offsets(
    value: str | None, *, option: str, default: Literal["earliest", "latest"]
) -> OffsetSpec:
    """``earliest``, ``latest`` or Kafka-style JSON ``{"topic": {"0": 42}}`` with
    -2 = earliest and -1 = latest.

    Raises:
        InvalidConfigError: not one of those forms.
    """
    if value is None or value.strip() == "":
        return default
    text = value.strip()
    if text in ("earliest", "latest"):
        return "earliest" if text == "earliest" else "latest"
    try:
        parsed = json.loads(text)
    except json.JSONDecodeError as e:
        raise InvalidConfigError(
            f"{option}: expected 'earliest', 'latest' or JSON like "
            f'{{"topic": {{"0": 42}}}}, got {value!r} ({e.msg})'
        ) from None
    if not isinstance(parsed, dict):
        raise InvalidConfigError(f'{option}: JSON must map topics to {{"partition": offset}}')
    out: dict[TopicPartition, int] = {}
    for topic, parts in parsed.items():
        if not isinstance(parts, dict):
            raise InvalidConfigError(
                f"{option}: partitions of topic {topic!r} must be a JSON object"
            )
        for p, offset in parts.items():
            try:
                partition = int(p)
            except ValueError:
                raise InvalidConfigError(f"{option}: {p!r} is not a partition number") from None
            if isinstance(offset, bool) or not isinstance(offset, int) or offset < EARLIEST:
                raise InvalidConfigError(
                    f"{option}: offset for {topic}/{p} must be an int >= -2, got {offset!r}"
                )
            out[(topic, partition)] = offset
    return out


@dataclass(frozen=True)
class ScanRange:
    topic: str
    partition: int
    start: int
    end: int


@dataclass(frozen=True)
class ScanSegment:
    """One segment to read, and the offsets ``[lo, hi)`` of it to keep."""

    key: str
    base: int
    end: int
    lo: int
    hi: int
    #: the segment's size in bytes (large ones are read column by column)
    size: int = 0
    #: ``(start, end)`` when ``key`` is the compacted object of those offsets
    #: that holds this segment's records (``size`` is then the object's)
    compacted: tuple[int, int] | None = None
    #: the append id the segment's header holds, as the index says (None: not
    #: known): an object at the key with another is a stray at a key freed
    #: since planning, never read as the log's
    append_id: str | None = None
    #: whether the compacted object may leave its records out (a transactional
    #: segment read_uncommitted: aborted; a read_committed scan plans none)
    droppable: bool = False


@dataclass(frozen=True)
class ScanTask:
    """Consecutive visible segments of one partition: one unit of parallel work."""

    topic: str
    partition: int
    segments: tuple[ScanSegment, ...]
    bytes: int
    #: the topic's schema: a segment holding other columns is refused
    schema: pa.Schema | None = None

    @property
    def rows(self) -> int:
        return sum(s.hi - s.lo for s in self.segments)

    @property
    def objects(self) -> int:
        """How many objects the task reads (a compacted object holds many segments)."""
        return len({s.key for s in self.segments})


@dataclass(frozen=True)
class ScanPlan:
    ranges: tuple[ScanRange, ...]
    tasks: tuple[ScanTask, ...]


def plan_scan(
    log: LogView,
    topics: Sequence[str],
    *,
    starting: OffsetSpec = "earliest",
    ending: OffsetSpec = "latest",
    starting_timestamp: int | None = None,
    ending_timestamp: int | None = None,
    isolation_level: IsolationLevel = "read_committed",
    fail_on_data_loss: bool = True,
    partitions: set[TopicPartition] | None = None,
    keep_partitions: set[TopicPartition] | None = None,
    min_offset: int | None = None,
    max_offset: int | None = None,
    min_timestamp_us: int | None = None,
    max_timestamp_us: int | None = None,
    target_bytes: int = DEFAULT_TARGET_BYTES,
    where: Sequence[Predicate] | None = None,
) -> ScanPlan:
    """Resolve the offsets of a scan and split it into tasks.

    ``latest`` is the LSO under read_committed and the high watermark under
    read_uncommitted. The read covers ``partitions`` (None: every partition of
    every topic), and its snapshot, with the offsets and timestamps above,
    decides where each of them ends: :attr:`ScanPlan.ranges`.

    Filters never move those ends: they only leave rows of the snapshot out of
    the tasks. ``keep_partitions``, ``min_offset``/``max_offset`` and
    ``min_timestamp_us``/``max_timestamp_us`` (pushed-down filters, all bounds
    inclusive) are exact: a read of a few partitions or offsets still plans
    every partition's view, so that its rows are those of the same read
    unfiltered, filtered after (whichever engine filters them). Timestamp
    bounds are exact because every record of a segment has the segment's
    append timestamp. ``where`` (predicates on data columns, see
    :mod:`arrowlog.format.stats`) leaves out the segments whose column statistics
    prove that no row matches; rows of the others are not filtered (the engine
    applies the filter).

    Raises:
        UnknownTopicOrPartitionError: a topic or partition named does not exist.
        InvalidConfigError: topics of different schemas, or bad offsets.
        OffsetOutOfRangeError: a start after its end, an end past the latest
            offset, or (with ``fail_on_data_loss``) a start below the log start.
    """
    schema, checked = _check_request(log, topics, starting, ending, where)
    committed = isolation_level == "read_committed"
    # where each range starts and ends; plan_snapshot below fixes views of its own
    views = _views(log, topics, partitions)
    decide = log.resolver.snapshot()
    wanted: dict[TopicPartition, tuple[int, int | None]] = {}
    for (topic, partition), view in views.items():
        wanted[(topic, partition)] = _range(
            log.partition(topic, partition), view, decide, committed=committed,
            starting=starting, ending=ending, starting_timestamp=starting_timestamp,
            ending_timestamp=ending_timestamp, fail_on_data_loss=fail_on_data_loss,
        )  # fmt: skip
    # the snapshot of every partition read, whatever the filters keep of it
    plans = plan_snapshot(log, wanted) if committed else {}
    filters = _Filters(keep_partitions, min_offset, max_offset, min_timestamp_us,
                       max_timestamp_us, schema, checked)  # fmt: skip
    ranges = []
    tasks: list[ScanTask] = []
    for (topic, partition), (start, maybe_end) in wanted.items():
        plan = plans.get((topic, partition))
        if plan is not None:
            end = plan.end
        else:
            assert maybe_end is not None
            end = maybe_end
        ranges.append(ScanRange(topic, partition, start, end))
        tasks += _tasks(log, (topic, partition), plan, start, end, filters, target_bytes)
    return ScanPlan(tuple(ranges), tuple(tasks))


def _check_request(
    log: LogView,
    topics: Sequence[str],
    starting: OffsetSpec,
    ending: OffsetSpec,
    where: Sequence[Predicate] | None,
) -> tuple[pa.Schema, list[Predicate]]:
    """The topics' one schema and the checked ``where``, once the topics and
    the partitions the offsets name are known to exist.

    Raises:
        UnknownTopicOrPartitionError: a topic or partition named does not exist.
        InvalidConfigError: topics of different schemas, or bad offsets.
    """
    if not topics:
        raise InvalidConfigError("no topic given: set the option 'topic'")
    schema = log.topic(topics[0]).schema
    checked = check_predicates(schema, where) if where else []
    for name in topics[1:]:
        if not log.topic(name).schema.equals(schema, check_metadata=False):
            raise InvalidConfigError(f"topics {topics[0]!r} and {name!r} have different schemas")
    for spec, option in ((starting, "startingOffsets"), (ending, "endingOffsets")):
        if isinstance(spec, dict):
            for topic, partition in spec:
                if topic not in topics:
                    raise UnknownTopicOrPartitionError(
                        f"{option} names topic {topic!r}, which is not being read"
                    )
                log.partition(topic, partition)  # exists (perhaps added since we looked)
            if option == "endingOffsets" and EARLIEST in spec.values():
                raise InvalidConfigError("endingOffsets: -2 (earliest) is not allowed")
    if starting == "latest":
        raise InvalidConfigError("startingOffsets: 'latest' is not allowed for a batch read")
    if ending == "earliest":
        raise InvalidConfigError("endingOffsets: 'earliest' is not allowed for a batch read")
    return schema, checked


def _views(
    log: LogView, topics: Sequence[str], partitions: set[TopicPartition] | None
) -> dict[TopicPartition, tuple[int, PartitionState]]:
    """The state of every partition read (all of ``topics``' for None)."""
    views = {}
    for t in topics:
        wanted_here = {p for n, p in partitions or () if n == t}
        if wanted_here and max(wanted_here) >= log.topic(t).partitions:
            log.topic(t, refresh=True)  # a partition read was added since we looked
        # using each partition lists it, which shows any newer version of the topic
        for part in log.iter_partitions(t):
            if partitions is None or part.partition in wanted_here:
                views[(t, part.partition)] = part.state()
    return views


def _range(
    part: PartitionLog,
    view: tuple[int, PartitionState],
    decide: Snapshot,
    *,
    committed: bool,
    starting: OffsetSpec,
    ending: OffsetSpec,
    starting_timestamp: int | None,
    ending_timestamp: int | None,
    fail_on_data_loss: bool,
) -> tuple[int, int | None]:
    """Where the read of ``part`` starts and ends; the end None where the
    snapshot decides it (see below).

    Raises:
        OffsetOutOfRangeError: as :func:`plan_scan` says.
    """
    topic, partition = part.topic.name, part.partition
    hw, state = view
    log_start = part.start_offset()
    latest = last_stable_offset(hw, state, decide, log_start=log_start) if committed else hw
    start = _pick(starting, (topic, partition), log_start, latest, missing=EARLIEST)
    end = _pick(ending, (topic, partition), log_start, latest, missing=LATEST)
    if starting_timestamp is not None:
        start = _offset_for_time(part, starting_timestamp, log_start, latest)
    if ending_timestamp is not None:
        end = _offset_for_time(part, ending_timestamp, log_start, latest)
    if start < log_start:
        if fail_on_data_loss:
            raise OffsetOutOfRangeError(
                f"{topic}/{partition}: starting offset {start} is below the log start "
                f"{log_start} (records were deleted): start at the log start to skip them "
                "(in Spark, failOnDataLoss=false)"
            )
        start = log_start
    if end > latest:
        # a known end (a micro-batch's) may lie past a listing gap: follow
        # the chain by HEAD before calling it out of range
        hw, state = part.state(complete=True)
        latest = last_stable_offset(hw, state, decide, log_start=log_start) if committed else hw
    if end > latest:
        raise OffsetOutOfRangeError(
            f"{topic}/{partition}: ending offset {end} is past the latest offset {latest}"
            + (" (the LSO under read_committed)" if committed else "")
        )
    if start > end:
        raise OffsetOutOfRangeError(
            f"{topic}/{partition}: starting offset {start} is after ending offset {end}"
        )
    # An end asked as "latest" under read_committed is left to the snapshot,
    # which may end lower, before a transaction it would otherwise show in
    # part. An end given as a number (a streaming micro-batch's) is kept as
    # given, even where it equals the LSO: its offsets are promised whole.
    open_ended = (
        committed
        and _asks_latest(ending, (topic, partition))
        and ending_timestamp is None
        and end == latest
        and start < end
    )
    return start, None if open_ended else end


@dataclass(frozen=True)
class _Filters:
    """A scan's pushed-down filters (see :func:`plan_scan`): which rows of its
    snapshot its tasks read."""

    keep_partitions: set[TopicPartition] | None
    min_offset: int | None
    max_offset: int | None
    min_timestamp_us: int | None
    max_timestamp_us: int | None
    schema: pa.Schema
    checked: list[Predicate]


def _tasks(
    log: LogView,
    tp: TopicPartition,
    plan: CommittedPlan | None,
    start: int,
    end: int,
    filters: _Filters,
    target_bytes: int,
) -> list[ScanTask]:
    """The tasks reading what ``filters`` keep of ``[start, end)`` of one
    partition: of the snapshot's ``plan`` under read_committed, of every data
    segment under read_uncommitted (``plan`` None)."""
    if filters.keep_partitions is not None and tp not in filters.keep_partitions:
        return []
    # what the offset filters keep of the snapshot's range
    lo = start if filters.min_offset is None else min(max(start, filters.min_offset), end)
    hi = end if filters.max_offset is None else max(min(end, filters.max_offset + 1), lo)
    if lo == hi:
        return []
    part = log.partition(*tp)
    if plan is not None:
        visible = [s for s in plan.segments if s.base not in plan.hidden]
    else:
        visible = [s for s in part.summaries(start, end) if not s.control]
    visible = [s for s in visible if s.end > lo and s.base < hi]
    if filters.min_timestamp_us is not None:
        visible = [s for s in visible if s.timestamp_ms * 1000 >= filters.min_timestamp_us]
    if filters.max_timestamp_us is not None:
        visible = [s for s in visible if s.timestamp_ms * 1000 <= filters.max_timestamp_us]
    if filters.checked:
        schema, checked = filters.schema, filters.checked
        visible = [s for s in visible if may_match(s.stats, schema, checked, s.record_count)]
    cover = part.compacted_objects(lo, hi) if visible else []
    # droppable: may be absent from its compacted object (left out there)
    droppable = frozenset(
        s.base for s in visible if s.transactional and (plan is None or s.base in plan.forgotten)
    )
    return list(_split(part.topic, tp[1], visible, cover, lo, hi, target_bytes, droppable))


def _pick(spec: OffsetSpec, tp: TopicPartition, earliest: int, latest: int, *, missing: int) -> int:
    """The offset ``spec`` gives ``tp``; a partition the JSON leaves out gets
    ``missing`` (EARLIEST for a start, LATEST for an end)."""
    if spec == "earliest":
        return earliest
    if spec == "latest":
        return latest
    value = spec.get(tp, missing)
    if value == EARLIEST:
        return earliest
    if value == LATEST:
        return latest
    return value


def _asks_latest(spec: OffsetSpec, tp: TopicPartition) -> bool:
    return spec == "latest" or (isinstance(spec, dict) and spec.get(tp, LATEST) == LATEST)


def _offset_for_time(part: PartitionLog, timestamp_ms: int, earliest: int, latest: int) -> int:
    """The first offset whose (append) timestamp is at or after ``timestamp_ms``."""
    if latest <= earliest:
        return latest
    for s in part.summaries(earliest, latest):
        if s.timestamp_ms >= timestamp_ms:
            return max(s.base, earliest)
    return latest


def _split(
    topic: Topic,
    partition: int,
    visible: list[SegmentSummary],
    cover: list[CompactedRef],
    start: int,
    end: int,
    target_bytes: int,
    droppable: frozenset[int],
) -> Iterator[ScanTask]:
    """Tasks of about ``target_bytes``: runs of consecutive visible segments,
    each read from its own object or from the compacted object in ``cover``
    that holds it (never split between two tasks: each would fetch it)."""
    run: list[ScanSegment] = []
    size = 0
    i = 0
    for s in visible:
        while i < len(cover) and cover[i].end < s.end:
            i += 1
        lo, hi = max(s.base, start), min(s.end, end)
        obj = cover[i] if i < len(cover) and cover[i].start <= s.base else None
        drop = s.base in droppable
        if obj is None:
            key = batch_key(topic.prefix, partition, s.base, s.at)
            piece = ScanSegment(key, s.base, s.end, lo, hi, s.size, None, s.append_id, drop)
        else:
            span = (obj.start, obj.end)
            piece = ScanSegment(obj.key, s.base, s.end, lo, hi, obj.size, span, None, drop)
        if run and size >= target_bytes and run[-1].key != piece.key:
            yield ScanTask(topic.name, partition, tuple(run), size, topic.schema)
            run, size = [], 0
        if not run or run[-1].key != piece.key:
            size += piece.size
        run.append(piece)
    if run:
        yield ScanTask(topic.name, partition, tuple(run), size, topic.schema)


def metadata_names(schema: pa.Schema) -> dict[str, str]:
    """Names of the metadata columns: ``topic``, ``partition``, ``offset``,
    ``timestamp``; one that clashes with a topic column gets a ``_`` prefix
    (repeated until it is unique)."""
    taken = set(schema.names)
    names = {}
    for column in METADATA_COLUMNS:
        name = column
        while name in taken:
            name = "_" + name
        taken.add(name)
        names[column] = name
    return names


def output_schema(schema: pa.Schema) -> pa.Schema:
    """The topic's columns followed by the metadata columns."""
    names = metadata_names(schema)
    return pa.schema(
        [
            *schema,
            pa.field(names["topic"], pa.string(), nullable=False),
            pa.field(names["partition"], pa.int32(), nullable=False),
            pa.field(names["offset"], pa.int64(), nullable=False),
            pa.field(names["timestamp"], pa.timestamp("us", tz="UTC"), nullable=False),
        ]
    ).remove_metadata()


def read_task(
    store: Store, task: ScanTask, schema: pa.Schema, columns: Sequence[str] | None = None
) -> Iterator[pa.RecordBatch]:
    """The records of one task with metadata columns, as batches of ``schema``
    (the output schema, or an engine's version of it: the batches are cast).
    With ``columns``, only those of the topic's (large segments are then read
    column by column)."""
    compacted: tuple[str, Compaction, pa.RecordBatch] | None = None
    for seg in task.segments:
        if seg.compacted is not None:
            if compacted is None or compacted[0] != seg.key:
                header, whole = fetch_compacted(
                    store, seg.key, *seg.compacted, schema=task.schema, columns=columns,
                    size=seg.size,
                )  # fmt: skip
                assert header.compaction is not None
                compacted = (seg.key, header.compaction, whole)
            run = compacted[1].run_of(seg.base, seg.end, droppable=seg.droppable, key=seg.key)
            if run is None:
                continue  # aborted records, read_uncommitted: compaction left them out
            row, timestamp_ms = run
            batch = compacted[2].slice(row + seg.lo - seg.base, seg.hi - seg.lo)
        else:
            try:
                header, batch = fetch_segment(
                    store, seg.key, seg.base, seg.end, schema=task.schema, columns=columns,
                    size=seg.size, append_id=seg.append_id,
                )  # fmt: skip
            except SegmentNotFoundError:
                # removed since planning, once compacted: read it from its object
                found = _from_compacted(store, seg, task.schema, columns)
                if found is None:
                    raise
                header, batch = found
            else:
                if seg.append_id is not None and header.append_id != seg.append_id:
                    raise CorruptSegmentError(
                        f"not the segment this scan planned (append {header.append_id}, "
                        f"planned {seg.append_id}): its records were deleted or compacted "
                        "since, and a late write took its key; plan the scan again",
                        key=seg.key,
                    )
            timestamp_ms = header.timestamp_ms
            batch = batch.slice(seg.lo - seg.base, seg.hi - seg.lo)
        rows = batch.num_rows
        # Vectorised: a Python list per row would cost more than the read itself.
        extra: list[Any] = [
            pa.array([task.topic], pa.string()).take(np.zeros(rows, dtype=np.int32)),
            pa.array(np.full(rows, task.partition, dtype=np.int32)),
            pa.array(np.arange(seg.lo, seg.hi, dtype=np.int64)),
            pa.array(np.full(rows, timestamp_ms * 1000, dtype=np.int64)).view(
                pa.timestamp("us", tz="UTC")
            ),
        ]
        out = pa.RecordBatch.from_arrays(
            [*batch.columns, *extra], schema=_widen(schema, batch.schema)
        )
        yield out.cast(schema) if not out.schema.equals(schema) else out


def _from_compacted(
    store: Store, seg: ScanSegment, schema: pa.Schema | None, columns: Sequence[str] | None
) -> tuple[SegmentHeader, pa.RecordBatch] | None:
    """A removed segment's records from the compacted object holding them (a
    scan planned before compaction, run after its segments were removed), as
    if read from the segment; None if no compacted object holds it."""
    prefix = compacted_prefix_of(seg.key)
    for info in store.list(prefix, start_after=compacted_start_after(prefix, seg.base)):
        span = parse_compacted_key(info.key)
        if span is None or span[0] > seg.base:
            return None
        header, whole = fetch_compacted(
            store, info.key, *span, schema=schema, columns=columns, size=info.size
        )
        assert header.compaction is not None
        run = header.compaction.run_of(seg.base, seg.end, droppable=True, key=info.key)
        if run is None:
            return None
        count = seg.end - seg.base
        piece = SegmentHeader(
            base_offset=seg.base, record_count=count, timestamp_ms=run[1], append_id=""
        )
        return piece, whole.slice(run[0], count)
    return None


def _widen(target: pa.Schema, data: pa.Schema) -> pa.Schema:
    # the data's own column types, with the target's names and metadata types
    fields = list(data) + [target.field(i) for i in range(len(data), len(target))]
    return pa.schema([f.with_name(target.field(i).name) for i, f in enumerate(fields)])
