"""One transaction written by many processes: a distributed job (a Spark write).

The driver begins the transaction (:func:`begin_if_idle`, or a transactional id
of a bounded pool, :func:`begin_pooled`); each worker joins the partitions it is
about to write to (:func:`join_partitions`) and appends as a *member* producer
with the transaction's epoch; the driver resumes the transaction and commits it
naming the members (:meth:`Producer.resume_transaction`). Only partitions some
worker wrote to are registered, so only they get a marker.

Beginning never fences: a transactional id whose transaction is still running
is left alone (its job may be alive). Only an id whose transaction ran past its
timeout, on the store's clock, is finished first, exactly as expiry would.
"""

from __future__ import annotations

import itertools
import time
from collections.abc import Iterable
from dataclasses import replace

from arrowlog.errors import ProducerFencedError, UnknownTopicOrPartitionError
from arrowlog.txn.coordinator import EXPIRE, CoordinatorLog, EntryConflictError, TxnEntry, TxnState
from arrowlog.txn.finish import back_off, fence_and_recover
from arrowlog.txn.producer_ids import allocate_producer_id
from arrowlog.txn.view import LogView, store_now_ms


def begin_if_idle(
    log: LogView, transactional_id: str, *, timeout_ms: int, recover_expired: bool = True
) -> TxnEntry | None:
    """Begin a transaction (an ONGOING entry with no partitions yet, a fresh
    epoch) on ``transactional_id`` if no transaction of it is running; None if
    one is (and has not expired), or another client began one first.

    The ONGOING entry bumps the producer epoch: the epoch it grants was written
    by this call, so the caller may hold it (only hold what you wrote), and any
    instance that held the previous epoch is fenced.
    """
    coordinator = CoordinatorLog(log.store, transactional_id, log.config.retry)
    latest = coordinator.latest()
    if latest is None:
        latest = _create(log, coordinator)
        if latest is None:
            return None
    if not latest.state.is_complete:
        if not recover_expired:
            return None
        now = store_now_ms(log)
        if not coordinator.expired(latest, now):
            return None
        latest = fence_and_recover(
            log, coordinator, reason=EXPIRE, unless=lambda e: not coordinator.expired(e, now)
        )
        if latest is None:  # it finished meanwhile: someone else's to reuse first
            return None
    return begin_after(coordinator, latest, timeout_ms=timeout_ms)


def begin_after(
    coordinator: CoordinatorLog, latest: TxnEntry, *, timeout_ms: int
) -> TxnEntry | None:
    """Begin a transaction with the entry right after ``latest`` (which must be
    complete): None if any client wrote after ``latest`` first. A caller that
    decided to begin from what ``latest`` says (its own fence, a version not yet
    committed) begins only if nothing changed since."""
    epoch = latest.producer_epoch + 1
    begun = replace(
        latest,
        n=latest.n + 1,
        state=TxnState.ONGOING,
        producer_epoch=epoch,
        txn_epoch=epoch,
        partitions=(),
        incarnations={},
        offsets={},
        members=(),
        bounds={},
        timeout_ms=timeout_ms,
        txn_started_ms=int(time.time() * 1000),
        txn_begin_n=latest.n + 1,
        reason="begin",
    )
    try:
        return coordinator.write(latest, begun)
    except EntryConflictError:
        return None


def _create(log: LogView, coordinator: CoordinatorLog) -> TxnEntry | None:
    first = TxnEntry(
        n=0,
        transactional_id=coordinator.transactional_id,
        producer_id=allocate_producer_id(log, coordinator.transactional_id),
        producer_epoch=0,
        state=TxnState.EMPTY,
        reason="init",
    )
    try:
        return coordinator.write(None, first)
    except EntryConflictError as e:
        return e.latest if e.latest is not None and e.latest.state.is_complete else None


def begin_pooled(log: LogView, prefix: str, *, timeout_ms: int) -> TxnEntry:
    """Begin a transaction on the first idle transactional id of the pool
    ``<prefix>.0``, ``<prefix>.1``, ...: jobs that need no stable identity share
    as many ids as ever ran at once, instead of leaving one behind each.

    A running transaction's id is skipped, not fenced; an expired one is finished
    and reused. Ids are tried in order, so the pool stays as small as the
    busiest moment made it.
    """
    for k in itertools.count():
        entry = begin_if_idle(log, f"{prefix}.{k}", timeout_ms=timeout_ms)
        if entry is not None:
            return entry
    raise AssertionError("unreachable")  # pragma: no cover


def join_partitions(
    log: LogView, transactional_id: str, txn_epoch: int, partitions: Iterable[tuple[str, int]]
) -> None:
    """Register ``partitions`` with the running transaction ``txn_epoch`` of
    ``transactional_id``, before a member writes there (recovery must know every
    partition to put a marker in). Members race each other: a lost entry is
    re-read and the union written again.

    Raises:
        ProducerFencedError: the transaction is no longer running (committed,
            aborted, expired, or a newer instance began): write nothing.
        UnknownTopicOrPartitionError: a topic is unknown, or was deleted and
            created anew since the transaction registered it.
        ConcurrentTransactionsError: the coordinator log kept changing.
    """
    wanted = set(partitions)
    # the incarnation of each topic the member writes to: the markers must go there
    incarnations = {t: log.partition(t, p).opened_topic().incarnation for t, p in wanted}
    coordinator = CoordinatorLog(log.store, transactional_id, log.config.retry)
    sleeps = log.config.retry.sleeps()
    while True:
        latest = coordinator.latest()
        if (
            latest is None
            or latest.state is not TxnState.ONGOING
            or latest.txn_epoch != txn_epoch
            or latest.producer_epoch != txn_epoch
        ):
            raise ProducerFencedError(
                f"{transactional_id!r}: the transaction of epoch {txn_epoch} is no longer "
                "running (its job was aborted, expired or superseded)"
            )
        if any(latest.incarnations.get(t, k) != k for t, k in incarnations.items()):
            raise UnknownTopicOrPartitionError(
                f"{transactional_id!r}: a topic of the transaction was deleted and created "
                "anew since it began; abort the job"
            )
        if wanted <= set(latest.partitions) and incarnations.keys() <= latest.incarnations.keys():
            return
        joined = tuple(sorted(wanted | set(latest.partitions)))
        changed = replace(
            latest,
            n=latest.n + 1,
            partitions=joined,
            incarnations={**latest.incarnations, **incarnations},
            reason="add",
        )
        try:
            coordinator.write(latest, changed)
            return
        except EntryConflictError:
            back_off(sleeps, transactional_id)
