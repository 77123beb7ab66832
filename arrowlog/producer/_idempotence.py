"""The idempotent half of a producer (KIP-98): who it is and how far it got.

A producer id that no other producer ever gets, the epoch it writes under, and
per partition the sequence of its next batch: with these a partition recognises
a batch it already holds, so a resend lands once. A batch whose reply was lost
is kept, with its sequence, and sent again before anything else goes to that
partition; the partition answers with the original offset if it had landed.
"""

from __future__ import annotations

from dataclasses import dataclass

import pyarrow as pa

from arrowlog.errors import OffsetMismatchError
from arrowlog.format.segment import WriterIdentity
from arrowlog.partition import PartitionLog
from arrowlog.txn.producer_ids import MAX_PRODUCER_ID, allocate_producer_id
from arrowlog.txn.view import LogView

TopicPartition = tuple[str, int]


@dataclass(frozen=True, slots=True)
class _InDoubt:
    batch: pa.RecordBatch
    identity: WriterIdentity
    expected_offset: int | None


class Idempotence:
    """A producer's identity (producer id, epoch) and its per-partition sequences.

    Owns them alone: a transactional producer's manager hands it the id and
    epoch each coordinator entry grants (:meth:`adopt`), and starts the
    sequences over with each transaction (:meth:`restart_sequences`).
    """

    def __init__(self, log: LogView, transactional_id: str | None) -> None:
        self._log = log
        self._transactional_id = transactional_id
        self._producer_id = -1  # allocated at the first send, or granted by an entry
        self._epoch = 0
        self._sequences: dict[TopicPartition, int] = {}
        # the log each sequence is for: a topic deleted and created anew is a
        # new log (a new PartitionLog), where the sequence starts over
        self._sequence_logs: dict[TopicPartition, PartitionLog] = {}
        self._in_doubt: dict[TopicPartition, _InDoubt] = {}

    @property
    def producer_id(self) -> int:
        return self._producer_id

    @property
    def epoch(self) -> int:
        return self._epoch

    @property
    def sequences(self) -> dict[TopicPartition, int]:
        """The next batch's sequence, per partition sent to."""
        return self._sequences

    def adopt(self, producer_id: int, epoch: int) -> None:
        """Write from now on as the producer id and epoch a coordinator entry granted."""
        self._producer_id = producer_id
        self._epoch = epoch

    def move_to_epoch(self, epoch: int) -> None:
        """Write from now on under ``epoch`` (granted by the COMPLETE entry to come)."""
        self._epoch = epoch

    def restart_sequences(self) -> None:
        """A transaction's batches are numbered from 0 in each partition."""
        self._sequences = {}

    def widest_identity(self) -> WriterIdentity:
        """An identity whose header is as long as any this producer writes: for
        size checks before the real producer id and sequence are known."""
        return WriterIdentity(
            producer_id=MAX_PRODUCER_ID,
            producer_epoch=2**31,
            base_sequence=2**31,
            transactional=self._transactional_id is not None,
            transactional_id=self._transactional_id,
        )

    def track_log(self, tp: TopicPartition, part: PartitionLog) -> None:
        """Sequences are per log: one sent to a partition of a topic since
        deleted and created anew (a new ``part``) starts over at 0."""
        if self._sequence_logs.setdefault(tp, part) is not part:
            self._sequences.pop(tp, None)
            self._sequence_logs[tp] = part

    def next_identity(self, tp: TopicPartition) -> WriterIdentity:
        """The identity of the next batch to ``tp``: a producer id (allocated at
        the first send), the epoch, and the partition's next sequence, once any
        batch in doubt there is settled.

        Raises:
            OffsetMismatchError: the batch in doubt had an expected offset that
                no longer holds (it did not land, and now cannot).
            ArrowLogError: as :meth:`PartitionLog.append`, for the batch in doubt.
        """
        if self._producer_id < 0:
            self._producer_id = allocate_producer_id(self._log, None)
        self.resolve_in_doubt(tp)
        return WriterIdentity(
            producer_id=self._producer_id,
            producer_epoch=self._epoch,
            base_sequence=self._sequences.get(tp, 0),
            transactional=self._transactional_id is not None,
            transactional_id=self._transactional_id,
        )

    def acknowledged(self, tp: TopicPartition, identity: WriterIdentity, rows: int) -> None:
        """A batch sent as ``identity`` landed: the next one follows its rows."""
        self._sequences[tp] = identity.base_sequence + rows

    def hold_in_doubt(
        self,
        tp: TopicPartition,
        batch: pa.RecordBatch,
        identity: WriterIdentity,
        expected_offset: int | None,
    ) -> None:
        """A batch's outcome is unknown: keep it to send again, as it was."""
        self._in_doubt[tp] = _InDoubt(batch, identity, expected_offset)

    def resolve_in_doubt(self, tp: TopicPartition) -> None:
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
        self.acknowledged(tp, doubt.identity, result.record_count)

    def resolve_all_in_doubt(self) -> None:
        """Settle every batch whose outcome was unknown."""
        for tp in list(self._in_doubt):
            self.resolve_in_doubt(tp)
