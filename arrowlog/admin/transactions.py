"""Transactions as an operator sees them: list, describe, abort and expire
them, and find the open ones that hold back a partition's last stable offset
(what KIP-664 gave Kafka operators after users got stuck with hanging
transactions)."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from arrowlog._clock import CLOCK_GRAIN_MS
from arrowlog.errors import OffsetOutOfRangeError, UnknownTopicOrPartitionError
from arrowlog.format.checkpoint import Decision
from arrowlog.format.topic import log_start_key
from arrowlog.partition import PartitionLog
from arrowlog.txn.coordinator import (
    EXPIRE,
    OPERATOR_ABORT,
    TXN_IDS_PREFIX,
    CoordinatorLog,
    TxnEntry,
    TxnState,
    describe,
)
from arrowlog.txn.finish import fence_and_recover
from arrowlog.txn.view import LogView, store_now_ms


@dataclass(frozen=True)
class TransactionInfo:
    transactional_id: str
    producer_id: int
    producer_epoch: int
    state: TxnState
    txn_epoch: int
    partitions: tuple[tuple[str, int], ...]
    groups: tuple[str, ...]
    txn_started_ms: int
    timeout_ms: int

    @classmethod
    def of(cls, e: TxnEntry) -> TransactionInfo:
        return cls(e.transactional_id, e.producer_id, e.producer_epoch, e.state, e.txn_epoch,
                   e.partitions, e.groups, e.txn_started_ms, e.timeout_ms)  # fmt: skip


def transactional_ids(log: LogView) -> list[str]:
    return [info.key[len(TXN_IDS_PREFIX) :] for info in log.store.list(TXN_IDS_PREFIX)]


def _coordinator(log: LogView, transactional_id: str) -> CoordinatorLog:
    return CoordinatorLog(log.store, transactional_id, log.config.retry)


def list_transactions(log: LogView) -> list[TransactionInfo]:
    """The current or last transaction of every transactional id."""
    out = []
    for tid in transactional_ids(log):
        latest = _coordinator(log, tid).latest()
        if latest is not None:
            out.append(TransactionInfo.of(latest))
    return out


def describe_transaction(log: LogView, transactional_id: str) -> dict[str, Any]:
    """The latest coordinator entry of a transactional id, as JSON-friendly data.

    Raises:
        UnknownTopicOrPartitionError: no such transactional id.
    """
    latest = _coordinator(log, transactional_id).latest()
    if latest is None:
        raise UnknownTopicOrPartitionError(f"unknown transactional id {transactional_id!r}")
    return describe(latest)


def abort_transaction(log: LogView, transactional_id: str) -> TransactionInfo:
    """Fence the transactional id's live instance and finish its transaction now,
    whatever its timeout (an ongoing one is aborted; a prepared one is carried
    through). For a hanging transaction that holds back the LSO. The producer
    learns it was aborted by an operator.

    Raises:
        UnknownTopicOrPartitionError: no such transactional id.
    """
    coordinator = _coordinator(log, transactional_id)
    if coordinator.latest() is None:
        raise UnknownTopicOrPartitionError(f"unknown transactional id {transactional_id!r}")
    entry = fence_and_recover(log, coordinator, reason=OPERATOR_ABORT)
    assert entry is not None
    return TransactionInfo.of(entry)


def expire_transactions(
    log: LogView, *, now_ms: int | None = None, topics: list[str] | None = None
) -> list[TransactionInfo]:
    """Abort (or finish) every transaction older than its timeout. Any client may
    run this; the epoch bump fences the late producer, which then gets
    TransactionTimeoutError.

    A transaction's age is measured on the store's clock alone: from the time the
    entry that began it was written to the time of a probe object this call
    writes (and removes). Neither the producer's clock nor this client's counts.
    ``now_ms`` replaces the probe (a time on the store's clock). A transaction
    that ends while this runs is left alone.

    A transaction with records but no coordinator entry yet (it writes its
    first at PREPARE) is found in the partitions of ``topics`` (default: every
    topic), and its age counts from its first record's time on the store: this
    call reads the state of each of those partitions. Aborting it writes a
    COMPLETE_ABORT of its epoch, so its producer's PREPARE fails with
    TransactionTimeoutError.
    """
    unfinished = []
    for tid in transactional_ids(log):
        coordinator = _coordinator(log, tid)
        latest = coordinator.latest()
        if latest is not None and not latest.state.is_complete:
            unfinished.append((coordinator, latest))
    unregistered = [t for t in open_transactions(log, topics) if not t.registered]
    if not unfinished and not unregistered:
        return []
    now = store_now_ms(log) if now_ms is None else now_ms
    done = []
    for t in unregistered:
        if t.started_ms is None or t.timeout_ms is None:
            continue
        if now <= t.started_ms + t.timeout_ms + CLOCK_GRAIN_MS:
            continue
        entry = fence_and_recover(
            log, _coordinator(log, t.transactional_id), reason=EXPIRE,
            unless=_not_running(t.producer_epoch),
        )  # fmt: skip
        if entry is not None:
            done.append(TransactionInfo.of(entry))
    for coordinator, latest in unfinished:
        if not coordinator.expired(latest, now):
            continue
        entry = fence_and_recover(
            log, coordinator, reason=EXPIRE, unless=_not_expired(coordinator, now)
        )
        if entry is not None:
            done.append(TransactionInfo.of(entry))
    return done


def _not_running(txn_epoch: int) -> Callable[[TxnEntry], bool]:
    """Whether the transaction of ``txn_epoch`` that had no entry got one since
    (it prepared: no longer ours to expire), or the log moved past its epoch."""
    return lambda entry: not (entry.state.is_complete and entry.producer_epoch == txn_epoch)


def _not_expired(coordinator: CoordinatorLog, now_ms: int) -> Callable[[TxnEntry], bool]:
    return lambda entry: not coordinator.expired(entry, now_ms)


@dataclass(frozen=True)
class OpenTransaction:
    """A transaction with records in a partition and no decision yet: it holds
    the partition's LSO at ``first_offset``."""

    topic: str
    partition: int
    transactional_id: str
    producer_id: int
    producer_epoch: int
    first_offset: int
    #: when the transaction began, on the store's clock (None if unknown): its
    #: first entry's time, or for one with no entry yet (it writes its first at
    #: PREPARE) the time of its first record here
    started_ms: int | None
    timeout_ms: int | None
    #: False while the coordinator log has no entry of the transaction
    registered: bool = True


def open_transactions(log: LogView, topics: list[str] | None = None) -> list[OpenTransaction]:
    """Every undecided transaction holding back the LSO of a partition of
    ``topics`` (default: every topic). Reads only."""
    decide = log.resolver.snapshot()
    found = []
    for topic in topics if topics is not None else log.list_topics():
        for p in range(log.topic(topic).partitions):
            part = log.partition(topic, p)
            _, state = part.state()
            for txn in state.open_txns.values():
                if decide(txn) is not Decision.UNDECIDED:
                    continue
                coordinator = _coordinator(log, txn.transactional_id)
                latest = coordinator.latest()
                registered = latest is not None and latest.txn_epoch == txn.producer_epoch
                if registered:
                    assert latest is not None
                    started = coordinator.started_ms(latest)
                else:
                    started = _first_record_ms(log, part, txn.first_offset)
                found.append(
                    OpenTransaction(
                        topic, p, txn.transactional_id, txn.producer_id, txn.producer_epoch,
                        txn.first_offset, started,
                        None if latest is None else latest.timeout_ms, registered,
                    )
                )  # fmt: skip
    return sorted(found, key=lambda t: (t.topic, t.partition, t.first_offset))


def _first_record_ms(log: LogView, part: PartitionLog, offset: int) -> int | None:
    """The store's time for the segment holding ``offset`` (None if unknown).
    Below the log start (deleted, or its segment removed), the time of the
    first segment still there: written after the transaction's first record,
    so the transaction expires no sooner than it should, but it does expire
    (a deleted first record must not keep it, and the LSO, open forever)."""
    start = part.start_offset(refresh=True)
    for at in dict.fromkeys((offset, max(offset, start))):
        try:
            # the object at the offset's key: a staged batch's own object may
            # have been uploaded long before its commit put it there
            return _modified_ms(log, part.segment_key(part.objects(at, at + 1)[0].base))
        except (OffsetOutOfRangeError, FileNotFoundError, IndexError):  # removed since
            continue
    if start <= offset:
        return None
    # every record deleted: the log start's own object was written after it
    try:
        return _modified_ms(log, log_start_key(part.topic.prefix, part.partition, start))
    except FileNotFoundError:
        return None


def _modified_ms(log: LogView, key: str) -> int | None:
    return log.config.retry.call(lambda: log.store.head(key)).modified_ms
