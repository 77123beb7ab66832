""":class:`PartitionLog`, composed of its parts (see the package docstring)."""

from __future__ import annotations

import collections
import contextlib
from collections.abc import Callable, Generator, Iterable, Sequence

import pyarrow as pa

from arrowlog.config import DEFAULT_RETAIN_MS, LogConfig, TopicConfig
from arrowlog.format.checkpoint import Decision, OpenTxn, PartitionState, SegmentSummary
from arrowlog.format.compacted_index import CompactedIndex
from arrowlog.format.control import ControlType
from arrowlog.format.segment import PLAIN_APPEND, Ref, SegmentHeader, WriterIdentity
from arrowlog.format.stats import Predicate
from arrowlog.format.topic import Topic
from arrowlog.partition._base import RefreshTopic, Shared
from arrowlog.partition.ahead import CheckpointLookAhead
from arrowlog.partition.append import Appends
from arrowlog.partition.append_result import AppendResult
from arrowlog.partition.batches import BatchAppends
from arrowlog.partition.checkpoints import Checkpoints
from arrowlog.partition.compaction import CompactionRange, Compactions
from arrowlog.partition.indexes import CompactedIndexes
from arrowlog.partition.known import KnownLog
from arrowlog.partition.listing import Listing
from arrowlog.partition.reads import Reads
from arrowlog.partition.retention import Removal, Retention, VacuumPlan
from arrowlog.partition.units import CompactedRef, Fetcher, SegmentRef
from arrowlog.storage import Store


class PartitionLog:
    """Appends to and reads from one partition. Thread-safe; one instance per
    partition per process is enough (``ArrowLog.partition`` caches them).

    ``decide`` (given by the ArrowLog) asks the coordinator log how a transaction
    ended; checkpoints use it to drop decided transactions from their open set.

    Each method hands the call to the part that does it; the parts' methods
    say what it costs and what it raises.
    """

    def __init__(
        self,
        store: Store,
        topic: Topic,
        partition: int,
        config: LogConfig,
        *,
        decide: Callable[[OpenTxn], Decision] | None = None,
        refresh_topic: RefreshTopic | None = None,
        ahead: CheckpointLookAhead | None = None,
    ) -> None:
        shared = Shared(store, topic, partition, config, decide=decide,
                        refresh_topic=refresh_topic, ahead=ahead)  # fmt: skip
        known = KnownLog()
        listing = Listing(shared, known)
        indexes = CompactedIndexes(shared)
        checkpoints = Checkpoints(shared, known, listing, indexes)
        listing.bind(checkpoints)
        reads = Reads(shared, known, listing, checkpoints, Fetcher(shared, known, listing))
        appends = Appends(shared, known, listing, checkpoints, indexes, reads)
        self._shared = shared
        self._known = known
        self._listing = listing
        self._checkpoints = checkpoints
        self._reads = reads
        self._appends = appends
        self._batches = BatchAppends(appends, known)
        self._retention = Retention(shared, known, listing, checkpoints, reads)
        self._compactions = Compactions(shared, known, listing, checkpoints, indexes, reads)

    # --- what the partition is -------------------------------------------------------

    @property
    def topic(self) -> Topic:
        return self._shared.topic

    @property
    def partition(self) -> int:
        return self._shared.partition

    def segment_key(self, base: int) -> str:
        """The key of the segment that starts at offset ``base``."""
        return self._shared.key(base)

    def opened_topic(self) -> Topic:
        """The topic as the opening listing shows it: see
        :meth:`Checkpoints.opened_topic`."""
        return self._checkpoints.opened_topic()

    @property
    def stats(self) -> collections.Counter[str]:
        """Counters since this object was made: appends, lost races
        (conflicts), replies lost or failed writes resolved by reading back
        (ambiguous), appends put below the log start (below_log_start)."""
        return self._appends.stats

    @property
    def _summaries(self) -> dict[int, SegmentSummary]:
        """The segment summaries the state part holds (tests count them)."""
        return self._known.summaries

    # --- reading: Reads ---------------------------------------------------------------

    def end_offset(self, *, refresh: bool = True, complete: bool = False) -> int:
        """The high watermark: see :meth:`Reads.end_offset`."""
        return self._reads.end_offset(refresh=refresh, complete=complete)

    def start_offset(self, *, refresh: bool = False) -> int:
        """The log start offset: see :meth:`Reads.start_offset`."""
        return self._reads.start_offset(refresh=refresh)

    def state(self, *, refresh: bool = True, complete: bool = False) -> tuple[int, PartitionState]:
        """The high watermark and the partition state there: see :meth:`Reads.state`."""
        return self._reads.state(refresh=refresh, complete=complete)

    def segments(self, start: int | None = None, end: int | None = None) -> list[SegmentRef]:
        """The segments that hold ``[start, end)``: see :meth:`Reads.segments`."""
        return self._reads.segments(start, end)

    def summaries(self, start: int | None = None, end: int | None = None) -> list[SegmentSummary]:
        """Header summaries of the batches holding ``[start, end)``: see
        :meth:`Reads.summaries`."""
        return self._reads.summaries(start, end)

    def objects(self, start: int | None = None, end: int | None = None) -> list[SegmentSummary]:
        """Summaries of the objects at segment keys holding ``[start, end)``
        (a commit object with the batches it commits): see :meth:`Reads.objects`."""
        return self._reads.objects(start, end)

    def iter_segments(
        self,
        start: int | None = None,
        end: int | None = None,
        *,
        skip: Callable[[SegmentRef], bool] | None = None,
        columns: Sequence[str] | None = None,
        where: Sequence[Predicate] | None = None,
        summaries: Sequence[SegmentSummary] | None = None,
    ) -> Generator[tuple[SegmentHeader, pa.RecordBatch], None, None]:
        """Stream ``(header, batch)`` for ``[start, end)``: see :meth:`Reads.iter_segments`."""
        return self._reads.iter_segments(
            start, end, skip=skip, columns=columns, where=where, summaries=summaries
        )

    def reading(
        self,
        start: int | None = None,
        end: int | None = None,
        *,
        columns: Sequence[str] | None = None,
        where: Sequence[Predicate] | None = None,
    ) -> contextlib.AbstractContextManager[None]:
        """Around a read of ``[start, end)`` whose planning lists (``state``,
        ``end_offset``) before it fetches: segments the listing finds in the
        range are read whole once, not a head and then the whole (see
        :mod:`arrowlog.partition.prefetch`). Nothing for a filtered read."""
        return self._reads.reading(start, end, columns, where)

    def iter_batches(
        self,
        start: int | None = None,
        end: int | None = None,
        *,
        columns: Sequence[str] | None = None,
        where: Sequence[Predicate] | None = None,
    ) -> Generator[pa.RecordBatch, None, None]:
        """Stream the records of ``[start, end)``: see :meth:`Reads.iter_batches`."""
        return self._reads.iter_batches(start, end, columns=columns, where=where)

    def read(
        self,
        start: int | None = None,
        end: int | None = None,
        *,
        columns: Sequence[str] | None = None,
        where: Sequence[Predicate] | None = None,
    ) -> pa.Table:
        """The records of ``[start, end)`` as one table: see :meth:`Reads.read`."""
        return self._reads.read(start, end, columns=columns, where=where)

    def compacted_objects(self, start: int, end: int) -> list[CompactedRef]:
        """The compacted objects holding ``[start, end)``: see
        :meth:`Reads.compacted_objects`."""
        return self._reads.compacted_objects(start, end)

    # --- appending: Appends, BatchAppends ---------------------------------------------

    def prepare_batch(self, batch: pa.RecordBatch | pa.Table) -> pa.RecordBatch:
        """Check a batch against the topic: see :meth:`Appends.prepare_batch`."""
        return self._appends.prepare_batch(batch)

    def check_fits(self, batch: pa.RecordBatch, identity: WriterIdentity) -> None:
        """Refuse a batch too large wherever it lands: see :meth:`Appends.check_fits`."""
        self._appends.check_fits(batch, identity)

    def check_expected_offset(self, expected_offset: int | None) -> None:
        """Refuse an expected offset no log can end at: see
        :meth:`Appends.check_expected_offset`."""
        self._appends.check_expected_offset(expected_offset)

    def append(
        self,
        batch: pa.RecordBatch | pa.Table,
        *,
        expected_offset: int | None = None,
        identity: WriterIdentity = PLAIN_APPEND,
    ) -> AppendResult:
        """Append ``batch`` at the log end, or exactly at ``expected_offset``:
        see :meth:`Appends.append`."""
        return self._appends.append(batch, expected_offset=expected_offset, identity=identity)

    def commit_refs(self, refs: Sequence[Ref]) -> AppendResult:
        """Commit staged objects their writer uploaded: see :meth:`Appends.commit_refs`."""
        return self._appends.commit_refs(refs)

    def append_control(
        self, kind: ControlType, identity: WriterIdentity, entry: int, *, bound: int = -1
    ) -> AppendResult:
        """Append a transaction marker: see :meth:`Appends.append_control`."""
        return self._appends.append_control(kind, identity, entry, bound=bound)

    def append_batches(
        self,
        batches: Iterable[pa.RecordBatch | pa.Table],
        *,
        expected_offset: int | None = None,
    ) -> Generator[AppendResult, None, None]:
        """Append ``batches`` in order, the next encoded while one is written:
        see :meth:`BatchAppends.append_batches`."""
        return self._batches.append_batches(batches, expected_offset=expected_offset)

    # --- maintenance: Retention, Compactions ------------------------------------------

    def delete_records(self, before_offset: int) -> int:
        """Move the log start to ``before_offset``: see :meth:`Retention.delete_records`."""
        return self._retention.delete_records(before_offset)

    def plan_vacuum(
        self, now_ms: int, config: TopicConfig, retain_ms: int = DEFAULT_RETAIN_MS
    ) -> VacuumPlan:
        """What ``vacuum`` does here: see :meth:`Retention.plan_vacuum`."""
        return self._retention.plan_vacuum(now_ms, config, retain_ms)

    @property
    def compacted_through(self) -> int:
        """The compaction mark as of this object's last listing: the records
        below it are in compacted objects."""
        return self._compactions.compacted_through

    def plan_compaction(self, target_bytes: int, stable: int) -> list[CompactionRange]:
        """The next ranges to compact: see :meth:`Compactions.plan_compaction`."""
        return self._compactions.plan_compaction(target_bytes, stable)

    def write_compacted(
        self,
        start: int,
        end: int,
        batch: pa.RecordBatch,
        runs: list[tuple[int, int, int]],
        index: CompactedIndex,
    ) -> str:
        """Write the compacted object of ``[start, end)`` and its mark: see
        :meth:`Compactions.write_compacted`."""
        return self._compactions.write_compacted(start, end, batch, runs, index)

    def keep_unreadable_copies(self, removals: list[Removal]) -> list[Removal]:
        """``removals`` without the segments that are the only readable copy:
        see :meth:`Compactions.keep_unreadable_copies`."""
        return self._compactions.keep_unreadable_copies(removals)
