"""Consumers: read_uncommitted and read_committed reads of partitions, and
consumer group offsets. What a read_committed read may return is decided in
:mod:`arrowlog.read.visibility`.

A consumer remembers, per partition, the incarnation of the topic its
position there belongs to (what it read, or looked up): offsets it commits
are kept as positions in that incarnation, and refused once the topic has
been deleted and created again (see :meth:`Consumer.commit`).
"""

from __future__ import annotations

import contextlib
from collections.abc import Generator, Iterator, Mapping, Sequence
from dataclasses import dataclass

import pyarrow as pa

from arrowlog.errors import (
    InvalidConfigError,
    OffsetOutOfRangeError,
    UnknownTopicOrPartitionError,
    UnstableOffsetCommitError,
)
from arrowlog.format.checkpoint import PartitionState, SegmentSummary
from arrowlog.format.stats import Predicate, check_predicates
from arrowlog.partition import PartitionLog, projected
from arrowlog.read.visibility import (
    Decide,
    IsolationLevel,
    check_isolation_level,
    last_stable_offset,
    plan_committed,
    plan_snapshot,
    visible_batches,
)
from arrowlog.txn.coordinator import check_id
from arrowlog.txn.groups import ConsumerGroupMetadata, GroupOffsets, keyed_offsets
from arrowlog.txn.view import LogView, incarnation_of


class Consumer:
    """Reads partitions at one isolation level, for one consumer group."""

    def __init__(
        self,
        log: LogView,
        *,
        group_id: str | None = None,
        isolation_level: IsolationLevel = "read_committed",
    ) -> None:
        self.isolation_level: IsolationLevel = check_isolation_level(isolation_level)
        self._log = log
        self.group_id = None if group_id is None else check_id("group id", group_id)
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
        partition: int | None = None,
        start: int | None = None,
        end: int | None = None,
        *,
        columns: Sequence[str] | None = None,
        where: Sequence[Predicate] | None = None,
    ) -> Generator[pa.RecordBatch, None, None]:
        """Stream the visible records of ``[start, end)`` of ``partition``, or
        (None) of every partition, in partition order, as one snapshot (no
        ``start`` or ``end`` then). ``end`` defaults to the
        LSO (read_committed) or the high watermark. With ``columns``, batches
        hold only those columns, in that order, and segments of at least
        :data:`~arrowlog.partition.fetch.COLUMN_READ_MIN_BYTES` are fetched
        column by column. With ``where`` (``[("col", ">", 5), ...]``, see
        :mod:`arrowlog.format.stats`), only matching rows are returned, and segments
        whose column statistics prove that none matches are not fetched.

        Raises:
            OffsetOutOfRangeError: the range is outside the log, or reaches past
                the LSO under read_committed.
            UnknownColumnError: ``columns`` names a column the topic lacks.
        """
        if partition is None and self._log.topic(topic).partitions > 1:
            tables = self._every_partition(topic, start, end, columns, where)
            for table in tables.values():
                yield from table.to_batches()
            return
        part = self._log.partition(topic, 0 if partition is None else partition)
        if self.isolation_level == "read_uncommitted":
            batches = part.iter_batches(start, end, columns=columns, where=where)
            yield from self._noting(part, start, batches)
            return
        _check_read(part.topic.schema, columns, where)  # bad input fails before any read
        plan = plan_committed(part, start, end, self._log.resolver.snapshot(), _view(part, end))
        if partition is None and self._log.topic(topic, refresh=True).partitions > 1:
            # partitions added while planning: read every one, as one snapshot
            tables = self._every_partition(topic, start, end, columns, where)
            for table in tables.values():
                yield from table.to_batches()
            return
        self._read_from(part, plan.start)
        yield from visible_batches(part, plan, columns, where)

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
            plan = plan_committed(part, start, end, self._log.resolver.snapshot(), _view(part, end))
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
        partition: int | None = None,
        start: int | None = None,
        end: int | None = None,
        *,
        columns: Sequence[str] | None = None,
        where: Sequence[Predicate] | None = None,
    ) -> pa.Table:
        """The visible records of ``[start, end)`` of ``partition``, or (None)
        of every partition, in partition order, as one snapshot; one table.
        With ``columns``, only those; with ``where``, only matching rows (see
        :meth:`iter_batches`). :meth:`ArrowLog.scan <arrowlog.ArrowLog.scan>`
        adds each row's partition and offset.

        Raises:
            InvalidConfigError: ``start`` or ``end`` without a partition, in a
                topic of several.
        """
        if partition is not None:
            # the partition first: a new client then reads the topic while the
            # opening's first LIST runs (arrowlog.partition.ahead)
            try:
                self._log.partition(topic, partition)
            except UnknownTopicOrPartitionError:
                if columns is not None:  # bad columns are said first, as ever
                    projected(self._log.topic(topic).schema, columns)
                raise
        schema = projected(self._log.topic(topic).schema, columns)
        if partition is None and self._log.topic(topic).partitions > 1:
            tables = self._every_partition(topic, start, end, columns, where)
            return pa.concat_tables(list(tables.values())).combine_chunks()
        if partition is None:
            # a topic of one partition: read as such, unless it had more by the end
            table = self.read(topic, 0, start, end, columns=columns, where=where)
            if self._log.topic(topic, refresh=True).partitions == 1:
                return table
            return self.read(topic, None, start, end, columns=columns, where=where)
        part = self._log.partition(topic, partition)
        try:
            # one table holds every segment: its listing may fetch them whole
            with part.reading(start, end, columns=columns, where=where):
                batches = list(
                    self.iter_batches(topic, partition, start, end, columns=columns, where=where)
                )
        except OffsetOutOfRangeError:
            if start is not None:
                raise
            # records deleted since this client last listed: from the new log start
            first = part.start_offset(refresh=True)
            batches = list(
                self.iter_batches(topic, partition, first, end, columns=columns, where=where)
            )
        return pa.Table.from_batches(batches, schema)

    def _every_partition(
        self,
        topic: str,
        start: int | None,
        end: int | None,
        columns: Sequence[str] | None,
        where: Sequence[Predicate] | None,
    ) -> dict[tuple[str, int], pa.Table]:
        """Every partition of ``topic``, from its log start to where reading
        ends, as one snapshot, in partition order. The partitions are counted
        again after the read: one added meanwhile may hold part of a
        transaction the snapshot shows committed, so it is read again with it."""
        if start is not None or end is not None:
            raise InvalidConfigError(
                f"start and end are offsets of one partition, and topic {topic!r} has "
                f"several: name it (read({topic!r}, partition, start, end)), or use "
                "ArrowLog.scan with offsets per partition"
            )
        count = self._log.topic(topic).partitions
        while True:
            ranges = {(topic, p): (None, None) for p in range(count)}
            tables = self.read_snapshot(ranges, columns=columns, where=where).tables
            now = self._log.topic(topic, refresh=True).partitions
            if now == count:
                return {tp: tables[tp] for tp in ranges}
            count = now

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
                with part.reading(start, end, columns=columns, where=where):
                    end = part.end_offset() if end is None else end
                    tables[(topic, partition)] = part.read(start, end, columns=columns, where=where)
                ends[(topic, partition)] = end
                self._read_from(part, start)
            return SnapshotRead(tables, ends)
        with contextlib.ExitStack() as reading:  # planned first, then read, partition by partition
            for (topic, partition), (start, end) in ranges.items():
                part = self._log.partition(topic, partition)
                reading.enter_context(part.reading(start, end, columns=columns, where=where))
            for tp, plan in plan_snapshot(self._log, ranges).items():
                part = self._log.partition(*tp)
                batches = list(visible_batches(part, plan, columns, where))
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


def _view(part: PartitionLog, end: int | None) -> tuple[int, PartitionState]:
    """The partition's high watermark and state for a read to ``end``; no
    listing when this client already knows the log past ``end``: every
    transaction that can hold back an offset below it started below it."""
    known = isinstance(end, int) and end <= part.end_offset(refresh=False)
    return part.state(refresh=not known)
