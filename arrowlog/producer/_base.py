"""What every part of a producer shares: its state machine and the state it
keeps (the producer id and epoch, sequences, the transaction in progress)."""

from __future__ import annotations

import enum
import threading
from collections.abc import Iterable, Iterator
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from typing import TYPE_CHECKING

import crc32c
import pyarrow as pa

from arrowlog.errors import (
    InvalidConfigError,
    InvalidTxnStateError,
    ProducerFencedError,
)
from arrowlog.format.segment import WriterIdentity
from arrowlog.partition import PartitionLog
from arrowlog.txn.coordinator import (
    CoordinatorLog,
    TxnEntry,
    TxnState,
    check_id,
)
from arrowlog.txn.view import LogView

if TYPE_CHECKING:
    from arrowlog.producer._transactions import _Unfinished


def key_partitions(values: Iterable[object], partitions: int) -> list[int]:
    """The partition of each key: CRC32C of the value's text modulo the partition
    count, the same in every process (``send_keyed`` and the Spark sink)."""
    return [crc32c.crc32c(str(v).encode()) % partitions for v in values]


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
    ProducerState.UNINITIALIZED: {ProducerState.READY},
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
_FINAL = {ProducerState.FENCED, ProducerState.FATAL_ERROR, ProducerState.CLOSED}


@dataclass(frozen=True, slots=True)
class _InDoubt:
    batch: pa.RecordBatch
    identity: WriterIdentity
    expected_offset: int | None


class _ProducerBase:
    """The state of a producer; see :class:`~arrowlog.producer.Producer`.

    Made by :meth:`ArrowLog.producer`. Not safe to share between threads.
    """

    def __init__(
        self,
        log: LogView,
        *,
        transactional_id: str | None = None,
        transaction_timeout_ms: int = 60_000,
    ) -> None:
        if transactional_id is not None:
            check_id("transactional id", transactional_id)
        if not 1_000 <= transaction_timeout_ms <= 24 * 3600 * 1000:
            raise InvalidConfigError("transaction_timeout_ms must be between 1 s and 24 h")
        self._log = log
        self.transactional_id = transactional_id
        self.transaction_timeout_ms = transaction_timeout_ms
        self._state = (
            ProducerState.UNINITIALIZED if transactional_id is not None else ProducerState.READY
        )
        self._producer_id = -1
        self._epoch = 0
        self._sequences: dict[tuple[str, int], int] = {}
        # the log each sequence is for: a topic deleted and created anew is a
        # new log (a new PartitionLog), where the sequence starts over
        self._sequence_logs: dict[tuple[str, int], PartitionLog] = {}
        self._in_doubt: dict[tuple[str, int], _InDoubt] = {}
        self._round_robin: dict[str, tuple[int, Iterator[int]]] = {}
        self._coordinator = (
            CoordinatorLog(log.store, transactional_id, log.config.retry)
            if transactional_id is not None
            else None
        )
        self._entry: TxnEntry | None = None  # the latest coordinator entry we know
        self._txn_partitions: set[tuple[str, int]] = set()
        #: topic -> the incarnation whose partitions the transaction registered
        self._txn_incarnations: dict[str, int] = {}
        self._txn_offsets: dict[str, dict[str, int]] = {}
        # where this instance's records of the transaction end, per partition; a
        # resumed transaction knows none (another instance wrote them)
        self._txn_ends: dict[tuple[str, int], int] = {}
        self._txn_marked: set[str] = set()  # groups whose log marks us pending
        # the segment of the transaction's first record (see TxnEntry.first_record)
        self._txn_first_record = ""
        self._prepared: TxnEntry | None = None  # our PREPARE entry, while ENDING
        # while ENDING: the PREPARE entry to write (state, reason, fields)
        self._prepare_plan: tuple[TxnState, str, dict[str, object]] | None = None
        # (entry number, write id) of every attempt at the next coordinator entry
        # whose outcome could not be told: any that lands later is ours (each
        # retry is a new attempt, and the first may land after the last)
        self._doubtful_writes: set[tuple[int, str]] = set()
        self._prepared_expired = False
        self._resumed = False
        self._txn_started_ms = 0
        self._txn_began: float | None = None  # time.monotonic() at begin
        # the last transaction, past PREPARE, until its COMPLETE is known written
        self._unfinished: _Unfinished | None = None
        self._finisher: ThreadPoolExecutor | None = None  # finishes it in the background
        self._finisher_pid = 0  # the process that made it
        self._lock = threading.Lock()

    # --- state --------------------------------------------------------------------

    @property
    def state(self) -> ProducerState:
        return self._state

    @property
    def producer_id(self) -> int:
        return self._producer_id

    @property
    def epoch(self) -> int:
        return self._epoch

    @property
    def last_committed_metadata(self) -> dict[str, str]:
        """Metadata of the last transaction of this id that reached PREPARE_COMMIT
        (known after ``init_transactions``)."""
        return dict(self._entry.metadata) if self._entry is not None else {}

    def _set_state(self, new: ProducerState) -> None:
        if new in _FINAL or new in _TRANSITIONS[self._state]:
            self._state = new
            return
        raise InvalidTxnStateError(
            f"producer {self.transactional_id or self._producer_id}: cannot go from "
            f"{self._state.value} to {new.value}"
        )

    def _check_usable(self) -> None:
        if self._state is ProducerState.FENCED:
            raise ProducerFencedError(
                f"producer for {self.transactional_id!r} was fenced by a newer instance"
            )
        if self._state is ProducerState.FATAL_ERROR:
            raise InvalidTxnStateError("the producer hit a fatal error; close it")
        if self._state is ProducerState.CLOSED:
            raise InvalidTxnStateError("the producer is closed")

    def _check_in_transaction(self, call: str) -> None:
        if self._state is ProducerState.ABORTABLE_ERROR:
            raise InvalidTxnStateError("the transaction failed; abort it")
        if self._state is ProducerState.ENDING:
            raise InvalidTxnStateError(
                f"{call}: the transaction is past its point of no return; call "
                "commit_transaction (or abort_transaction) again to finish it"
            )
        if self._state is not ProducerState.IN_TRANSACTION:
            raise InvalidTxnStateError(f"{call} outside a transaction: begin_transaction first")

    def _require_transactional(self) -> CoordinatorLog:
        if self._coordinator is None:
            raise InvalidTxnStateError("not a transactional producer: pass transactional_id")
        return self._coordinator
