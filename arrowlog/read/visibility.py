"""read_committed visibility: which records of a partition a read may return.

Under read_committed a transactional batch is visible only if its transaction
committed. The decision is the coordinator log's (PREPARE_COMMIT is the point of
no return); a COMMIT or ABORT marker in the partition is a durable copy of that
decision, so readers of older data rarely need the coordinator. The last stable
offset (LSO) of a partition is the first offset of its earliest undecided
transaction, or the high watermark; read_committed reads stop there.

A read over several partitions sees a transaction's records in every partition
or in none, even if the transaction commits while the read runs (see
:func:`plan_snapshot`). A committed transaction's records are those below its
bound in each partition, fixed at PREPARE_COMMIT: a late record of an instance
that lost the transaction never joins it. The consumer, the scan, compaction,
the admin, streaming and the exports all decide visibility here.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import Literal

import pyarrow as pa

from arrowlog.errors import InvalidConfigError, OffsetOutOfRangeError
from arrowlog.format.checkpoint import Decision, OpenTxn, PartitionState, SegmentSummary
from arrowlog.format.control import ControlType
from arrowlog.format.stats import Predicate
from arrowlog.partition import PartitionLog
from arrowlog.txn.groups import tp_key
from arrowlog.txn.resolver import Snapshot
from arrowlog.txn.view import LogView

IsolationLevel = Literal["read_committed", "read_uncommitted"]
Decide = Callable[[OpenTxn], Decision]


def check_isolation_level(value: object) -> IsolationLevel:
    """``value`` as an isolation level.

    Raises:
        InvalidConfigError: it is neither ``read_committed`` nor ``read_uncommitted``.
    """
    if value == "read_committed" or value == "read_uncommitted":
        return value
    raise InvalidConfigError(
        f"isolation_level must be 'read_committed' or 'read_uncommitted', not {value!r}"
    )


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


def visible_batches(
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
    below_mark = _BelowMark(part)
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
        frozenset(b for b in below_mark.forgotten if b < end),
    )


class _BelowMark:
    """Whether a transactional batch lies below the partition's compaction
    mark (called once per batch, in offset order); those that do are kept in
    :attr:`forgotten`."""

    def __init__(self, part: PartitionLog) -> None:
        self._part = part
        self._mark = part.compacted_through
        self._listed = False
        self.forgotten: set[int] = set()

    def __call__(self, s: SegmentSummary) -> bool:
        # a batch forgotten above the mark this view knows: list the tail once
        # (the compaction mark may have moved since; see _committed)
        if s.end > self._mark and not self._listed:
            self._part.end_offset()
            self._mark, self._listed = self._part.compacted_through, True
        if s.end <= self._mark:
            self.forgotten.add(s.base)
            return True
        return False


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
