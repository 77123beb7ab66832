"""The producer: the public face over its parts.

A :class:`Producer` composes a :class:`~arrowlog.producer._state.Lifecycle`
(its state), an :class:`~arrowlog.producer._idempotence.Idempotence` (producer
id, epoch, sequences, batches in doubt), a
:class:`~arrowlog.producer._transactions.TransactionManager` when it has a
transactional id, and a round-robin partitioner. Each part owns its fields;
the producer holds the lock, checks, and calls them in the order a send or a
transaction needs.
"""

from __future__ import annotations

import threading
from collections.abc import Iterable, Iterator, Mapping
from contextlib import contextmanager
from types import TracebackType
from typing import Self

import pyarrow as pa
import pyarrow.compute as pc

from arrowlog.errors import (
    AppendOutcomeUnknownError,
    InvalidBatchError,
    InvalidConfigError,
    InvalidTxnStateError,
    OutOfOrderSequenceError,
    ProducerFencedError,
    UnknownColumnError,
)
from arrowlog.partition import AppendResult
from arrowlog.producer._idempotence import Idempotence
from arrowlog.producer._partitioning import RoundRobin, key_partitions
from arrowlog.producer._state import FINAL, Lifecycle, ProducerState
from arrowlog.producer._transactions import TransactionManager
from arrowlog.txn.coordinator import check_id
from arrowlog.txn.groups import ConsumerGroupMetadata
from arrowlog.txn.view import LogView


class Producer:
    """Sends record batches to partitions, exactly once per batch.

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
        self._lock = threading.Lock()
        self._transactional_id = transactional_id
        self._lifecycle = Lifecycle(transactional_id)
        self._idempotence = Idempotence(log, transactional_id)
        self._transactions = (
            TransactionManager(
                log,
                transactional_id,
                transaction_timeout_ms,
                lifecycle=self._lifecycle,
                idempotence=self._idempotence,
            )
            if transactional_id is not None
            else None
        )
        # a producer without transactions keeps the setting only to show it
        self._timeout_ms = transaction_timeout_ms
        self._round_robin = RoundRobin(log)

    # --- state --------------------------------------------------------------------

    @property
    def transactional_id(self) -> str | None:
        return self._transactional_id

    @property
    def transaction_timeout_ms(self) -> int:
        """The transaction timeout: as configured, or the resumed transaction's."""
        if self._transactions is not None:
            return self._transactions.timeout_ms
        return self._timeout_ms

    @transaction_timeout_ms.setter
    def transaction_timeout_ms(self, value: int) -> None:
        if self._transactions is not None:
            self._transactions.timeout_ms = value
        self._timeout_ms = value

    @property
    def state(self) -> ProducerState:
        return self._lifecycle.state

    @property
    def producer_id(self) -> int:
        return self._idempotence.producer_id

    @property
    def epoch(self) -> int:
        return self._idempotence.epoch

    @property
    def last_committed_metadata(self) -> dict[str, str]:
        """Metadata of the last transaction of this id that reached PREPARE_COMMIT
        (known after ``init_transactions``)."""
        entry = self._transactions.last_entry if self._transactions is not None else None
        return dict(entry.metadata) if entry is not None else {}

    def _require_transactional(self) -> TransactionManager:
        if self._transactions is None:
            raise InvalidTxnStateError("not a transactional producer: pass transactional_id")
        return self._transactions

    # --- sending ------------------------------------------------------------------

    def send(
        self,
        topic: str,
        batch: pa.RecordBatch | pa.Table,
        *,
        partition: int | None = None,
        expected_offset: int | None = None,
    ) -> AppendResult:
        """Append ``batch`` to one partition (``partition``, or round-robin).

        Raises:
            InvalidTxnStateError: a transactional producer outside a transaction,
                or after a fatal error.
            ProducerFencedError: a newer instance owns the transactional id.
            OffsetMismatchError, SchemaMismatchError, ...: as
                :meth:`PartitionLog.append`; nothing was written.
            AppendOutcomeUnknownError: retriable for an idempotent producer (the
                next send or flush resolves it); a transaction must be aborted.
        """
        with self._lock:
            self._lifecycle.check_usable()
            txn = self._transactions
            if txn is not None:
                txn.check_sendable()
            if partition is None:
                partition = self._round_robin.next_partition(topic)
            part = self._log.partition(topic, partition)
            prepared = part.prepare_batch(batch)
            part.check_expected_offset(expected_offset)
            tp = (topic, partition)
            self._idempotence.track_log(tp, part)
            # before anything is written: a producer id, a partition registered
            part.check_fits(prepared, self._idempotence.widest_identity())
            who = self._idempotence.next_identity(tp)
            if txn is not None:
                txn.join_for_send(tp, part.opened_topic())
            try:
                result = part.append(prepared, expected_offset=expected_offset, identity=who)
            except AppendOutcomeUnknownError:
                if txn is not None:
                    txn.send_in_doubt()
                else:
                    self._idempotence.hold_in_doubt(tp, prepared, who, expected_offset)
                raise
            except (OutOfOrderSequenceError, ProducerFencedError) as e:
                fenced = isinstance(e, ProducerFencedError)
                self._lifecycle.end(ProducerState.FENCED if fenced else ProducerState.FATAL_ERROR)
                raise
            self._idempotence.acknowledged(tp, who, prepared.num_rows)
            if txn is not None:
                txn.sent(tp, part, result)
            return result

    def send_keyed(
        self, topic: str, batch: pa.RecordBatch | pa.Table, *, key: str
    ) -> list[AppendResult]:
        """Split ``batch`` by a hash of column ``key`` (CRC32C of each value's text,
        stable across processes) and send each part to its partition.

        Raises:
            UnknownColumnError: the batch has no column ``key`` (nothing sent).
            InvalidBatchError: a key has no text to hash, such as a timestamp
                past the year 9999 (nothing sent).
        """
        table = batch if isinstance(batch, pa.Table) else pa.Table.from_batches([batch])
        partitions = self._log.topic(topic).partitions
        if key not in table.column_names:
            raise UnknownColumnError(f"send_keyed: the batch has no column {key!r}")
        try:
            keys = table.column(key).to_pylist()
        except (OverflowError, ValueError) as e:
            raise InvalidBatchError(
                f"send_keyed: a value of key column {key!r} cannot be hashed ({e}); nothing "
                "was sent"
            ) from e
        slots = pa.array(key_partitions(keys, partitions), pa.int32())
        results = []
        for p in range(partitions):
            part = table.filter(pc.equal(slots, pa.scalar(p, pa.int32())))
            if part.num_rows:
                results.append(self.send(topic, part, partition=p))
        return results

    def flush(self) -> None:
        """Settle every batch whose outcome was unknown (idempotent producers);
        wait until the last transaction is finished (markers, offsets, COMPLETE:
        transactional producers).

        Raises:
            ProducerFencedError: another client took the transactional id while
                the last transaction finished (its outcome stands).
        """
        with self._lock:
            self._lifecycle.check_usable()
            self._idempotence.resolve_all_in_doubt()
            if self._transactions is not None:
                self._transactions.settle()

    def close(self) -> None:
        """Flush and close. An open transaction is left to the next instance or to
        expiry (as in Kafka); abort it first to release its partitions at once.
        A committed one still finishing is waited for (failures are left to the
        next instance: the outcome is fixed)."""
        if self._lifecycle.state not in FINAL:
            if self._transactions is None:
                self.flush()
            else:
                with self._lock:
                    self._transactions.settle_quietly()
            self._lifecycle.end(ProducerState.CLOSED)

    def __enter__(self) -> Producer:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        if exc_type is None:
            self.close()
        else:
            self._lifecycle.end(ProducerState.CLOSED)

    # --- transactions -------------------------------------------------------------

    def init_transactions(self) -> None:
        """Become the one live instance of this transactional id: bump the epoch
        (fencing every older instance) and finish the previous instance's
        transaction (roll forward after PREPARE_COMMIT, roll back otherwise).

        Raises:
            ConcurrentTransactionsError: other clients kept changing the id's state.
        """
        txn = self._require_transactional()
        with self._lock:
            txn.init()

    def resume_transaction(self, producer_epoch: int) -> None:
        """Take over, in another process, the open transaction of epoch
        ``producer_epoch`` that another instance of this id began (the driver of a
        distributed job commits what its writer set up). No epoch bump: if anyone
        fenced that epoch meanwhile, this raises ProducerFencedError.

        Raises:
            ProducerFencedError: the epoch is no longer current.
            InvalidTxnStateError: no transaction of that epoch is open.
        """
        txn = self._require_transactional()
        with self._lock:
            txn.resume(producer_epoch)

    def begin_transaction(self) -> None:
        """Start a transaction, locally: it runs under the epoch the latest entry
        granted, and reaches the coordinator log at its commit (or with consumer
        offsets). Records it sends stay undecided until then."""
        txn = self._require_transactional()
        with self._lock:
            txn.begin()

    def add_partitions(self, partitions: Iterable[tuple[str, int]]) -> None:
        """Register partitions with the transaction in one coordinator write.

        Only a transaction that another process will take over needs it
        (:meth:`resume_transaction` finds the partitions there): from this
        entry on, each partition the transaction sends to is registered before
        its data, one write each. Any other transaction skips the call: a send
        adds its partition without a request, and the coordinator log learns
        the partitions at PREPARE."""
        txn = self._require_transactional()
        with self._lock:
            txn.add_partitions(partitions)

    def send_offsets_to_transaction(
        self,
        offsets: Mapping[tuple[str, int], int],
        group_id: str | ConsumerGroupMetadata,
        *,
        incarnations: Mapping[str, int] | None = None,
    ) -> None:
        """Commit consumer offsets (next offset to read, per (topic, partition))
        for a group as part of the transaction: they become the group's
        position only if the transaction commits.

        Give the group as the consuming consumer's ``group_metadata()`` (as
        Kafka's ``sendOffsetsToTransaction(offsets, consumer.groupMetadata())``):
        each offset is then kept as a position in the incarnation of the topic
        that consumer read the partition in (see :meth:`Consumer.commit`). With
        a bare group id, offsets are taken as positions in their topics as they
        are now, unless ``incarnations`` (topic -> incarnation) names theirs.

        The offsets stay positions in the incarnation checked here: if the
        topic is deleted and created again before the transaction commits, the
        commit keeps them for the old topic, and the group's position in the
        new one is untouched.

        Raises:
            TopicRecreatedError: an offset belongs to an incarnation that is no
                longer its topic's (it was deleted and created again since the
                read); nothing was written, and the transaction goes on (abort
                it, or commit it without these offsets).
            InvalidConfigError: a bad offset or incarnation.
            InvalidTxnStateError: no transaction.
            UnknownTopicOrPartitionError: no such topic or partition.
        """
        txn = self._require_transactional()
        if isinstance(group_id, ConsumerGroupMetadata):
            group, read_in = group_id.group_id, group_id.incarnations
        else:
            group, read_in = check_id("group id", group_id), {}
        with self._lock:
            txn.send_offsets(offsets, group, read_in=read_in, incarnations=incarnations)

    def commit_transaction(
        self, *, members: Iterable[int] = (), metadata: Mapping[str, str] | None = None
    ) -> None:
        """Commit: write PREPARE_COMMIT, the commit point, and return; markers,
        consumer offsets and COMPLETE_COMMIT follow in the background (the next
        coordinator write of this producer, ``flush`` and ``close`` wait for
        them). The records are visible to read_committed readers from PREPARE on.

        ``members`` names other producer ids whose batches of this transaction
        commit with it (the tasks of a distributed job); ``metadata`` is kept in
        the coordinator log as the last committed transaction's metadata.

        Raises:
            InvalidTxnStateError: no transaction, or it can only be aborted.
            ProducerFencedError: a newer instance owns the transactional id.
            TransactionTimeoutError: the transaction outlived its timeout; it was
                aborted.
        """
        members = tuple(members)
        txn = self._require_transactional()
        with self._lock:
            txn.end(commit=True, members=members, metadata=metadata)

    def abort_transaction(self) -> None:
        """Abort: write PREPARE_ABORT and return (ABORT markers and COMPLETE_ABORT
        follow in the background). Nothing the transaction wrote is ever visible
        under read_committed. A transaction that sent nothing ends locally."""
        txn = self._require_transactional()
        with self._lock:
            txn.end(commit=False)

    @contextmanager
    def transaction(self) -> Iterator[Self]:
        """``with producer.transaction(): ...`` begins a transaction, commits it on
        a clean exit and aborts it on an exception (which propagates)."""
        self.begin_transaction()
        try:
            yield self
        except BaseException:
            if self.state in (ProducerState.IN_TRANSACTION, ProducerState.ABORTABLE_ERROR):
                self.abort_transaction()
            raise
        self.commit_transaction()
