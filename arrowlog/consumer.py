"""Consumers: read_uncommitted and read_committed reads, the last stable offset,
and consumer group offsets.

Under read_committed a transactional batch is visible only if its transaction
committed. The decision is the coordinator log's (PREPARE_COMMIT is the point of
no return); a COMMIT or ABORT marker in the partition is a durable copy of that
decision, so readers of older data rarely need the coordinator. The last stable
offset (LSO) of a partition is the first offset of its earliest undecided
transaction, or the high watermark; read_committed reads stop there.

One read over several partitions (:meth:`Consumer.read_many`) sees a transaction's
records in every partition or in none, even if the transaction commits while the
read runs (see :func:`plan_snapshot`). A committed transaction's records are those
below its bound in each partition, fixed at PREPARE_COMMIT: a late record of an
instance that lost the transaction never joins it.

A consumer remembers, per partition, the incarnation of the topic its
position there belongs to (what it read, or looked up): offsets it commits
are kept as positions in that incarnation, and refused once the topic has
been deleted and created again (see :meth:`Consumer.commit`).
"""

from __future__ import annotations

from collections.abc import Callable, Generator, Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import Literal

import pyarrow as pa

from arrowlog._logview import LogView, incarnation_of
from arrowlog.checkpoint import Decision, OpenTxn, PartitionState, SegmentSummary
from arrowlog.control import ControlType
from arrowlog.coordinator import Snapshot, check_id
from arrowlog.errors import InvalidConfigError, OffsetOutOfRangeError, UnstableOffsetCommitError
from arrowlog.groups import ConsumerGroupMetadata, GroupOffsets, keyed_offsets, tp_key
from arrowlog.partition import PartitionLog, projected
from arrowlog.stats import Predicate, check_predicates

IsolationLevel = Literal["read_committed", "read_uncommitted"]
Decide = Callable[[OpenTxn], Decision]


def last_stable_offset(
    high_watermark: int, state: PartitionState, decide: Decide, *, log_start: int = 0
) -> int:
    """The first offset of the earliest undecided transaction, else the high
    watermark. Decided transactions never hold it back, marker or not: that is
    what makes a fenced zombie's late writes harmless. Never below the log start
    (as Kafka's first unstable offset): records deleted there hold nothing back."""
    undecided = [
        t.first_offset for t in state.open_txns.values() if decide(t) is Decision.UNDECIDED
    ]
    return max(log_start, min(undecided, default=high_watermark))


class Consumer:
    """Reads partitions at one isolation level, for one consumer group."""

    def __init__(
        self,
        log: LogView,
        *,
        group_id: str | None = None,
        isolation_level: IsolationLevel = "read_committed",
    ) -> None:
        if isolation_level not in ("read_committed", "read_uncommitted"):
            raise InvalidConfigError(
                f"isolation_level must be 'read_committed' or 'read_uncommitted', "
                f"not {isolation_level!r}"
            )
        self._log = log
        self.group_id = None if group_id is None else check_id("group id", group_id)
        self.isolation_level: IsolationLevel = isolation_level
        #: (topic, partition) -> the incarnation of the topic this consumer's
        #: position there belongs to (see _remember)
        self._read_in: dict[tuple[str, int], int] = {}

    # --- offsets ------------------------------------------------------------------

    def stable_offset(self, topic: str, partition: int, *, decide: Decide | None = None) -> int:
        """The last stable offset of a partition (the high watermark under
        read_uncommitted)."""
        part = self._log.partition(topic, partition)
        if self.isolation_level == "read_uncommitted":
            end = part.end_offset()
        else:
            hw, state = part.state()
            decide = decide or self._log.resolver.snapshot()
            end = last_stable_offset(hw, state, decide, log_start=part.start_offset())
        self._remember(topic, partition, part.topic.incarnation, moves=False)
        return end

    def end_offset(self, topic: str, partition: int) -> int:
        """Where reading ends at this isolation level: the LSO or the high watermark."""
        return self.stable_offset(topic, partition)

    def _groups(self) -> GroupOffsets:
        if self.group_id is None:
            raise InvalidConfigError("this consumer has no group_id")
        return GroupOffsets(
            self._log.store, self.group_id, self._log.config.retry, resolver=self._log.resolver
        )

    def committed(self, topic: str, partition: int) -> int | None:
        """The group's committed offset (the next offset to read), if any. Offsets
        sent in a transaction count from its PREPARE_COMMIT on, exactly when its
        records become visible.

        Raises:
            UnstableOffsetCommitError: a transaction that is not decided yet has
                offsets for this partition (retriable: it will end or expire).
        """
        current = incarnation_of(self._log)
        seen: dict[str, int | None] = {}

        def incarnation(name: str) -> int | None:
            seen[name] = current(name)
            return seen[name]

        offsets, unstable = self._groups().position(self._log.resolver, incarnation)
        if (topic, partition) in unstable:
            raise UnstableOffsetCommitError(
                f"group {self.group_id}: a transaction with offsets for {topic}/{partition} "
                "is not decided yet; retry once it ends (or expires)",
                partitions={(topic, partition)},
            )
        offset, known = offsets.get((topic, partition)), seen.get(topic)
        if offset is not None and known is not None:  # a position in that incarnation
            self._remember(topic, partition, known, moves=False)
        return offset

    def commit(
        self,
        offsets: Mapping[tuple[str, int], int],
        *,
        incarnations: Mapping[str, int] | None = None,
    ) -> None:
        """Commit the group's position outside any transaction: the next offset
        to read per (topic, partition), all of them or none.

        An offset means something only in the log it was read from, and a
        topic deleted and created again under its name is a new log (a new
        incarnation, :attr:`Topic.incarnation`). Each offset is kept as a
        position in the incarnation this consumer's position in the partition
        belongs to: the first it read or looked up (``read``, ``iter_batches``,
        ``read_snapshot``, ``committed``, ``end_offset``, ...), or the new one
        once it read that from its start. Offsets of partitions it never read
        (obtained elsewhere) are taken as positions in the topic as it is now,
        unless ``incarnations`` (topic -> incarnation) names theirs.

        Raises:
            TopicRecreatedError: an offset belongs to an incarnation that is no
                longer the topic's (it was deleted and created again since the
                read): read the new topic from its start (``start=None``) and
                commit those reads' offsets, or, for offsets that are positions
                in the new topic, pass its incarnation in ``incarnations``.
                Nothing was written.
            InvalidConfigError: no group_id, a bad offset or incarnation.
            UnknownTopicOrPartitionError: no such topic or partition.
        """
        groups = self._groups()
        given = dict(incarnations or {})
        keyed = keyed_offsets(
            self._log,
            offsets,
            read_in=self._read_in,
            incarnations=given,
            group_id=groups.group_id,
        )
        groups.commit(keyed)
        for topic, partition in offsets:
            if topic in given:  # the caller said where this position is
                self._read_in[(topic, partition)] = given[topic]

    def group_metadata(self) -> ConsumerGroupMetadata:
        """The group and, per partition, the incarnation of the topic this
        consumer's position belongs to (see :meth:`commit`), for
        :meth:`Producer.send_offsets_to_transaction` (Kafka's
        ``sendOffsetsToTransaction(offsets, consumer.groupMetadata())``):
        offsets sent in a transaction then name the log they were read in.
        A snapshot: reads after the call do not change it.

        Raises:
            InvalidConfigError: this consumer has no group_id.
        """
        return ConsumerGroupMetadata(self._groups().group_id, self._read_in)

    def _remember(self, topic: str, partition: int, incarnation: int, *, moves: bool) -> None:
        """Note that this consumer read (or looked up) ``topic/partition`` in
        ``incarnation``. The first incarnation noted of a partition stays
        until a read of another one from its log start (``moves``): a
        position carried from the old topic into a read of the new one is
        still the old log's, and committing it raises."""
        tp = (topic, partition)
        if moves or tp not in self._read_in:
            self._read_in[tp] = incarnation

    def _read_from(self, part: PartitionLog, start: int | None) -> None:
        """Note a read of ``part`` from ``start``, once ``part`` is open (its
        listing shows which incarnation it reads)."""
        moves = start is None or start <= part.start_offset()
        self._remember(part.topic.name, part.partition, part.topic.incarnation, moves=moves)

    def _noting(
        self, part: PartitionLog, start: int | None, batches: Iterator[pa.RecordBatch]
    ) -> Iterator[pa.RecordBatch]:
        """``batches`` of a read of ``part`` from ``start``, noted once the
        read has opened ``part``."""
        for batch in batches:
            self._read_from(part, start)
            yield batch
        self._read_from(part, start)

    # --- reads --------------------------------------------------------------------

    def iter_batches(
        self,
        topic: str,
        partition: int = 0,
        start: int | None = None,
        end: int | None = None,
        *,
        columns: Sequence[str] | None = None,
        where: Sequence[Predicate] | None = None,
    ) -> Generator[pa.RecordBatch, None, None]:
        """Stream the visible records of ``[start, end)``. ``end`` defaults to the
        LSO (read_committed) or the high watermark. With ``columns``, batches
        hold only those columns, in that order, and segments of at least
        :data:`~arrowlog.partition.fetch.COLUMN_READ_MIN_BYTES` are fetched
        column by column. With ``where`` (``[("col", ">", 5), ...]``, see
        :mod:`arrowlog.stats`), only matching rows are returned, and segments
        whose column statistics prove that none matches are not fetched.

        Raises:
            OffsetOutOfRangeError: the range is outside the log, or reaches past
                the LSO under read_committed.
            UnknownColumnError: ``columns`` names a column the topic lacks.
        """
        part = self._log.partition(topic, partition)
        if self.isolation_level == "read_uncommitted":
            batches = part.iter_batches(start, end, columns=columns, where=where)
            yield from self._noting(part, start, batches)
            return
        _check_read(part.topic.schema, columns, where)  # bad input fails before any read
        plan = plan_committed(part, start, end, self._log.resolver.snapshot(), part.state())
        self._read_from(part, plan.start)
        yield from _visible_batches(part, plan, columns, where)

    def iter_records(
        self,
        topic: str,
        partition: int = 0,
        start: int | None = None,
        end: int | None = None,
        *,
        max_records: int | None = None,
        columns: Sequence[str] | None = None,
    ) -> Generator[Records, None, None]:
        """Stream the visible records of ``[start, end)`` with their offsets and
        append times, at most ``max_records`` of them. The range is cut before
        anything is fetched: segments past the last record wanted are never read.
        Offsets are the log's own: aborted batches and control records leave
        gaps in them.

        Raises:
            OffsetOutOfRangeError: as :meth:`iter_batches`.
            UnknownColumnError: as :meth:`iter_batches`.
        """
        part = self._log.partition(topic, partition)
        if columns is not None:
            projected(part.topic.schema, columns)  # bad names fail before any read
        if self.isolation_level == "read_uncommitted":
            start = part.start_offset() if start is None else start
            end = part.end_offset() if end is None else end
            summaries = part.summaries(start, end)
            hidden = frozenset(s.base for s in summaries if s.control)
            mark = min(end, part.compacted_through)
            if start < mark:
                # compaction left aborted records out: they count for no one
                decide = self._log.resolver.snapshot()
                hidden |= plan_committed(part, start, mark, decide, part.state()).hidden
        else:
            plan = plan_committed(part, start, end, self._log.resolver.snapshot(), part.state())
            start, end, summaries, hidden = plan.start, plan.end, plan.segments, plan.hidden
        self._read_from(part, start)
        if max_records is not None:
            end = _end_after(summaries, hidden, start, end, max_records)
        visible = part.iter_segments(
            start, end, skip=lambda ref: ref.base in hidden, columns=columns
        )
        for header, batch in visible:
            if not header.identity.control:
                yield Records(max(start, header.base_offset), header.timestamp_ms, batch)

    def offset_for_time(self, topic: str, partition: int, timestamp_ms: int) -> int:
        """The first offset whose record was appended at or after ``timestamp_ms``
        (Kafka's offsetsForTimes), else where reading ends (the LSO or the high
        watermark): where a reader starting "from that time" begins."""
        part = self._log.partition(topic, partition)
        start, end = part.start_offset(), self.end_offset(topic, partition)
        for s in part.summaries(start, end):
            if not s.control and s.timestamp_ms >= timestamp_ms:
                return max(s.base, start)
        return end

    def read(
        self,
        topic: str,
        partition: int = 0,
        start: int | None = None,
        end: int | None = None,
        *,
        columns: Sequence[str] | None = None,
        where: Sequence[Predicate] | None = None,
    ) -> pa.Table:
        """The visible records of ``[start, end)`` as one table; with
        ``columns``, only those; with ``where``, only matching rows (see
        :meth:`iter_batches`)."""
        schema = projected(self._log.topic(topic).schema, columns)
        try:
            batches = list(
                self.iter_batches(topic, partition, start, end, columns=columns, where=where)
            )
        except OffsetOutOfRangeError:
            if start is not None:
                raise
            # records deleted since this client last listed: from the new log start
            first = self._log.partition(topic, partition).start_offset(refresh=True)
            batches = list(
                self.iter_batches(topic, partition, first, end, columns=columns, where=where)
            )
        return pa.Table.from_batches(batches, schema)

    def read_many(
        self,
        ranges: Mapping[tuple[str, int], tuple[int | None, int | None]],
        *,
        columns: Sequence[str] | None = None,
        where: Sequence[Predicate] | None = None,
    ) -> dict[tuple[str, int], pa.Table]:
        """Several ranges read as one snapshot: a transaction's records appear in
        all the ranges or in none. The tables of :meth:`read_snapshot`.

        Raises:
            OffsetOutOfRangeError: a range is outside its log, or past the LSO.
            UnknownColumnError: ``columns`` names a column a topic lacks.
        """
        return self.read_snapshot(ranges, columns=columns, where=where).tables

    def read_snapshot(
        self,
        ranges: Mapping[tuple[str, int], tuple[int | None, int | None]],
        *,
        columns: Sequence[str] | None = None,
        where: Sequence[Predicate] | None = None,
    ) -> SnapshotRead:
        """Several ranges read as one snapshot (see :func:`plan_snapshot`), with
        where each range ended. A range whose end is None ends where the
        snapshot does, at or below its partition's LSO: continue from ``ends``,
        not from an LSO asked for separately.

        Raises:
            OffsetOutOfRangeError: a range is outside its log, or past the LSO.
            UnknownColumnError: ``columns`` names a column a topic lacks.
        """
        for topic in {topic for topic, _ in ranges}:
            _check_read(self._log.topic(topic).schema, columns, where)
        tables, ends = {}, {}
        if self.isolation_level == "read_uncommitted":
            for (topic, partition), (start, end) in ranges.items():
                part = self._log.partition(topic, partition)
                end = part.end_offset() if end is None else end
                tables[(topic, partition)] = part.read(start, end, columns=columns, where=where)
                ends[(topic, partition)] = end
                self._read_from(part, start)
            return SnapshotRead(tables, ends)
        for tp, plan in plan_snapshot(self._log, ranges).items():
            part = self._log.partition(*tp)
            batches = list(_visible_batches(part, plan, columns, where))
            tables[tp] = pa.Table.from_batches(batches, projected(part.topic.schema, columns))
            ends[tp] = plan.end
            self._read_from(part, plan.start)
        return SnapshotRead(tables, ends)


@dataclass(frozen=True, slots=True)
class Records:
    """Records of one segment: offsets ``offset .. offset + batch.num_rows - 1``,
    all appended at ``timestamp_ms``."""

    offset: int
    timestamp_ms: int
    batch: pa.RecordBatch


def _end_after(
    summaries: list[SegmentSummary], hidden: frozenset[int], start: int, end: int, records: int
) -> int:
    """Where ``[start, end)`` must end to hold ``records`` visible records (known
    from the segment summaries alone)."""
    left = records
    for s in summaries:
        if s.control or s.base in hidden or s.end <= start or s.base >= end:
            continue
        lo, hi = max(s.base, start), min(s.end, end)
        if hi - lo >= left:
            return lo + left
        left -= hi - lo
    return end


@dataclass(frozen=True)
class SnapshotRead:
    """What :meth:`Consumer.read_snapshot` returns: the visible records of each
    range, and the offset where each range ended (the next one to read)."""

    tables: dict[tuple[str, int], pa.Table]
    ends: dict[tuple[str, int], int]


def _check_read(
    schema: pa.Schema, columns: Sequence[str] | None, where: Sequence[Predicate] | None
) -> None:
    if columns is not None:
        projected(schema, columns)
    if where:
        check_predicates(schema, where)


def _visible_batches(
    part: PartitionLog,
    plan: CommittedPlan,
    columns: Sequence[str] | None = None,
    where: Sequence[Predicate] | None = None,
) -> Iterator[pa.RecordBatch]:
    hidden = plan.hidden
    for header, batch in part.iter_segments(
        plan.start,
        plan.end,
        skip=lambda ref: ref.base in hidden,
        columns=columns,
        where=where,
        summaries=plan.segments,
    ):
        if not header.identity.control:
            yield batch


@dataclass(frozen=True)
class CommittedPlan:
    """What a read_committed read of one partition will return."""

    start: int
    end: int
    last_stable_offset: int
    #: summaries of every segment overlapping [start, end)
    segments: list[SegmentSummary]
    #: bases of the segments to leave out: control records, aborted batches
    hidden: frozenset[int]
    #: bases of transactional batches below the compaction mark whose
    #: transaction cleanup forgot: read from compacted objects, which hold
    #: them iff they committed (they may be absent there)
    forgotten: frozenset[int] = frozenset()


def plan_committed(
    part: PartitionLog,
    start: int | None,
    end: int | None,
    decide: Snapshot,
    view: tuple[int, PartitionState],
    *,
    evidence_end: int | None = None,
) -> CommittedPlan:
    """Decide which segments of ``[start, end)`` are visible under read_committed,
    given a fixed view of the partition (high watermark, state) and a snapshot of
    the coordinator (shared by every partition of one read).

    A transactional batch is visible if its transaction committed, its producer
    is the owner or a member, and it lies below the transaction's bound in this
    partition. A marker after the batch answers that without the coordinator;
    markers at or past ``evidence_end`` are ignored (see :func:`plan_snapshot`).

    Raises:
        OffsetOutOfRangeError: the range is outside the log or past the LSO.
    """
    hw, state = view
    if isinstance(end, int) and end > hw:
        # an end given as known (a micro-batch's, a previous read's) may lie past
        # a listing gap: follow the chain by HEAD before calling it out of range
        hw, state = view = part.state(complete=True)
    lso = last_stable_offset(hw, state, decide, log_start=part.start_offset())
    open_ended = end is None
    start = part.start_offset() if start is None else start
    end = lso if end is None else end
    if isinstance(end, int) and not isinstance(end, bool) and end > lso:
        raise OffsetOutOfRangeError(
            f"{part.topic.name}/{part.partition}: end offset {end} is past the last "
            f"stable offset {lso} (an undecided transaction starts there)"
        )
    summaries = part.summaries(start, end)
    tp = tp_key(part.topic.name, part.partition)
    limit = hw if evidence_end is None else evidence_end
    markers = {
        (s.producer_id, s.producer_epoch): s
        for s in summaries
        if s.control
        and (s.base < limit or decide.known(s.transactional_id or "", s.producer_epoch))
    }
    hidden: set[int] = set()
    forgotten: set[int] = set()
    mark = [part.compacted_through, False]

    def below_mark(s: SegmentSummary) -> bool:
        # a batch forgotten above the mark this view knows: list the tail once
        # (the compaction mark may have moved since; see _committed)
        if s.end > mark[0] and not mark[1]:
            part.end_offset()
            mark[:] = [part.compacted_through, True]
        if s.end <= mark[0]:
            forgotten.add(s.base)
            return True
        return False

    for s in summaries:
        verdict = True if not s.transactional else _committed(s, markers, decide, tp, below_mark)
        if verdict is None:
            # Undecided for this read although a marker (ignored: it came after
            # the snapshot froze) closed it in the state: it holds the read's end
            # like an LSO. Skipping it would lose it for a reader going on.
            if not open_ended:
                raise OffsetOutOfRangeError(
                    f"{part.topic.name}/{part.partition}: end offset {end} is past "
                    f"{s.base}, where a transaction this read cannot decide starts"
                )
            end = lso = max(start, s.base)
            summaries = [k for k in summaries if k.base < end]
            break
        if s.control or not verdict:
            hidden.add(s.base)
    return CommittedPlan(
        start,
        end,
        lso,
        summaries,
        frozenset(b for b in hidden if b < end),
        frozenset(b for b in forgotten if b < end),
    )


def _committed(
    s: SegmentSummary,
    markers: Mapping[tuple[int, int], SegmentSummary],
    decide: Snapshot,
    tp: str,
    below_mark: Callable[[SegmentSummary], bool],
) -> bool | None:
    """Whether a transactional batch is visible; None if its transaction is
    undecided for this read. A transaction whose entries cleanup removed
    (FORGOTTEN) had no record stored outside compacted objects then: below
    the compaction mark (``below_mark``) the compacted object, read in the
    batch's place, decides (it holds the records iff they committed); above
    it, the batch came later, of an epoch the log had moved past: aborted."""
    if s.control:
        return False
    marker = markers.get((s.producer_id, s.producer_epoch))
    if marker is not None and s.base < marker.base:
        return marker.control_type == ControlType.COMMIT.value and s.base < marker.txn_bound
    outcome = decide.outcome(s.transactional_id or "", s.producer_epoch)
    if outcome.decision is Decision.UNDECIDED:
        return None
    if outcome.decision is Decision.FORGOTTEN:
        return below_mark(s)
    return outcome.includes(s.producer_id, tp, s.base)


def plan_snapshot(
    log: LogView, ranges: Mapping[tuple[str, int], tuple[int | None, int | None]]
) -> dict[tuple[str, int], CommittedPlan]:
    """Plan a read_committed read of several partitions as one snapshot.

    Views of partitions are taken one after another, so a transaction can commit
    between two of them: its records may be missing from the earlier view while
    the later one shows it committed. Hence two rounds. First, fix a view of
    every partition, note the markers it holds and ask the coordinator about
    every transaction it shows without one; then freeze the snapshot and fix the
    views again. A transaction known decided at the freeze (by the coordinator,
    or by a marker inside a first-round view of any partition) committed before
    the second round began, so all its records are inside every second-round
    view; any other transaction counts as undecided for this read, whatever
    markers the second round shows.

    Second, a committed transaction can still be cut by an LSO: its records in
    one partition sit after an undecided transaction while another partition
    shows them. Ranges left open (end None) are then cut before it everywhere,
    until no transaction is partly visible. Explicit ends are kept as given.
    """
    snapshot = log.resolver.snapshot()
    first = {tp: log.partition(*tp).state() for tp in ranges}
    for tp, (start, end) in ranges.items():
        part = log.partition(*tp)
        hw, state = first[tp]
        for s in part.summaries(start, hw):
            if s.control:
                snapshot.note_marker(s.transactional_id or "", s.producer_epoch)
        lso = last_stable_offset(hw, state, snapshot, log_start=part.start_offset())
        # asks about every batch without a marker after it, in the first view
        plan_committed(part, start, lso if end is None else min(end, lso), snapshot, first[tp])
    snapshot.freeze()
    plans = {}
    for tp, (start, end) in ranges.items():
        part = log.partition(*tp)
        # complete: every record of a transaction known at the freeze is in it,
        # even where a listing racing appends would stop short
        view = part.state(complete=True)
        plans[tp] = plan_committed(part, start, end, snapshot, view, evidence_end=first[tp][0])
    open_ended = {tp for tp, (_, end) in ranges.items() if end is None}
    return _cut_torn(log, plans, open_ended, snapshot)


def snapshot_ends(log: LogView, topic: str, starts: Mapping[int, int]) -> dict[int, int]:
    """Where a read_committed read of every partition of ``topic`` from
    ``starts`` (a partition left out: from its log start) ends, as one
    snapshot (:func:`plan_snapshot`): every transaction below the ends
    everywhere, or nowhere. The partitions are counted again after the
    snapshot: one added meanwhile may hold part of a transaction the snapshot
    shows committed, so the snapshot is taken again with it."""
    while True:
        count = log.topic(topic, refresh=True).partitions
        plans = plan_snapshot(log, {(topic, p): (starts.get(p), None) for p in range(count)})
        if log.topic(topic, refresh=True).partitions == count:
            return {p: plans[(topic, p)].end for p in range(count)}


def untorn_ends(
    log: LogView,
    begin: Mapping[tuple[str, int], int],
    ends: Mapping[tuple[str, int], int],
    latest: Mapping[tuple[str, int], int],
) -> dict[tuple[str, int], int]:
    """``ends`` (each between ``begin`` and ``latest``, the ends of one
    snapshot) moved so that no transaction has records on both sides of them,
    in any partition: a read that stops there (a rate-limited micro-batch) holds
    a transaction whole or not at all. Ends are lowered to a transaction's first
    record; if that leaves nothing to read, they are raised past its last
    instead (a transaction larger than the limit is read in one go)."""

    def txn(s: SegmentSummary) -> tuple[str, int]:
        return (s.transactional_id or "", s.producer_epoch)

    segments = {
        tp: [
            s
            for s in log.partition(*tp).summaries(begin[tp], latest[tp])
            if s.transactional and not s.control and s.end > begin[tp]
        ]
        for tp in ends
    }

    def settle(out: dict[tuple[str, int], int], lower: bool) -> dict[tuple[str, int], int]:
        while True:
            for tp, segs in segments.items():  # never inside a transaction's batch
                for s in segs:
                    if s.base < out[tp] < s.end:
                        out[tp] = max(begin[tp], s.base) if lower else min(latest[tp], s.end)
            below = {txn(s) for tp, segs in segments.items() for s in segs if s.base < out[tp]}
            above = {txn(s) for tp, segs in segments.items() for s in segs if s.end > out[tp]}
            torn = below & above
            if not torn:
                return out
            for tp, segs in segments.items():
                mine = [s for s in segs if txn(s) in torn]
                if lower and any(s.base < out[tp] for s in mine):
                    out[tp] = max(begin[tp], min(s.base for s in mine))
                elif not lower and any(s.end > out[tp] for s in mine):
                    out[tp] = min(latest[tp], max(s.end for s in mine))

    lowered = settle(dict(ends), lower=True)
    if any(lowered[tp] > begin[tp] for tp in lowered) or not any(
        ends[tp] > begin[tp] for tp in ends
    ):
        return lowered
    return settle(dict(ends), lower=False)


def _cut_torn(
    log: LogView,
    plans: dict[tuple[str, int], CommittedPlan],
    open_ended: set[tuple[str, int]],
    snapshot: Snapshot,
) -> dict[tuple[str, int], CommittedPlan]:
    """Lower the ends of open-ended ranges until every committed transaction
    visible in one partition has no committed records left out of another."""

    def txn(s: SegmentSummary) -> tuple[str, int]:
        return (s.transactional_id or "", s.producer_epoch)

    def left_out(tp: tuple[str, int], plan: CommittedPlan) -> set[tuple[str, int]]:
        part = log.partition(*tp)
        hw = part.end_offset(refresh=False)
        key = tp_key(*tp)
        return {
            txn(s)
            for s in part.summaries(plan.end, max(plan.end, hw))
            if s.transactional
            and not s.control
            and s.base >= plan.end
            and snapshot.outcome(*txn(s)).includes(s.producer_id, key, s.base)
        }

    beyond = {tp: left_out(tp, plan) for tp, plan in plans.items()}
    changed = True
    while changed:
        changed = False
        cut_off = set().union(*beyond.values()) if beyond else set()
        for tp in open_ended:
            plan = plans[tp]
            first_torn = min(
                (
                    s.base
                    for s in plan.segments
                    if s.transactional
                    and s.base not in plan.hidden
                    and s.end > plan.start
                    and s.base < plan.end
                    and txn(s) in cut_off
                ),
                default=None,
            )
            if first_torn is None:
                continue
            end = max(plan.start, first_torn)
            kept = [s for s in plan.segments if s.base < end]
            plans[tp] = CommittedPlan(
                plan.start, end, plan.last_stable_offset, kept,
                frozenset(b for b in plan.hidden if b < end),
            )  # fmt: skip
            beyond[tp] |= {
                txn(s)
                for s in plan.segments
                if s.transactional and s.base >= end and s.base not in plan.hidden
            }
            changed = True
    return plans
