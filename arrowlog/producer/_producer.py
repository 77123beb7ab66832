"""The producer: sending batches exactly once (sequences, in-doubt resends),
with the transactional methods of :mod:`arrowlog.producer._transactions`."""

from __future__ import annotations

import itertools
import random
from types import TracebackType

import pyarrow as pa
import pyarrow.compute as pc

from arrowlog.errors import (
    AppendOutcomeUnknownError,
    InvalidBatchError,
    InvalidTxnStateError,
    OffsetMismatchError,
    OutOfOrderSequenceError,
    ProducerFencedError,
    UnknownColumnError,
)
from arrowlog.format.segment import WriterIdentity
from arrowlog.partition import AppendResult
from arrowlog.producer._base import _FINAL, ProducerState, _InDoubt, key_partitions
from arrowlog.producer._transactions import _Transactions
from arrowlog.txn.producer_ids import MAX_PRODUCER_ID, allocate_producer_id


class Producer(_Transactions):
    """Sends record batches to partitions, exactly once per batch.

    Made by :meth:`ArrowLog.producer`. Not safe to share between threads.
    """

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
            self._check_usable()
            if self._coordinator is not None:
                self._check_in_transaction("send")
                if self._resumed:
                    raise InvalidTxnStateError(
                        "a resumed transaction can only be committed or aborted: the "
                        "instance that began it (or its members) send"
                    )
            if partition is None:
                partition = self._next_partition(topic)
            part = self._log.partition(topic, partition)
            prepared = part.prepare_batch(batch)
            part.check_expected_offset(expected_offset)
            tp = (topic, partition)
            if self._sequence_logs.setdefault(tp, part) is not part:
                self._sequences.pop(tp, None)
                self._sequence_logs[tp] = part
            # before anything is written: a producer id, a partition registered
            part.check_fits(prepared, _widest(self.transactional_id))
            if self._producer_id < 0:
                self._producer_id = allocate_producer_id(self._log, None)
            self._resolve_in_doubt(tp)
            who = WriterIdentity(
                producer_id=self._producer_id,
                producer_epoch=self._epoch,
                base_sequence=self._sequences.get(tp, 0),
                transactional=self._coordinator is not None,
                transactional_id=self.transactional_id,
            )
            if self._coordinator is not None:
                self._check_joinable(part.opened_topic())
                self._join(tp, part.opened_topic())
                if self._registered():
                    self._register()  # a resumable transaction names it first
            try:
                result = part.append(prepared, expected_offset=expected_offset, identity=who)
            except AppendOutcomeUnknownError:
                if self._coordinator is not None:
                    self._set_state(ProducerState.ABORTABLE_ERROR)
                else:
                    self._in_doubt[tp] = _InDoubt(prepared, who, expected_offset)
                raise
            except (OutOfOrderSequenceError, ProducerFencedError) as e:
                self._state = (
                    ProducerState.FENCED
                    if isinstance(e, ProducerFencedError)
                    else ProducerState.FATAL_ERROR
                )
                raise
            self._sequences[tp] = who.base_sequence + prepared.num_rows
            if self._coordinator is not None:
                self._txn_ends[tp] = max(self._txn_ends.get(tp, 0), result.next_offset)
                if not self._txn_first_record:  # the transaction's age starts here
                    self._txn_first_record = part.segment_key(result.base_offset)
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

    def _next_partition(self, topic: str) -> int:
        count = self._log.topic(topic).partitions
        known, cycle = self._round_robin.get(topic, (0, None))
        if cycle is None or known != count:  # first send, or partitions were added
            start = random.randrange(count)
            cycle = itertools.cycle([(start + i) % count for i in range(count)])
            self._round_robin[topic] = (count, cycle)
        return next(cycle)

    def _resolve_in_doubt(self, tp: tuple[str, int]) -> None:
        """Resend a batch whose outcome was unknown, with its original sequence:
        the partition returns the original offset if it had landed."""
        doubt = self._in_doubt.get(tp)
        if doubt is None:
            return
        part = self._log.partition(*tp)
        try:
            result = part.append(
                doubt.batch, expected_offset=doubt.expected_offset, identity=doubt.identity
            )
        except OffsetMismatchError:
            # an expected-offset batch lands there or nowhere: it did not land
            # (its sequence would have made it a duplicate), and now cannot
            del self._in_doubt[tp]
            raise
        del self._in_doubt[tp]
        self._sequences[tp] = doubt.identity.base_sequence + result.record_count

    def flush(self) -> None:
        """Settle every batch whose outcome was unknown (idempotent producers);
        wait until the last transaction is finished (markers, offsets, COMPLETE:
        transactional producers).

        Raises:
            ProducerFencedError: another client took the transactional id while
                the last transaction finished (its outcome stands).
        """
        with self._lock:
            self._check_usable()
            for tp in list(self._in_doubt):
                self._resolve_in_doubt(tp)
            self._settle()

    def close(self) -> None:
        """Flush and close. An open transaction is left to the next instance or to
        expiry (as in Kafka); abort it first to release its partitions at once.
        A committed one still finishing is waited for (failures are left to the
        next instance: the outcome is fixed)."""
        if self._state not in _FINAL:
            if self._coordinator is None:
                self.flush()
            else:
                with self._lock:
                    self._settle_quietly()
            self._state = ProducerState.CLOSED

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
            self._state = ProducerState.CLOSED


def _widest(transactional_id: str | None) -> WriterIdentity:
    """An identity whose header is as long as any this producer writes: for
    size checks before the real producer id and sequence are known."""
    return WriterIdentity(
        producer_id=MAX_PRODUCER_ID,
        producer_epoch=2**31,
        base_sequence=2**31,
        transactional=transactional_id is not None,
        transactional_id=transactional_id,
    )
