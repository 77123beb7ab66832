"""Cleaning up the bookkeeping a log leaves behind: claims of producer ids no
one uses any more, coordinator and group entries below the newest, expired
transactional ids, staged files of the streaming sink, old checkpoints. Each
goes once it has been idle for longer than the vacuum's ``retain_ms`` (Kafka's
``transactional.id.expiration.ms`` and ``offsets.retention.minutes`` play this
part there, both 7 days). See docs/protocol.md, "Cleaning up".
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from typing import TYPE_CHECKING

from arrowlog._clock import CLOCK_GRAIN_MS
from arrowlog.format.topic import parse_segment_key, segment_prefix
from arrowlog.partition.checkpoints import PRODUCER_STATE_RETENTION_MS
from arrowlog.partition.retention import Removal
from arrowlog.storage import ObjectInfo
from arrowlog.txn.coordinator import (
    COORDINATOR_PREFIX,
    EXPIRE_ID,
    PRODUCER_IDS_PREFIX,
    CoordinatorLog,
    EntryConflictError,
    entry_key,
)
from arrowlog.txn.entrylog import parse_entry_name, parse_start_name, start_name
from arrowlog.txn.groups import GROUPS_PREFIX, GroupOffsets

if TYPE_CHECKING:
    from arrowlog.partition import PartitionLog
    from arrowlog.txn.view import LogView

#: where the streaming sink's tasks stage their rows (arrowlog.spark.streaming)
STAGING_PREFIX = "_arrowlog/staging/"


@dataclass
class InUse:
    """What the partitions and groups still refer to, gathered by a vacuum of
    every topic: bookkeeping they refer to stays, whatever its age."""

    #: producer ids in some partition's producer state (their latest batches)
    producer_ids: set[int] = field(default_factory=set)
    #: transactional id -> the lowest transaction epoch some reader may still
    #: ask the coordinator about: of its batches in segments still stored, its
    #: open transactions, its pending offsets in a group
    _epochs: dict[str, int] = field(default_factory=dict)
    #: the scans of stored segments, run only if some entry may go (:meth:`epoch`)
    _scans: list[Callable[[], None]] = field(default_factory=list)

    def note_epoch(self, transactional_id: str, epoch: int) -> None:
        self._epochs[transactional_id] = min(epoch, self._epochs.get(transactional_id, epoch))

    def epoch(self, transactional_id: str) -> int | None:
        """The lowest epoch of ``transactional_id`` still referred to (None:
        none). The first call scans the partitions' stored segments."""
        while self._scans:
            self._scans.pop()()
        return self._epochs.get(transactional_id)

    def note_partition(self, log: LogView, part: PartitionLog, now_ms: int) -> None:
        """One LIST (the lowest segment still stored) and the summaries from
        there: with compaction, only the tail not compacted yet. Producers
        idle for PRODUCER_STATE_RETENTION_MS on the store's clock count as
        gone: the next checkpoint forgets them. One whose latest batch is not
        dated (no listing showed its segment) is in use."""
        _, state = part.state()
        recent = now_ms - PRODUCER_STATE_RETENTION_MS - CLOCK_GRAIN_MS
        self.producer_ids.update(
            pid for pid in state.producers if state.stored_ms.get(pid, recent) >= recent
        )
        for txn in state.open_txns.values():
            self.note_epoch(txn.transactional_id, txn.producer_epoch)

        def scan() -> None:
            prefix = segment_prefix(part.topic.prefix, part.partition)
            listed = log.config.retry.call(lambda: list(log.store.list(prefix, limit=1)))
            base = parse_segment_key(listed[0].key) if listed else None
            if base is None:
                return
            for s in part.summaries(max(base, part.start_offset()), part.end_offset()):
                if s.transactional and not s.control and s.transactional_id:
                    self.note_epoch(s.transactional_id, s.producer_epoch)

        self._scans.append(scan)


def clean_up(
    log: LogView, now_ms: int, retain_ms: int, in_use: InUse, *, dry_run: bool
) -> list[Removal]:
    """Remove the bookkeeping idle for longer than ``retain_ms`` (on the store's
    clock, ``now_ms``) that nothing in ``in_use`` (every partition) refers to:
    see docs/protocol.md, "Cleaning up". Returns what it removed (or would)."""
    old = now_ms - retain_ms - CLOCK_GRAIN_MS
    removed = _group_logs(log, old, in_use, dry_run=dry_run)
    coordinators, named = _coordinator_logs(log, old, in_use, dry_run=dry_run)
    removed += coordinators
    removed += _producer_ids(log, old, in_use.producer_ids | named, dry_run=dry_run)
    removed += _staging(log, old, dry_run=dry_run)
    return removed


def _older(info: ObjectInfo | None, old: int) -> bool:
    return info is not None and info.modified_ms is not None and info.modified_ms <= old


@dataclass
class _EntryLog:
    """One coordinator or group log as listed: its entries and the start
    objects cleanup put (:mod:`arrowlog.txn.entrylog`), by number."""

    prefix: str
    entries: dict[int, ObjectInfo] = field(default_factory=dict)
    starts: dict[int, ObjectInfo] = field(default_factory=dict)

    @property
    def start(self) -> int:
        return max(self.starts, default=0)

    def superseded(self, old: int) -> list[int]:
        """From the log's first entry up, each entry whose successor was
        written before ``old`` (the newest always stays: it is the claim on
        the log's next entry)."""
        kept = sorted(n for n in self.entries if n >= self.start)
        out = []
        for n in range(kept[0], kept[-1]) if kept else ():
            if not _older(self.entries.get(n + 1), old):
                break
            out.append(n)
        return out


def _entry_logs(log: LogView, prefix: str) -> dict[str, _EntryLog]:
    """Every entry log under ``prefix`` (coordinator or group logs), by id."""
    logs: dict[str, _EntryLog] = {}
    for info in log.config.retry.call(lambda: list(log.store.list(prefix))):
        name, _, rest = info.key[len(prefix) :].partition("/")
        found = logs.setdefault(name, _EntryLog(f"{prefix}{name}/"))
        if (n := parse_entry_name(rest)) is not None:
            found.entries[n] = info
        elif (n := parse_start_name(rest)) is not None:
            found.starts[n] = info
    return {name: found for name, found in logs.items() if found.entries}


def _prune(log: LogView, logged: _EntryLog, cut: int, why: str, *, dry_run: bool) -> list[Removal]:
    """Move the start of ``logged`` to entry ``cut`` (a start object first,
    so that any write landing below it from then on is known for a stray),
    then remove the entries below it, strays included, and the start objects
    it supersedes (docs/protocol.md, "Cleaning up")."""
    start = logged.start
    if cut > start and not dry_run:
        key = logged.prefix + start_name(cut)
        with contextlib.suppress(FileExistsError):
            log.config.retry.call(lambda: log.store.put_if_absent(key, b""))
    cut = max(cut, start)
    removals = [
        Removal(info.key, why if n >= start else "a stray entry, below the log's start")
        for n, info in sorted(logged.entries.items())
        if n < cut
    ]
    removals += [
        Removal(info.key, f"start object superseded by entry {cut}")
        for n, info in sorted(logged.starts.items())
        if n < cut
    ]
    return remove(log, removals, dry_run=dry_run)


def remove(log: LogView, removals: list[Removal], *, dry_run: bool) -> list[Removal]:
    """Remove ``removals`` (unless ``dry_run``), and return them."""
    if not dry_run:
        for removal in removals:  # in order: a killed run leaves a prefix removed
            with contextlib.suppress(FileNotFoundError):
                log.config.retry.call(lambda r=removal: log.store.delete(r.key))  # type: ignore[misc]
    return removals


def _group_logs(log: LogView, old: int, in_use: InUse, *, dry_run: bool) -> list[Removal]:
    """Group entries below the newest whose successor is older than the horizon
    (every entry holds the group's whole position: the newest is the group);
    notes the transactions each group still has pending offsets of."""
    removed = []
    for group, logged in sorted(_entry_logs(log, GROUPS_PREFIX).items()):
        state = GroupOffsets(log.store, group, log.config.retry).latest()
        for tid, epoch in state.pending.items():
            if state.applied.get(tid, -1) < epoch:  # a reader asks how it ended
                in_use.note_epoch(tid, epoch)
        superseded = logged.superseded(old)
        cut = superseded[-1] + 1 if superseded else logged.start
        why = f"group {group!r}: entry superseded by the next more than retain_ms ago"
        removed += _prune(log, logged, cut, why, dry_run=dry_run)
    return removed


def _coordinator_logs(
    log: LogView, old: int, in_use: InUse, *, dry_run: bool
) -> tuple[list[Removal], set[int]]:
    """Coordinator entries no reader can need any more, and expired ids; returns
    them and the producer ids the remaining transactional ids hold.

    An entry goes once the next one is older than the horizon and its
    transaction is neither the current one (unless that is complete) nor one
    with records still stored or offsets pending (``in_use``): nobody asks
    about its epoch again. An id idle past the horizon whose records are all
    gone expires: a fencing entry (reason ``expire-id``) takes the place its
    last producer would write next."""
    removed: list[Removal] = []
    named: set[int] = set()
    for tid, logged in sorted(_entry_logs(log, COORDINATOR_PREFIX).items()):
        coordinator = CoordinatorLog(log.store, tid, log.config.retry)
        latest = coordinator.latest()
        if latest is None:
            continue
        superseded = logged.superseded(old)
        latest_info = logged.entries.get(latest.n)
        idle = (
            latest.reason != EXPIRE_ID
            and latest.state.is_complete
            and latest_info is not None
            and _older(latest_info, old)
        )
        needed = in_use.epoch(tid) if idle or superseded else None
        if idle and needed is None:
            tomb = replace(
                latest,
                n=latest.n + 1,
                producer_epoch=latest.producer_epoch + 1,
                reason=EXPIRE_ID,
                write_id="",
            )
            why = f"transactional id {tid!r} idle more than retain_ms: expired (fenced)"
            if not dry_run:
                try:
                    latest = coordinator.write(latest, tomb)
                except EntryConflictError:
                    named.add(latest.producer_id)
                    continue  # written meanwhile: not idle
            removed.append(Removal(entry_key(tid, tomb.n), why + "; this entry stays"))
        # an expired id keeps its producer id: a new instance goes on with it
        named.add(latest.producer_id)
        cut = superseded[-1] + 1 if superseded else logged.start
        # Readers still ask about the current transaction if it is running,
        # and about the epochs ``in_use`` names: the entry that answers for
        # such an epoch (the last one at or below it: an epoch with no entry
        # of its own is answered by the one before) stays, and all above it
        protected = [] if needed is None else [needed]
        if not latest.state.is_complete:
            protected.append(latest.txn_epoch)
        if protected and superseded:
            found, _ = coordinator.last_at_or_below(latest, min(protected))
            cut = min(cut, superseded[0] if found is None else found.n)
        why = f"transactional id {tid!r}: entry of a transaction no stored record or group needs"
        removed += _prune(log, logged, cut, why, dry_run=dry_run)
    return removed, named


def _producer_ids(log: LogView, old: int, keep: set[int], *, dry_run: bool) -> list[Removal]:
    """Claims of producer ids older than the horizon that no partition's
    producer state and no transactional id holds. A claim only keeps two
    producers from drawing the same random id while both are in use; a
    producer absent from every partition's state for that long is forgotten
    there (Kafka's producer id expiration) and its id is free again."""
    removals = []
    for info in log.config.retry.call(lambda: list(log.store.list(PRODUCER_IDS_PREFIX))):
        name = info.key[len(PRODUCER_IDS_PREFIX) :]
        if name.isdigit() and int(name) not in keep and _older(info, old):
            why = "producer id claimed more than retain_ms ago, in no producer state"
            removals.append(Removal(info.key, why))
    return remove(log, removals, dry_run=dry_run)


def _staging(log: LogView, old: int, *, dry_run: bool) -> list[Removal]:
    """Files a streaming sink's task staged more than the horizon ago: the
    micro-batch they were for committed, or failed and was replayed (which
    stages anew), long since; the sink sweeps its own after every commit."""
    why = "staged by a streaming task more than retain_ms ago"
    removals = [Removal(key, why) for key in older_under(log, STAGING_PREFIX, old)]
    return remove(log, removals, dry_run=dry_run)


def older_under(log: LogView, prefix: str, old: int) -> list[str]:
    """The keys under ``prefix`` of objects written at or before ``old`` (ms,
    on the store's clock)."""
    infos = log.config.retry.call(lambda: list(log.store.list(prefix)))
    return [info.key for info in infos if _older(info, old)]
