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
from functools import partial

from arrowlog.errors import ConcurrentTransactionsError, UnknownTopicOrPartitionError
from arrowlog.format.control import ControlType
from arrowlog.format.segment import WriterIdentity
from arrowlog.txn.coordinator import (
    EXPIRE,
    OPERATOR_ABORT,
    CoordinatorLog,
    EntryConflictError,
    TxnEntry,
    TxnState,
)
from arrowlog.txn.groups import GroupOffsets, tp_key
from arrowlog.txn.producer_ids import allocate_producer_id
from arrowlog.txn.view import LogView


def fence_and_recover(
    log: LogView,
    coordinator: CoordinatorLog,
    *,
    reason: str,
    unless: Callable[[TxnEntry], bool] | None = None,
    timeout_ms: int | None = None,
) -> TxnEntry | None:
    """Bump the producer epoch of a transactional id, fencing every instance
    that holds an older one, and finish the transaction it left: roll forward
    after PREPARE_COMMIT, roll back otherwise. Returns the entry this call wrote
    last, whose epoch the caller may hold.

    ``unless`` is checked against the latest entry before every attempt: if it
    holds, nothing is written and None is returned (an expirer that finds the
    transaction finished, after losing a race to its producer, leaves it alone).

    The entry returned grants its epoch to the caller's next transaction, which
    may send before writing any entry; ``timeout_ms`` (the caller's transaction
    timeout) goes into it, so that an expirer can time that transaction.

    An expirer or an operator that finds the latest entry complete aborts the
    transaction that may be running under the epoch it grants: the fence is a
    COMPLETE_ABORT of that epoch, so that its producer learns why."""
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
                        timeout_ms=60_000 if timeout_ms is None else timeout_ms,
                    ),
                )
            fenced = replace(latest, n=latest.n + 1, producer_epoch=latest.producer_epoch + 1,
                             reason=reason)  # fmt: skip
            if latest.state is TxnState.ONGOING:
                fenced = replace(fenced, state=TxnState.PREPARE_ABORT)
            elif latest.state.is_complete and reason in (EXPIRE, OPERATOR_ABORT):
                fenced = replace(
                    fenced, state=TxnState.COMPLETE_ABORT, txn_epoch=latest.producer_epoch,
                    partitions=(), offsets={}, bounds={}, members=(), incarnations={},
                    txn_begin_n=-1,
                )  # fmt: skip
            if fenced.state.is_complete and timeout_ms is not None:
                fenced = replace(fenced, timeout_ms=timeout_ms)
            entry = coordinator.write(latest, fenced)
            if not entry.state.is_complete:
                complete = finish(log, coordinator, entry, reason=reason, timeout_ms=timeout_ms)
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
    log: LogView,
    coordinator: CoordinatorLog,
    prepared: TxnEntry,
    *,
    reason: str,
    timeout_ms: int | None = None,
    write_id: str | None = None,
) -> TxnEntry | None:
    """Carry a prepared transaction to its end: markers into every partition in
    parallel (and, for a commit, the consumer offsets), then the COMPLETE entry.
    The outcome was fixed at PREPARE (readers decide from the coordinator log
    where a marker is missing); COMPLETE comes last so that it says the markers
    and offsets are in place, and recovery after it has nothing to redo.

    Safe to run twice (by a zombie and its successor, or the same client after
    a failure, passing the same ``write_id``): markers are idempotent for
    readers, offsets are applied once per transaction, and only one COMPLETE
    entry can be written. Returns the COMPLETE entry this call (or an earlier
    one with ``write_id``) wrote, or None if another client wrote the next entry
    first (the outcome stands either way; the epoch that entry grants belongs to
    its writer). ``timeout_ms`` goes into the COMPLETE entry, which grants its
    epoch to the caller's next transaction.

    Raises:
        ArrowLogError: a marker or an offset could not be written (retriable
            errors included); no COMPLETE entry was written.
    """
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

    complete = replace(
        prepared,
        n=prepared.n + 1,
        state=TxnState.COMPLETE_COMMIT if commit else TxnState.COMPLETE_ABORT,
        producer_epoch=next_epoch(prepared),
        reason=reason,
        timeout_ms=prepared.timeout_ms if timeout_ms is None else timeout_ms,
    )

    def write_complete() -> TxnEntry | None:
        try:
            return coordinator.write(prepared, complete, write_id=write_id)
        except EntryConflictError:
            return None

    jobs: list[Callable[[], None]] = [partial(write_marker, t, p) for t, p in prepared.partitions]
    jobs += [partial(apply_offsets, g, o) for g, o in prepared.offsets.items()]
    run_all(jobs)
    return write_complete()


def run_all(jobs: list[Callable[[], None]]) -> None:
    """Run ``jobs`` in parallel threads (one after another if there is one, or
    if the interpreter is exiting: a producer's background end of a commit may
    run then, and a thread pool takes no work once exit has begun)."""
    if len(jobs) > 1:
        with ThreadPoolExecutor(max_workers=min(16, len(jobs))) as pool:
            try:
                futures = [pool.submit(job) for job in jobs]
            except RuntimeError:  # "cannot schedule new futures after interpreter shutdown"
                futures = []
            if len(futures) == len(jobs):
                for future in futures:
                    future.result()
                return
            for future in futures:
                future.result()
            jobs = jobs[len(futures) :]
    for job in jobs:
        job()


def next_epoch(prepared: TxnEntry) -> int:
    """The producer epoch the COMPLETE entry after ``prepared`` grants."""
    return max(prepared.producer_epoch, prepared.txn_epoch) + 1
