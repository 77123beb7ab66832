"""A transactional producer's hold on its id's coordinator log.

The latest entry this instance knows is what grants it its epoch (only hold
what you wrote), so one object keeps that entry and is the only one to write
the next: it recognises its own attempts whose outcome was unknown when they
land later, and reacts to an entry another client wrote in its place by
fencing the producer with the reason that entry gives. After PREPARE it
finishes the transaction (markers, offsets, COMPLETE) in the background and
takes the COMPLETE entry as its latest once that is written.
"""

from __future__ import annotations

import contextlib
import os
import uuid
from collections.abc import Callable
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass, replace

from arrowlog.errors import ArrowLogError, ProducerFencedError, TransactionTimeoutError
from arrowlog.producer._state import Lifecycle, ProducerState
from arrowlog.txn.coordinator import (
    EXPIRE,
    EXPIRE_ID,
    OPERATOR_ABORT,
    CoordinatorLog,
    EntryConflictError,
    TxnEntry,
)
from arrowlog.txn.finish import fence_and_recover, finish, next_epoch
from arrowlog.txn.view import LogView


@dataclass(frozen=True, slots=True)
class _Unfinished:
    """A transaction past PREPARE whose COMPLETE entry is not known written."""

    prepared: TxnEntry
    reason: str
    timeout_ms: int
    #: the COMPLETE entry's write id: a retry recognises an earlier attempt
    write_id: str
    #: the background finishing, or None to finish again in the caller
    future: Future[TxnEntry | None] | None


class CoordinatorSession:
    """The latest coordinator entry this instance holds, the writes it made
    whose outcome is unknown, and the last transaction still finishing.

    Made and used by the :class:`~arrowlog.producer._transactions.TransactionManager`,
    under the producer's lock.
    """

    def __init__(self, log: LogView, transactional_id: str, lifecycle: Lifecycle) -> None:
        self._log = log
        self._coordinator = CoordinatorLog(log.store, transactional_id, log.config.retry)
        self._lifecycle = lifecycle
        self._entry: TxnEntry | None = None  # the latest coordinator entry we know
        # (entry number, write id) of every attempt at the next coordinator entry
        # whose outcome could not be told: any that lands later is ours (each
        # retry is a new attempt, and the first may land after the last)
        self._doubtful_writes: set[tuple[int, str]] = set()
        # the last transaction, past PREPARE, until its COMPLETE is known written
        self._unfinished: _Unfinished | None = None
        self._finisher: ThreadPoolExecutor | None = None  # finishes it in the background
        self._finisher_pid = 0  # the process that made it

    @property
    def transactional_id(self) -> str:
        return self._coordinator.transactional_id

    @property
    def entry(self) -> TxnEntry | None:
        """The latest entry this instance knows (None before it took the id)."""
        return self._entry

    def fence_and_recover(self, timeout_ms: int) -> TxnEntry:
        """Take the id: write the entry that bumps its epoch, after finishing
        whatever the previous instance left; hold that entry."""
        entry = fence_and_recover(
            self._log, self._coordinator, reason="init", timeout_ms=timeout_ms
        )
        assert entry is not None
        self._entry = entry
        return entry

    def latest(self) -> TxnEntry | None:
        """The log's latest entry, as it is now (not yet held)."""
        return self._coordinator.latest()

    def hold(self, entry: TxnEntry) -> None:
        """Hold ``entry``, read from the log, as the one that grants our epoch."""
        self._entry = entry

    def write(self, build: Callable[[TxnEntry], TxnEntry]) -> TxnEntry:
        """Write ``build(latest)`` as the next entry and hold it.

        Raises:
            ArrowLogError: the write failed; if retriable, it may still land,
                and is recognised as ours if it does.
            ProducerFencedError, TransactionTimeoutError: another client wrote
                the next entry (the producer is fenced).
        """
        self.settle()
        prev = self._entry
        assert prev is not None
        intended = build(prev)
        write_id = uuid.uuid4().hex
        try:
            entry = self._coordinator.write(prev, intended, write_id=write_id)
        except ArrowLogError as e:
            if e.retriable:
                # it may land later, after attempts of its own: each is ours
                self._doubtful_writes.add((prev.n + 1, write_id))
            raise
        except EntryConflictError as conflict:
            return self._after_conflict(prev, intended, conflict, build)
        self._entry = entry
        self._doubtful_writes.clear()
        return entry

    def _after_conflict(
        self,
        prev: TxnEntry,
        intended: TxnEntry,
        conflict: EntryConflictError,
        build: Callable[[TxnEntry], TxnEntry],
    ) -> TxnEntry:
        """The entry that took our place says why; later ones may be anything."""
        winner = self._coordinator.entry(prev.n + 1) or conflict.latest
        doubtful = winner is not None and (winner.n, winner.write_id) in self._doubtful_writes
        if doubtful and winner is not None and self._coordinator.is_stray(winner.n):
            # our attempt landed, but in a key cleanup had freed, below
            # the log: not the log's entry (docs/protocol.md, "Cleaning up")
            self._coordinator.remove_stray(winner.n)
            winner, doubtful = self._coordinator.latest(), False
        if doubtful and winner is not None:
            # our own earlier attempt, landed after we gave up on it: it is
            # ours (only hold what you wrote: we wrote it). If it is this very
            # change, it is done; else build this change on top of it.
            self._entry = winner
            self._doubtful_writes.clear()
            if replace(intended, written_ms=winner.written_ms, write_id=winner.write_id) == winner:
                return winner
            return self.write(build)
        self._lifecycle.end(ProducerState.FENCED)
        raise self._fenced_by(winner, intended.producer_epoch) from None

    def _fenced_by(self, winner: TxnEntry | None, epoch: int) -> ArrowLogError:
        """The error for a producer of ``epoch`` whose entry ``winner`` took."""
        tid = self.transactional_id
        if winner is not None and winner.reason == EXPIRE_ID:
            return ProducerFencedError(
                f"transactional id {tid!r} expired: it was idle longer than vacuum's "
                "retain_ms; a new producer with this id can init_transactions() and go on"
            )
        ours = winner is not None and winner.txn_epoch == epoch
        name = f"transaction of {tid!r} (epoch {epoch})"
        if ours and winner is not None and winner.reason == EXPIRE:
            return TransactionTimeoutError(f"{name} ran past its timeout and was aborted")
        if ours and winner is not None and winner.reason == OPERATOR_ABORT:
            return ProducerFencedError(f"{name} was aborted by an operator (abort-transaction)")
        newer = winner.producer_epoch if winner else "?"
        return ProducerFencedError(
            f"producer for {tid!r} (epoch {epoch}) was fenced: a newer instance has epoch {newer}"
        )

    def hand_off(self, prepared: TxnEntry, reason: str, timeout_ms: int) -> None:
        """After PREPARE: hold it, and finish the transaction in the background.
        Until the COMPLETE lands, readers count the next transaction's records
        undecided (coordinator.may_begin), and if the COMPLETE loses its place
        to another client's entry, that entry moves the log past the epoch,
        which decides those records aborted. The next write waits for the
        COMPLETE (:meth:`settle`)."""
        write_id = uuid.uuid4().hex
        self._entry = prepared
        unfinished = _Unfinished(prepared, reason, timeout_ms, write_id, None)
        self._unfinished = unfinished
        if self._finisher is None or self._finisher_pid != os.getpid():
            # (a pool copied into a forked child has no thread: it would never run)
            self._finisher = ThreadPoolExecutor(max_workers=1, thread_name_prefix="arrowlog-finish")
            self._finisher_pid = os.getpid()
        try:
            future = self._finisher.submit(
                finish, self._log, self._coordinator, prepared, reason=reason,
                timeout_ms=timeout_ms, write_id=write_id,
            )  # fmt: skip
        except RuntimeError:  # the interpreter is exiting: finish here
            with contextlib.suppress(ArrowLogError):
                self.settle()
            return
        self._unfinished = replace(unfinished, future=future)

    def settle(self) -> None:
        """Wait for the background end of the last transaction, and take the
        COMPLETE entry it wrote as our latest. Finishing that failed (the store
        unreachable until the retry deadline) is done again here.

        Raises:
            ProducerFencedError: another client wrote the entry our COMPLETE
                meant to take; the transaction's outcome stands, but this
                instance holds no epoch any more.
            ArrowLogError: finishing failed again (retriable: call again).
        """
        unfinished = self._unfinished
        if unfinished is None:
            return
        try:
            if unfinished.future is not None:
                complete = unfinished.future.result()
            else:
                complete = finish(
                    self._log, self._coordinator, unfinished.prepared,
                    reason=unfinished.reason, timeout_ms=unfinished.timeout_ms,
                    write_id=unfinished.write_id,
                )  # fmt: skip
        except ArrowLogError:
            self._unfinished = replace(unfinished, future=None)
            raise
        self._unfinished = None
        epoch = next_epoch(unfinished.prepared)
        if complete is None:
            self._lifecycle.end(ProducerState.FENCED)
            raise ProducerFencedError(
                f"producer for {self.transactional_id!r} (epoch {epoch}) was fenced "
                "while its last transaction finished (that transaction's outcome stands)"
            )
        assert complete.producer_epoch == epoch
        self._entry = complete

    def settle_quietly(self) -> None:
        """:meth:`settle` for ``close``: the outcome is fixed either way, and a
        transaction left prepared is finished by the next instance."""
        with contextlib.suppress(ArrowLogError):
            self.settle()
        if self._finisher is not None:
            self._finisher.shutdown(wait=True)
            self._finisher = None
