"""Checkpoints: a partition's segment index, producer state and open
transactions, in windows.

A checkpoint covers a *window* of exactly ``checkpoint_interval`` consecutive
segments, starting where the previous window ended (the first starts at the log
start). Windows are a pure function of the log, so any two writers that write the
same checkpoint write the same facts, and put-if-absent lets one of them win
harmlessly.

Each checkpoint holds, for its window, a summary of every segment's header (base,
size, producer id, epoch, sequence, flags, transactional id, timestamp), and the
partition state at the window's end: the latest batch of every producer (the
single-batch window of the producer-state proposal) and the transactions that
have data but no marker yet. Opening a partition reads the newest checkpoint and
the segments after it: a cost independent of the log's history.
"""

from __future__ import annotations

import enum
import itertools
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field, replace
from typing import Any

from arrowlog import _checked_json
from arrowlog.errors import CorruptCheckpointError
from arrowlog.format.segment import Ref, SegmentHeader

CHECKPOINT_VERSION = 3
#: the version of a checkpoint whose window holds a commit object: readers
#: that predate staged appends refuse it by this number
REFS_CHECKPOINT_VERSION = 4


class Decision(enum.Enum):
    """What the coordinator log says of one transaction."""

    COMMITTED = "committed"
    ABORTED = "aborted"
    UNDECIDED = "undecided"
    #: its entries went with cleanup (docs/protocol.md, "Cleaning up"), which
    #: keeps those of every transaction with records outside compacted objects:
    #: its records are in compacted objects (which hold them iff committed)
    FORGOTTEN = "forgotten"


@dataclass(frozen=True, slots=True)
class SegmentSummary:
    """The header facts of one segment that the index keeps."""

    base: int
    size: int
    record_count: int
    timestamp_ms: int
    producer_id: int = -1
    producer_epoch: int = -1
    base_sequence: int = -1
    transactional: bool = False
    control_type: str | None = None
    transactional_id: str | None = None
    txn_bound: int = -1
    #: the header's column statistics (see :mod:`arrowlog.format.stats`); None in
    #: checkpoints and segments written before them
    stats: dict[str, list[Any]] | None = None
    #: the append id the header holds: which object is this segment (a late PUT
    #: can put another at its key once it was removed); None in checkpoints
    #: written before it was kept
    append_id: str | None = None
    #: a batch in a staged data object: where it is, relative to the
    #: partition's directory (its ``size`` is the data object's)
    at: str | None = None
    #: a commit object: the batches it commits, in offset order (each with
    #: ``at``); the commit itself holds no records
    refs: tuple[SegmentSummary, ...] = ()

    @property
    def end(self) -> int:
        return self.base + self.record_count

    @property
    def control(self) -> bool:
        return self.control_type is not None

    def batches(self) -> tuple[SegmentSummary, ...]:
        """The batches this object holds: itself, or a commit's refs."""
        return self.refs or (self,)

    @classmethod
    def of(cls, header: SegmentHeader, size: int) -> SegmentSummary:
        if header.refs is not None:
            return cls(
                base=header.base_offset,
                size=size,
                record_count=header.record_count,
                timestamp_ms=header.timestamp_ms,
                append_id=header.append_id,
                refs=_ref_summaries(header.base_offset, header.refs),
            )
        who = header.identity
        return cls(
            base=header.base_offset,
            size=size,
            record_count=header.record_count,
            timestamp_ms=header.timestamp_ms,
            producer_id=who.producer_id,
            producer_epoch=who.producer_epoch,
            base_sequence=who.base_sequence,
            transactional=who.transactional,
            control_type=who.control_type,
            transactional_id=who.transactional_id,
            txn_bound=who.txn_bound,
            stats=header.stats,
            append_id=header.append_id,
        )


def _ref_summaries(base: int, refs: Iterable[Ref]) -> tuple[SegmentSummary, ...]:
    out = []
    for r in refs:
        who = r.identity
        out.append(
            SegmentSummary(
                base=base,
                size=r.size,
                record_count=r.record_count,
                timestamp_ms=r.timestamp_ms,
                producer_id=who.producer_id,
                producer_epoch=who.producer_epoch,
                base_sequence=who.base_sequence,
                transactional=who.transactional,
                transactional_id=who.transactional_id,
                stats=r.stats,
                append_id=r.append_id,
                at=r.at,
            )
        )
        base += r.record_count
    return tuple(out)


@dataclass(frozen=True, slots=True)
class ProducerEntry:
    """The latest batch of one producer in one partition."""

    producer_id: int
    producer_epoch: int
    base_sequence: int
    record_count: int
    base_offset: int
    timestamp_ms: int

    @property
    def last_sequence(self) -> int:
        return self.base_sequence + self.record_count - 1


@dataclass(frozen=True, slots=True)
class OpenTxn:
    """A transaction with data in the partition and no marker (yet)."""

    producer_id: int
    producer_epoch: int
    transactional_id: str
    first_offset: int


@dataclass
class PartitionState:
    """Producer state and open transactions, advanced segment by segment."""

    producers: dict[int, ProducerEntry] = field(default_factory=dict)
    open_txns: dict[tuple[int, int], OpenTxn] = field(default_factory=dict)
    #: producer id -> a time on the store's clock by which its latest batch
    #: here had been written (an upper bound: its segment's LastModified, or a
    #: later segment's); absent while no one has read one. Producer state
    #: expires by these, never by the append timestamps writers put in
    #: headers (DESIGN, "one clock").
    stored_ms: dict[int, int] = field(default_factory=dict)

    def copy(self) -> PartitionState:
        return PartitionState(dict(self.producers), dict(self.open_txns), dict(self.stored_ms))

    def apply(self, s: SegmentSummary) -> None:
        for batch in s.refs:
            self.apply(batch)
        if s.producer_id < 0:
            return
        key = (s.producer_id, s.producer_epoch)
        if s.control:
            self.open_txns.pop(key, None)
            return
        self.producers[s.producer_id] = ProducerEntry(
            s.producer_id, s.producer_epoch, s.base_sequence, s.record_count, s.base, s.timestamp_ms
        )
        self.stored_ms.pop(s.producer_id, None)  # a new batch, not dated yet
        if s.transactional and key not in self.open_txns:
            self.open_txns[key] = OpenTxn(
                s.producer_id, s.producer_epoch, s.transactional_id or "", s.base
            )

    def forget_decided(self, decide: Callable[[OpenTxn], Decision]) -> None:
        """Drop open transactions the coordinator has decided: they no longer hold
        the LSO back, and a late marker for them is a no-op."""
        for key, txn in list(self.open_txns.items()):
            if decide(txn) is not Decision.UNDECIDED:
                del self.open_txns[key]

    def date_producers(self, stored_ms: Callable[[ProducerEntry], int | None]) -> None:
        """Date the latest batches not dated yet: ``stored_ms(entry)`` is a time
        on the store's clock by which that batch had been written, or None."""
        for pid, entry in self.producers.items():
            if pid not in self.stored_ms and (ms := stored_ms(entry)) is not None:
                self.stored_ms[pid] = ms

    def forget_producers_stored_before(self, cutoff_ms: int) -> None:
        """Producer state expires (Kafka: producer.id.expiration.ms) so that the
        snapshot does not grow with every producer session ever seen: forget
        the producers whose latest batch was written before ``cutoff_ms`` on the
        store's clock. One not dated yet stays (kept longer is harmless:
        forgotten too early, a resend in doubt would be written twice)."""
        for pid, ms in list(self.stored_ms.items()):
            if ms < cutoff_ms:
                del self.stored_ms[pid]
                self.producers.pop(pid, None)


#: the fields of a summary written as columns (a ref's ``at`` and a commit's
#: ``refs`` are written only by windows that hold commits)
_SUMMARY_FIELDS = [f for f in SegmentSummary.__dataclass_fields__ if f not in ("at", "refs")]


@dataclass(frozen=True, kw_only=True)
class Checkpoint:
    """The window ``[start, end)`` and the partition state at ``end``."""

    log_start: int
    start: int
    end: int
    segments: tuple[SegmentSummary, ...]
    state: PartitionState

    @property
    def bases(self) -> tuple[int, ...]:
        return tuple(s.base for s in self.segments)

    def to_json(self) -> bytes:
        producers = self.state.producers
        return _checked_json.dump(
            {
                "v": (
                    REFS_CHECKPOINT_VERSION
                    if any(s.refs for s in self.segments)
                    else CHECKPOINT_VERSION
                ),
                "log_start": self.log_start,
                "start": self.start,
                "end": self.end,
                "segments": summary_columns(self.segments),
                "producers": [list(_entry_row(e)) for e in self.state.producers.values()],
                # beside "producers", not in its rows: readers older than it
                # still read the checkpoint (they ignore fields they do not know)
                "producers_stored_ms": sorted(
                    [pid, ms] for pid, ms in self.state.stored_ms.items() if pid in producers
                ),
                "open_txns": [
                    [t.producer_id, t.producer_epoch, t.transactional_id, t.first_offset]
                    for t in self.state.open_txns.values()
                ],
            }
        )

    @classmethod
    def from_json(cls, raw: bytes | memoryview, *, key: str, start: int) -> Checkpoint:
        """Parse and check a checkpoint read from ``key``, whose name says it
        starts at ``start``.

        Raises:
            CorruptCheckpointError: unreadable, checksum mismatch, or inconsistent.
        """
        fields = _checked_json.load(raw, key=key, error=CorruptCheckpointError)
        try:
            if fields.get("v") not in (CHECKPOINT_VERSION, REFS_CHECKPOINT_VERSION):
                raise ValueError(f"unsupported checkpoint version {fields.get('v')}")
            segments = summaries_of(fields["segments"])
            producers = {row[0]: ProducerEntry(*row) for row in fields["producers"]}
            # written before producer state was dated: dated at the next checkpoint
            stored = {int(pid): int(ms) for pid, ms in fields.get("producers_stored_ms", [])}
            state = PartitionState(
                producers,
                {(r[0], r[1]): OpenTxn(*r) for r in fields["open_txns"]},
                {pid: ms for pid, ms in stored.items() if pid in producers},
            )
            cp = cls(
                log_start=int(fields["log_start"]),
                start=int(fields["start"]),
                end=int(fields["end"]),
                segments=segments,
                state=state,
            )
        except (ValueError, TypeError, KeyError) as e:
            raise CorruptCheckpointError(f"unreadable checkpoint: {e}", key=key) from e
        if cp.start != start or not segments or segments[0].base != start or not chained(segments):
            raise CorruptCheckpointError("checkpoint contradicts its own key or offsets", key=key)
        if segments[-1].end != cp.end:
            raise CorruptCheckpointError("checkpoint window does not end at its end", key=key)
        return cp


def summary_columns(
    segments: Iterable[SegmentSummary], *, stats: bool = True
) -> dict[str, list[Any]]:
    """Segment summaries as JSON columns, one list per field (without their
    column statistics unless ``stats``)."""
    names = [n for n in _SUMMARY_FIELDS if stats or n != "stats"]
    rows = list(segments)
    columns: dict[str, list[Any]] = {name: [getattr(s, name) for s in rows] for name in names}
    if any(s.at is not None for s in rows):
        columns["at"] = [s.at for s in rows]
    if any(s.refs for s in rows):
        columns["refs"] = [summary_columns(s.refs, stats=stats) if s.refs else None for s in rows]
    return columns


def summaries_of(columns: dict[str, list[Any]]) -> tuple[SegmentSummary, ...]:
    """What :func:`summary_columns` wrote (fields kept since some were
    written default to None).

    Raises:
        KeyError, TypeError, ValueError: not such columns.
    """
    count = len(columns["base"])
    for later in ("stats", "append_id"):  # written before these were kept
        columns.setdefault(later, [None] * count)
    rows = zip(*(columns[name] for name in _SUMMARY_FIELDS), strict=True)
    ats = columns.get("at") or [None] * count
    refs = columns.get("refs") or [None] * count
    out = []
    for row, at, held in zip(rows, ats, refs, strict=True):
        fields = dict(zip(_SUMMARY_FIELDS, row, strict=True))
        summary = SegmentSummary(**fields, at=None if at is None else str(at))
        if held is not None:
            summary = replace(summary, refs=summaries_of(held))
            if (
                not summary.refs
                or summary.refs[0].base != summary.base
                or summary.refs[-1].end != summary.end
                or not chained(summary.refs)
            ):
                raise ValueError(f"refs of the commit at {summary.base} do not cover it")
        out.append(summary)
    return tuple(out)


def chained(segments: Sequence[SegmentSummary]) -> bool:
    """Whether each segment starts where the one before it ends."""
    return all(a.end == b.base for a, b in itertools.pairwise(segments))


def _entry_row(e: ProducerEntry) -> tuple[int, ...]:
    return (e.producer_id, e.producer_epoch, e.base_sequence, e.record_count, e.base_offset,
            e.timestamp_ms)  # fmt: skip


def advance(state: PartitionState, summaries: Iterable[SegmentSummary]) -> PartitionState:
    """A copy of ``state`` with ``summaries`` applied in order."""
    out = state.copy()
    for s in summaries:
        out.apply(s)
    return out


__all__ = [
    "Checkpoint",
    "Decision",
    "OpenTxn",
    "PartitionState",
    "ProducerEntry",
    "SegmentSummary",
    "advance",
    "chained",
    "summaries_of",
    "summary_columns",
]
