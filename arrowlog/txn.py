"""Ending transactions: finishing a prepared one (markers into every partition,
consumer offsets, the COMPLETE entry), and fencing a transactional id to finish
whatever its previous instance left. Used by the producer (its own commit or
abort, and ``init_transactions``) and by the admin (abort, expire).
"""

from __future__ import annotations

import contextlib
import time
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from dataclasses import replace

from arrowlog._logview import LogView
from arrowlog.control import ControlType
from arrowlog.coordinator import CoordinatorLog, EntryConflictError, TxnEntry, TxnState
from arrowlog.errors import ConcurrentTransactionsError, UnknownTopicOrPartitionError
from arrowlog.groups import GroupOffsets, tp_key
from arrowlog.producer_ids import allocate_producer_id
from arrowlog.segment import WriterIdentity


def fence_and_recover(
    log: LogView,
    coordinator: CoordinatorLog,
    *,
    reason: str,
    unless: Callable[[TxnEntry], bool] | None = None,
) -> TxnEntry | None:
    """Bump the producer epoch of a transactional id, fencing every instance
    that holds an older one, and finish the transaction it left: roll forward
    after PREPARE_COMMIT, roll back otherwise. Returns the entry this call wrote
    last, whose epoch the caller may hold.

    ``unless`` is checked against the latest entry before every attempt: if it
    holds, nothing is written and None is returned (an expirer that finds the
    transaction finished, after losing a race to its producer, leaves it alone)."""
    sleeps = log.config.retry.sleeps()
    while True:
        latest = coordinator.latest()
        if unless is not None and latest is not None and unless(latest):
            return None
        try:
            if latest is None:
                pid = allocate_producer_id(log, coordinator.transactional_id)
                return coordinator.write(
                    None,
                    TxnEntry(
                        n=0,
                        transactional_id=coordinator.transactional_id,
                        producer_id=pid,
                        producer_epoch=0,
                        state=TxnState.EMPTY,
                        reason=reason,
                    ),
                )
            fenced = replace(latest, n=latest.n + 1, producer_epoch=latest.producer_epoch + 1,
                             reason=reason)  # fmt: skip
            if latest.state is TxnState.ONGOING:
                fenced = replace(fenced, state=TxnState.PREPARE_ABORT)
            entry = coordinator.write(latest, fenced)
            if not entry.state.is_complete:
                complete = finish(log, coordinator, entry, reason=reason)
                if complete is None:
                    # Another client wrote after our entry: its epoch is not ours
                    # to hold. Fence again, from what is there now.
                    raise EntryConflictError(None)
                entry = complete
            return entry
        except EntryConflictError:
            back_off(sleeps, coordinator.transactional_id)


def back_off(sleeps: Iterator[float], transactional_id: str) -> None:
    """After losing a coordinator entry: sleep before re-reading, or give up
    once the retry policy's deadline is near.

    Raises:
        ConcurrentTransactionsError: the deadline passed.
    """
    pause = next(sleeps, None)
    if pause is None:
        raise ConcurrentTransactionsError(
            f"{transactional_id}: the coordinator log kept changing"
        ) from None
    time.sleep(pause)


def finish(
    log: LogView, coordinator: CoordinatorLog, prepared: TxnEntry, *, reason: str
) -> TxnEntry | None:
    """Carry a prepared transaction to its end: markers into every partition in
    parallel (and, for a commit, the consumer offsets), then the COMPLETE entry.
    Safe to run twice (by a zombie and its successor): markers are idempotent for
    readers, offsets are applied once per transaction, and only one COMPLETE entry
    can be written. Returns the COMPLETE entry this call wrote, or None if another
    client wrote the next entry first (the outcome stands either way; the epoch
    that entry grants belongs to its writer)."""
    commit = prepared.state is TxnState.PREPARE_COMMIT
    kind = ControlType.COMMIT if commit else ControlType.ABORT
    who = WriterIdentity(
        producer_id=prepared.producer_id,
        producer_epoch=prepared.txn_epoch,
        transactional=True,
        transactional_id=prepared.transactional_id,
    )

    def write_marker(topic: str, partition: int) -> None:
        bound = prepared.bounds.get(tp_key(topic, partition), -1)
        # A deleted topic's records went with it, and the transaction must
        # still end: no marker there (Kafka drops deleted partitions' markers
        # too), nor in a topic created anew under the name since.
        with contextlib.suppress(UnknownTopicOrPartitionError):
            part = log.partition(topic, partition)
            if part.opened_topic().incarnation == prepared.incarnations.get(topic, 0):
                part.append_control(kind, who, prepared.n, bound=bound)

    def apply_offsets(group: str, offsets: dict[str, int]) -> None:
        groups = GroupOffsets(log.store, group, log.config.retry, resolver=log.resolver)
        if commit:
            groups.commit(
                offsets, transactional_id=prepared.transactional_id, txn_epoch=prepared.txn_epoch
            )
        else:
            groups.settle(prepared.transactional_id, prepared.txn_epoch)

    jobs = len(prepared.partitions) + len(prepared.offsets)
    if jobs:
        with ThreadPoolExecutor(max_workers=min(16, jobs)) as pool:
            futures = [pool.submit(write_marker, t, p) for t, p in prepared.partitions]
            futures += [pool.submit(apply_offsets, g, o) for g, o in prepared.offsets.items()]
            for future in futures:
                future.result()
    complete = replace(
        prepared,
        n=prepared.n + 1,
        state=TxnState.COMPLETE_COMMIT if commit else TxnState.COMPLETE_ABORT,
        producer_epoch=max(prepared.producer_epoch, prepared.txn_epoch) + 1,
        reason=reason,
    )
    try:
        return coordinator.write(prepared, complete)
    except EntryConflictError:
        return None
