"""A producer's lifecycle: one state, changed only along a declared table.

Both kinds of producer have one. An idempotent producer stays READY until a
fatal error or ``close``; a transactional one moves through its transactions,
each step decided by its :class:`~arrowlog.producer._transactions.TransactionManager`.
The final states can be entered from any state: they record that something the
producer does not control (a newer instance, a broken sequence, the caller's
``close``) ended it, and every later call is refused by :meth:`Lifecycle.check_usable`.
"""

from __future__ import annotations

import enum

from arrowlog.errors import InvalidTxnStateError, ProducerFencedError


class ProducerState(enum.Enum):
    UNINITIALIZED = "UNINITIALIZED"
    READY = "READY"
    IN_TRANSACTION = "IN_TRANSACTION"
    # PREPARE_COMMIT or PREPARE_ABORT is written: only finishing it is allowed
    # (retry the same commit or abort after a retriable error)
    ENDING = "ENDING"
    ABORTABLE_ERROR = "ABORTABLE_ERROR"  # the transaction can only be aborted
    FENCED = "FENCED"  # fatal: a newer instance owns the transactional id
    FATAL_ERROR = "FATAL_ERROR"  # fatal: e.g. an out-of-order sequence
    CLOSED = "CLOSED"


_TRANSITIONS = {
    # IN_TRANSACTION: resume_transaction takes over another instance's open one
    ProducerState.UNINITIALIZED: {ProducerState.READY, ProducerState.IN_TRANSACTION},
    ProducerState.READY: {ProducerState.IN_TRANSACTION, ProducerState.READY},
    ProducerState.IN_TRANSACTION: {
        ProducerState.READY,
        ProducerState.ABORTABLE_ERROR,
        ProducerState.ENDING,
    },
    ProducerState.ABORTABLE_ERROR: {ProducerState.READY, ProducerState.ENDING},
    ProducerState.ENDING: {ProducerState.READY},
    ProducerState.FENCED: set(),
    ProducerState.FATAL_ERROR: set(),
    ProducerState.CLOSED: set(),
}
FINAL = frozenset({ProducerState.FENCED, ProducerState.FATAL_ERROR, ProducerState.CLOSED})


class Lifecycle:
    """The state of one producer and the checks each of its calls makes first.

    Owns the state alone: the transaction manager moves it along the table with
    :meth:`move`, and whoever learns that the producer is over ends it with
    :meth:`end`.
    """

    __slots__ = ("_state", "_transactional_id")

    def __init__(self, transactional_id: str | None) -> None:
        self._transactional_id = transactional_id
        self._state = (
            ProducerState.UNINITIALIZED if transactional_id is not None else ProducerState.READY
        )

    @property
    def state(self) -> ProducerState:
        return self._state

    def move(self, new: ProducerState) -> None:
        """Go to ``new`` if the table allows it from here (a final state always).

        Raises:
            InvalidTxnStateError: the table does not allow it.
        """
        if new in FINAL or new in _TRANSITIONS[self._state]:
            self._state = new
            return
        raise InvalidTxnStateError(
            f"producer {self._transactional_id}: cannot go from {self._state.value} to {new.value}"
        )

    def end(self, final: ProducerState) -> None:
        """Enter a final state: fenced, fatal error or closed."""
        assert final in FINAL
        self._state = final

    def check_usable(self) -> None:
        """Refuse every call once the producer is over.

        Raises:
            ProducerFencedError: a newer instance owns the transactional id.
            InvalidTxnStateError: a fatal error, or closed.
        """
        if self._state is ProducerState.FENCED:
            raise ProducerFencedError(
                f"producer for {self._transactional_id!r} was fenced by a newer instance"
            )
        if self._state is ProducerState.FATAL_ERROR:
            raise InvalidTxnStateError("the producer hit a fatal error; close it")
        if self._state is ProducerState.CLOSED:
            raise InvalidTxnStateError("the producer is closed")

    def check_in_transaction(self, call: str) -> None:
        """Refuse ``call`` outside an open transaction that can still take data.

        Raises:
            InvalidTxnStateError: no transaction, or one that can only end.
        """
        if self._state is ProducerState.ABORTABLE_ERROR:
            raise InvalidTxnStateError("the transaction failed; abort it")
        if self._state is ProducerState.ENDING:
            raise InvalidTxnStateError(
                f"{call}: the transaction is past its point of no return; call "
                "commit_transaction (or abort_transaction) again to finish it"
            )
        if self._state is not ProducerState.IN_TRANSACTION:
            raise InvalidTxnStateError(f"{call} outside a transaction: begin_transaction first")
