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
read runs. It first fixes its view of every partition (high watermark and
state), and only then asks the coordinator, once per transaction for the whole
read. A marker inside a fixed view implies the coordinator had decided before
the view was taken, so a coordinator answer obtained afterwards can only agree
with it; an UNDECIDED answer means no view can hold a marker for it.
"""

from __future__ import annotations

from collections.abc import Callable, Generator, Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Literal

import pyarrow as pa

from arrowlog.checkpoint import Decision, OpenTxn, PartitionState, SegmentSummary
from arrowlog.control import ControlType
from arrowlog.coordinator import check_id
from arrowlog.errors import InvalidConfigError, OffsetOutOfRangeError
from arrowlog.groups import GroupOffsets, tp_key
from arrowlog.partition import PartitionLog, SegmentRef

if TYPE_CHECKING:
    from arrowlog.log import ArrowLog

IsolationLevel = Literal["read_committed", "read_uncommitted"]
Decide = Callable[[OpenTxn], Decision]


def last_stable_offset(high_watermark: int, state: PartitionState, decide: Decide) -> int:
    """The first offset of the earliest undecided transaction, else the high
    watermark. Decided transactions never hold it back, marker or not: that is
    what makes a fenced zombie's late writes harmless."""
    undecided = [
        t.first_offset for t in state.open_txns.values() if decide(t) is Decision.UNDECIDED
    ]
    return min(undecided, default=high_watermark)


class Consumer:
    """Reads partitions at one isolation level, for one consumer group."""

    def __init__(
        self,
        log: ArrowLog,
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

    # --- offsets ------------------------------------------------------------------

    def stable_offset(self, topic: str, partition: int, *, decide: Decide | None = None) -> int:
        """The last stable offset of a partition (the high watermark under
        read_uncommitted)."""
        part = self._log.partition(topic, partition)
        if self.isolation_level == "read_uncommitted":
            return part.end_offset()
        hw, state = part.state()
        return last_stable_offset(hw, state, decide or self._log.resolver.snapshot())

    def end_offset(self, topic: str, partition: int) -> int:
        """Where reading ends at this isolation level: the LSO or the high watermark."""
        return self.stable_offset(topic, partition)

    def _groups(self) -> GroupOffsets:
        if self.group_id is None:
            raise InvalidConfigError("this consumer has no group_id")
        return GroupOffsets(self._log.store, self.group_id, self._log.config.retry)

    def committed(self, topic: str, partition: int) -> int | None:
        """The group's committed offset (the next offset to read), if any."""
        return self._groups().committed().get((topic, partition))

    def commit(self, offsets: Mapping[tuple[str, int], int]) -> None:
        """Commit the group's position outside any transaction."""
        for (topic, partition), offset in offsets.items():
            self._log.topic(topic).check_partition(partition)
            if isinstance(offset, bool) or not isinstance(offset, int) or offset < 0:
                raise InvalidConfigError(f"offset for {topic}/{partition} must be an int >= 0")
        self._groups().commit({tp_key(t, p): o for (t, p), o in offsets.items()})

    # --- reads --------------------------------------------------------------------

    def iter_batches(
        self,
        topic: str,
        partition: int = 0,
        start: int | None = None,
        end: int | None = None,
        *,
        decide: Decide | None = None,
        view: tuple[int, PartitionState] | None = None,
    ) -> Generator[pa.RecordBatch, None, None]:
        """Stream the visible records of ``[start, end)``. ``end`` defaults to the
        LSO (read_committed) or the high watermark.

        Raises:
            OffsetOutOfRangeError: the range is outside the log, or reaches past
                the LSO under read_committed.
        """
        part = self._log.partition(topic, partition)
        if self.isolation_level == "read_uncommitted":
            yield from part.iter_batches(start, end)
            return
        decide = decide or self._log.resolver.snapshot()
        start, end, skip = self._plan(part, start, end, decide, view or part.state())
        for header, batch in part.iter_segments(start, end, skip=skip):
            if not header.identity.control:
                yield batch

    def read(
        self, topic: str, partition: int = 0, start: int | None = None, end: int | None = None
    ) -> pa.Table:
        """The visible records of ``[start, end)`` as one table."""
        schema = self._log.topic(topic).schema
        return pa.Table.from_batches(list(self.iter_batches(topic, partition, start, end)), schema)

    def read_many(
        self, ranges: Mapping[tuple[str, int], tuple[int | None, int | None]]
    ) -> dict[tuple[str, int], pa.Table]:
        """Several ranges read as one snapshot: each transaction is decided once,
        so its records appear in all the ranges or in none."""
        views = {tp: self._log.partition(*tp).state() for tp in ranges}  # views first
        decide = self._log.resolver.snapshot()
        out = {}
        for (topic, partition), (start, end) in ranges.items():
            schema = self._log.topic(topic).schema
            batches = self.iter_batches(
                topic, partition, start, end, decide=decide, view=views[(topic, partition)]
            )
            out[(topic, partition)] = pa.Table.from_batches(list(batches), schema)
        return out

    def _plan(
        self,
        part: PartitionLog,
        start: int | None,
        end: int | None,
        decide: Decide,
        view: tuple[int, PartitionState],
    ) -> tuple[int, int, Callable[[SegmentRef], bool]]:
        plan = plan_committed(part, start, end, decide, view)
        hidden = plan.hidden
        return plan.start, plan.end, lambda ref: ref.base in hidden


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


def plan_committed(
    part: PartitionLog,
    start: int | None,
    end: int | None,
    decide: Decide,
    view: tuple[int, PartitionState],
) -> CommittedPlan:
    """Decide which segments of ``[start, end)`` are visible under read_committed,
    given a fixed view of the partition (high watermark, state) and a decide
    function (a resolver snapshot, shared by every partition of one read).

    Raises:
        OffsetOutOfRangeError: the range is outside the log or past the LSO.
    """
    hw, state = view
    lso = last_stable_offset(hw, state, decide)
    start = part.start_offset() if start is None else start
    end = lso if end is None else end
    if isinstance(end, int) and not isinstance(end, bool) and end > lso:
        raise OffsetOutOfRangeError(
            f"{part.topic.name}/{part.partition}: end offset {end} is past the last "
            f"stable offset {lso} (an undecided transaction starts there)"
        )
    summaries = part.summaries(start, end)
    markers = {(s.producer_id, s.producer_epoch): s.control_type for s in summaries if s.control}
    hidden: set[int] = set()
    for s in summaries:
        if s.control:
            hidden.add(s.base)
        elif s.transactional:
            kind = markers.get((s.producer_id, s.producer_epoch))
            if kind is not None:
                committed = kind == ControlType.COMMIT.value
            else:
                txn = OpenTxn(s.producer_id, s.producer_epoch, s.transactional_id or "", s.base)
                committed = decide(txn) is Decision.COMMITTED
            if not committed:
                hidden.add(s.base)
    return CommittedPlan(start, end, lso, summaries, frozenset(hidden))
