"""Appends: checking a batch, claiming the offset at the log end with
put-if-absent, the expected offset (KIP-27), the producer's sequence check, and
resolving a lost reply by reading back what sits at the offset. See
docs/protocol.md, "Appending".
"""

from __future__ import annotations

import collections
import time
import uuid
from collections.abc import Iterator, Sequence
from dataclasses import dataclass

import pyarrow as pa

from arrowlog import _clock
from arrowlog.config import MAX_OFFSET, Compression
from arrowlog.errors import (
    AppendOutcomeUnknownError,
    ArrowLogError,
    DuplicateSequenceError,
    InvalidBatchError,
    OffsetMismatchError,
    OutOfOrderSequenceError,
    ProducerFencedError,
    RecordBatchTooLargeError,
    TransientStoreError,
)
from arrowlog.format.checkpoint import ProducerEntry, SegmentSummary
from arrowlog.format.control import ControlType, marker_batch
from arrowlog.format.segment import (
    HEADER_SLACK,
    PLAIN_APPEND,
    Ref,
    SegmentHeader,
    WriterIdentity,
    compression_slack,
    empty_batch,
    encode,
    has_dictionaries,
    metadata_slack,
    segment_size_floor,
)
from arrowlog.partition._base import Shared
from arrowlog.partition.append_result import AppendResult
from arrowlog.partition.checkpoints import Checkpoints
from arrowlog.partition.checks import prepare_batch
from arrowlog.partition.claims import Claims, Owner
from arrowlog.partition.indexes import CompactedIndexes
from arrowlog.partition.known import KnownLog
from arrowlog.partition.listing import Listing
from arrowlog.partition.reads import Reads
from arrowlog.partition.sequences import check_own_refs
from arrowlog.partition.staged import Staged


@dataclass(frozen=True, slots=True)
class Encoded:
    """A batch's segment encoded ahead of its turn for the offset it will
    likely take: used if the log still ends there when it is put, else
    encoded again (see :mod:`arrowlog.partition.batches`)."""

    offset: int
    append_id: str
    data: memoryview
    header: SegmentHeader


class Appends:
    """The appender part: writing batches and transaction markers at the log
    end. It owns what it knows of the producers that write through it, and
    its counters; everything it changes, of its own or of the state part, it
    changes under the partition's lock."""

    def __init__(
        self,
        shared: Shared,
        known: KnownLog,
        listing: Listing,
        checkpoints: Checkpoints,
        indexes: CompactedIndexes,
        reads: Reads,
    ) -> None:
        self._shared = shared
        self._known = known
        self._listing = listing
        self._checkpoints = checkpoints
        self._indexes = indexes
        self._reads = reads
        self._claims = Claims(shared, known, listing, checkpoints, indexes)
        # The latest batch of each producer that wrote through this object, and the
        # producers whose last append ended with an unknown outcome.
        self._own: dict[int, ProducerEntry] = {}
        # producer id -> the lowest offset where a batch of it whose outcome was
        # unknown may have landed: a retry looks for it there by its identity
        self._in_doubt: dict[int, int] = {}
        #: Counters since this object was made: appends, lost races (conflicts),
        #: replies lost or failed writes resolved by reading back (ambiguous).
        self.stats: collections.Counter[str] = collections.Counter()
        self._staged = Staged(shared, known, listing, checkpoints, self._claims, reads, self.stats)

    def prepare_batch(self, batch: pa.RecordBatch | pa.Table) -> pa.RecordBatch:
        """Check a batch against the topic and return it as one record batch with
        the topic's exact schema: see :func:`~arrowlog.partition.checks.prepare_batch`."""
        return prepare_batch(self._shared.topic, batch)

    def check_fits(self, batch: pa.RecordBatch, identity: WriterIdentity) -> None:
        """Refuse a prepared batch whose segment would exceed ``max_batch_bytes``
        wherever it lands. :meth:`prepare_batch` checks a lower bound; within a
        header's length of the limit this encodes the batch once, at the largest
        offset, to be sure before anything is written elsewhere (a transaction
        registering the partition).

        Raises:
            RecordBatchTooLargeError: the segment would be too large.
        """
        most = segment_size_floor(batch) + HEADER_SLACK + metadata_slack(batch)
        if self._shared.topic.config.compression is not Compression.NONE:
            most += compression_slack(batch)
        # dictionary values are outside the floor: no cheap bound, encode
        certain = not has_dictionaries(batch.schema)
        if certain and most <= self._shared.topic.config.max_batch_bytes:
            return
        self._encode(batch, MAX_OFFSET, uuid.uuid4().hex, identity)

    def append(
        self,
        batch: pa.RecordBatch | pa.Table,
        *,
        expected_offset: int | None = None,
        identity: WriterIdentity = PLAIN_APPEND,
    ) -> AppendResult:
        """Append ``batch`` at the log end, or exactly at ``expected_offset``.

        Without an expected offset, a lost race is retried at the new end. With
        one (KIP-27), the batch lands exactly there or not at all. With a producer
        id in ``identity``, the batch's sequence is checked against that
        producer's latest batch in this partition (see :meth:`_check_sequence`).

        Raises:
            OffsetMismatchError: the log does not end at ``expected_offset``;
                nothing was written.
            SchemaMismatchError, InvalidBatchError, RecordBatchTooLargeError: bad
                input; nothing was written.
            DuplicateSequenceError, OutOfOrderSequenceError, ProducerFencedError:
                the sequence or epoch does not follow the producer's last batch;
                nothing was written.
            AppendOutcomeUnknownError: the deadline passed while the outcome of
                the last attempt could not be read back.
        """
        if identity.control:
            raise InvalidBatchError("control records are written by transactions only")
        return self.append_prepared(self.prepare_batch(batch), expected_offset, identity)

    def append_control(
        self, kind: ControlType, identity: WriterIdentity, entry: int, *, bound: int = -1
    ) -> AppendResult:
        """Append a COMMIT or ABORT marker for the transaction ``identity`` names;
        ``bound`` is where the transaction's records in this partition end."""
        marker = WriterIdentity(
            producer_id=identity.producer_id,
            producer_epoch=identity.producer_epoch,
            transactional=True,
            control_type=kind.value,
            transactional_id=identity.transactional_id,
            txn_bound=bound,
        )
        return self.append_prepared(marker_batch(kind, entry), None, marker)

    def check_expected_offset(self, expected_offset: int | None) -> None:
        """Refuse an expected offset that no log can end at.

        Raises:
            OffsetMismatchError: not an int in ``[0, MAX_OFFSET]``.
        """
        if expected_offset is not None and (
            isinstance(expected_offset, bool)
            or not isinstance(expected_offset, int)
            or not 0 <= expected_offset <= MAX_OFFSET
        ):
            raise OffsetMismatchError(
                f"invalid expected offset {expected_offset!r}",
                expected_offset=-1,
                log_end_offset=self._reads.end_offset(refresh=False),
            )

    def encode_ahead(self, batch: pa.RecordBatch, offset: int) -> Encoded | None:
        """A prepared batch's segment for ``offset``, as a plain append,
        without writing (or locking) anything: for an append that will follow
        the one in flight. None if it does not encode: the append itself then
        raises."""
        append_id = uuid.uuid4().hex
        try:
            data, header = self._encode(batch, offset, append_id, PLAIN_APPEND)
        except ArrowLogError:
            return None
        return Encoded(offset, append_id, data, header)

    def append_prepared(
        self,
        batch: pa.RecordBatch,
        expected_offset: int | None,
        identity: WriterIdentity,
        ahead: Encoded | None = None,
    ) -> AppendResult:
        """:meth:`append` of a batch :meth:`prepare_batch` returned; ``ahead``,
        its segment encoded ahead of its turn (see :meth:`encode_ahead`)."""
        self.check_expected_offset(expected_offset)
        append_id = uuid.uuid4().hex if ahead is None else ahead.append_id
        with self._shared.lock:
            if not self._checkpoints.ensure_open() and self._claims.end_is_stale():
                self._listing.sync_tail()
            if identity.producer_id >= 0 and not identity.control:
                duplicate = self._check_sequence(identity, batch.num_rows)
                if duplicate is not None:
                    return duplicate
            if expected_offset is not None and expected_offset != self._known.end:
                self._listing.sync_tail()
                self._check_expected(expected_offset)
            first_try = self._known.end  # where this batch may land, at the lowest
            try:
                result = self._put_at_end(batch, expected_offset, identity, append_id, ahead)
            except AppendOutcomeUnknownError:
                if identity.producer_id >= 0:
                    self._in_doubt.setdefault(identity.producer_id, first_try)
                raise
            finally:
                self._staged.append_ended()
            if identity.producer_id >= 0 and not identity.control:
                self._own[identity.producer_id] = ProducerEntry(
                    identity.producer_id, identity.producer_epoch, identity.base_sequence,
                    batch.num_rows, result.base_offset, int(time.time() * 1000),
                )  # fmt: skip
                self._in_doubt.pop(identity.producer_id, None)
            return result

    def commit_refs(self, refs: Sequence[Ref]) -> AppendResult:
        """Commit staged objects their own writer uploaded (a Spark job's
        executors upload, its driver commits): one commit object at the log end
        naming ``refs``, in order. The refs are one producer's batches, in
        sequence from the first, each with its own identity; the producer's
        sequence is checked as an append of the first batch is (a retry after
        an unknown outcome finds the commit by it).

        Raises:
            InvalidBatchError: ``refs`` are not such batches; nothing was written.
            DuplicateSequenceError, OutOfOrderSequenceError, ProducerFencedError:
                as for :meth:`append`.
            AppendOutcomeUnknownError: as for :meth:`append`.
        """
        check_own_refs(refs)
        first = refs[0]
        who = first.identity
        append_id = uuid.uuid4().hex
        with self._shared.lock:
            if not self._checkpoints.ensure_open() and self._claims.end_is_stale():
                self._listing.sync_tail()
            if who.producer_id not in self._own:
                # even at sequence 0 (an append's first batch needs no history):
                # a commit sent again by a new client must find the first one
                self._listing.sync_tail()
                state = self._known.tail_state()
                latest = state.producers.get(who.producer_id)
                if latest is not None:
                    self._own[who.producer_id] = latest
            duplicate = self._check_sequence(who, first.record_count)
            if duplicate is not None:
                return self._whole_commit(duplicate, refs)
            first_try = self._known.end
            try:
                result = self._put_refs(refs, append_id)
            except AppendOutcomeUnknownError:
                self._in_doubt.setdefault(who.producer_id, first_try)
                raise
            last = refs[-1]
            self._own[who.producer_id] = ProducerEntry(
                who.producer_id, who.producer_epoch, last.identity.base_sequence,
                last.record_count, result.next_offset - last.record_count, last.timestamp_ms,
            )  # fmt: skip
            self._in_doubt.pop(who.producer_id, None)
            return result

    def _whole_commit(self, first: AppendResult, refs: Sequence[Ref]) -> AppendResult:
        count = sum(r.record_count for r in refs)
        shared = self._shared
        return AppendResult(shared.topic.name, shared.partition, first.base_offset, count)

    def _put_refs(self, refs: Sequence[Ref], append_id: str) -> AppendResult:
        """Put the commit object of ``refs`` at the log end, following the end
        past every object that wins a race for it."""
        count = sum(r.record_count for r in refs)
        who = refs[0].identity
        sleeps = self._shared.config.retry.sleeps()
        uncertain = False
        while True:
            offset = self._known.end
            header = SegmentHeader(
                base_offset=offset, record_count=count, timestamp_ms=int(time.time() * 1000),
                append_id=append_id, refs=tuple(refs),
            )  # fmt: skip
            data, header = encode(empty_batch(self._shared.topic.schema), header, Compression.NONE)
            began = _clock.elapsed()
            owner, maybe_applied = self._claims.try_put(offset, data, append_id)
            uncertain = uncertain or maybe_applied
            summary = SegmentSummary.of(header, len(data))
            if self._claims.below_log_start(owner, summary):
                self.stats["below_log_start"] += 1
                self._checkpoints.reopen()
                uncertain = False
                continue
            if owner is Owner.OURS:
                self.stats["appends"] += 1
                self._known.end_seen(began)
                self._claims.record_append(summary)
                return AppendResult(self._shared.topic.name, self._shared.partition, offset, count)
            if owner is Owner.THEIRS:
                self.stats["conflicts"] += 1
                self._listing.sync_tail()
                if self._known.end <= offset:
                    self._listing.probe_tail()
                if uncertain:
                    # an earlier attempt of ours may have landed at another
                    # offset before this one lost: find it by the first batch
                    self._in_doubt.setdefault(who.producer_id, offset)
                    duplicate = self._check_sequence(who, refs[0].record_count)
                    if duplicate is not None:
                        return self._whole_commit(duplicate, refs)
                uncertain = False
                continue
            self._pause_or_give_up(sleeps, offset, uncertain=uncertain)

    def _check_sequence(self, who: WriterIdentity, count: int) -> AppendResult | None:
        """Check ``who``'s sequence against the producer's latest batch here (the
        single-batch window). Returns the original append for a retry of that
        latest batch (nothing is written), None if the batch is next in order.

        The latest batch is known without a request when this object wrote it; a
        producer's first batch of an epoch (sequence 0) needs no history either.
        Otherwise, and always after an unknown outcome, the tail's headers are read.
        """
        pid = who.producer_id
        latest = self._own.get(pid)
        if pid in self._in_doubt or (latest is None and who.base_sequence != 0):
            self._listing.sync_tail()
            state = self._known.tail_state()
            latest = state.producers.get(pid)
        if pid in self._in_doubt:
            # A batch whose outcome was unknown may have landed, late, anywhere
            # from where it was first tried: find it by its identity. The
            # producer state cannot be relied on for it: a checkpoint may have
            # expired the producer meanwhile (on a writer's clock).
            landed = self._find_batch(who, count, self._in_doubt[pid])
            if landed is not None:
                self._own[pid] = landed
                del self._in_doubt[pid]
                return AppendResult(
                    self._shared.topic.name, self._shared.partition, landed.base_offset, count
                )
        if latest is None:
            if who.base_sequence != 0:
                raise OutOfOrderSequenceError(
                    f"producer {pid} has no batch in {self._shared.name}; its first must have "
                    f"sequence 0, not {who.base_sequence}"
                )
            return None
        if who.producer_epoch < latest.producer_epoch:
            raise ProducerFencedError(
                f"producer {pid} epoch {who.producer_epoch} is older than epoch "
                f"{latest.producer_epoch} already in {self._shared.name}"
            )
        if who.producer_epoch > latest.producer_epoch:
            if who.base_sequence != 0:
                raise OutOfOrderSequenceError(
                    f"a new epoch of producer {pid} must start at sequence 0, not "
                    f"{who.base_sequence}"
                )
            return None
        if who.base_sequence == latest.last_sequence + 1:
            return None
        if who.base_sequence == latest.base_sequence and count == latest.record_count:
            self._own[pid] = latest
            self._in_doubt.pop(pid, None)
            return AppendResult(
                self._shared.topic.name, self._shared.partition, latest.base_offset, count
            )
        if who.base_sequence <= latest.last_sequence:
            raise DuplicateSequenceError(
                f"producer {pid} sequence {who.base_sequence} in {self._shared.name} was written "
                f"before (latest batch: sequences {latest.base_sequence}..{latest.last_sequence})"
            )
        raise OutOfOrderSequenceError(
            f"producer {pid} sequence {who.base_sequence} in {self._shared.name} leaves a gap "
            f"after {latest.last_sequence}"
        )

    def _find_batch(self, who: WriterIdentity, count: int, since: int) -> ProducerEntry | None:
        """The batch of ``who`` (producer, epoch, first sequence, size) in the
        log at or after offset ``since``, or None."""
        for s in self._reads.summaries(
            max(min(since, self._known.end), self._known.log_start), self._known.end
        ):
            if (
                not s.control
                and s.producer_id == who.producer_id
                and s.producer_epoch == who.producer_epoch
                and s.base_sequence == who.base_sequence
                and s.record_count == count
            ):
                return ProducerEntry(
                    s.producer_id, s.producer_epoch, s.base_sequence, count, s.base, s.timestamp_ms
                )
        return None

    def _put_at_end(
        self,
        batch: pa.RecordBatch,
        expected_offset: int | None,
        identity: WriterIdentity,
        append_id: str,
        ahead: Encoded | None = None,
    ) -> AppendResult:
        staging = self._may_stage(expected_offset, identity)
        if staging and self._staged.contended():
            return self._staged.append(batch, identity, append_id)
        offset = self._known.end
        if ahead is not None and ahead.offset == offset:
            data, header = ahead.data, ahead.header
        else:
            data, header = self._encode(batch, offset, append_id, identity)
        sleeps = self._shared.config.retry.sleeps()
        uncertain = False
        while True:
            if offset != self._known.end:  # lost a race: move to the new end
                offset = self._known.end
                data, header = self._encode(batch, offset, append_id, identity)
            began = _clock.elapsed()
            owner, maybe_applied = self._claims.try_put(offset, data, append_id)
            uncertain = uncertain or maybe_applied
            if maybe_applied:
                self.stats["ambiguous"] += 1
            summary = SegmentSummary.of(header, len(data))
            if self._claims.below_log_start(owner, summary):
                # our PUT took a key that records deleted since had freed: it is
                # below the log start, in no one's log; write at the real end
                self.stats["below_log_start"] += 1
                self._checkpoints.reopen()
                if expected_offset is not None:
                    self._check_expected(expected_offset)
                uncertain = False
                continue
            if owner is Owner.OURS:
                self.stats["appends"] += 1
                self._known.end_seen(began)
                self._claims.record_append(summary)
                return AppendResult(
                    self._shared.topic.name, self._shared.partition, offset, batch.num_rows
                )
            if owner is Owner.THEIRS:
                self.stats["conflicts"] += 1
                self._listing.sync_tail()
                if self._known.end <= offset:
                    # the listing missed the segment that beat us (not a snapshot):
                    # follow the chain by HEAD instead of retrying the same key
                    self._listing.probe_tail()
                if identity.producer_id >= 0 and not identity.control:
                    # What won may be this very batch, written by an earlier send
                    # whose outcome was unknown and whose PUT landed late: decide by
                    # writer identity (producer id, epoch, sequence), not append id.
                    self._in_doubt.setdefault(identity.producer_id, offset)
                    duplicate = self._check_sequence(identity, batch.num_rows)
                    if duplicate is not None:
                        return duplicate
                if expected_offset is not None:
                    self._check_expected(expected_offset)
                uncertain = False  # our earlier attempts at that offset cannot land now
                if staging:
                    # none of our attempts can land now (each lost to another
                    # object): the batch is staged, and whoever wins commits it
                    self._staged.lost_race()
                    return self._staged.append(batch, identity, append_id)
                continue
            self._pause_or_give_up(sleeps, offset, uncertain=uncertain)

    def _pause_or_give_up(self, sleeps: Iterator[float], offset: int, *, uncertain: bool) -> None:
        """Wait before the next attempt at ``offset``, or, past the deadline,
        raise: the outcome is unknown if an attempt may have landed.

        Raises:
            AppendOutcomeUnknownError: past the deadline, ``uncertain``.
            TransientStoreError: past the deadline, nothing written.
        """
        pause = next(sleeps, None)
        if pause is not None:
            time.sleep(pause)
            return
        if uncertain:
            raise AppendOutcomeUnknownError(
                f"{self._shared.key(offset)}: gave up after the deadline; the last "
                "attempt may still have landed",
                offset=offset,
            )
        raise TransientStoreError(
            f"{self._shared.key(offset)}: store unavailable until the deadline",
            maybe_applied=False,
        )

    def _may_stage(self, expected_offset: int | None, identity: WriterIdentity) -> bool:
        """Whether this append may be staged if it loses a race: not with an
        expected offset (it lands exactly there or nowhere), not a marker, not
        a transaction's batch, and only if the connection allows it."""
        return (
            self._shared.config.staged_appends
            and expected_offset is None
            and not identity.control
            and not identity.transactional
        )

    def _check_expected(self, expected_offset: int) -> None:
        if expected_offset > self._known.end:
            # the listing may have stopped short of the real end: the error must
            # carry the end the log really has (a loader resumes from it)
            self._listing.probe_tail()
        if expected_offset != self._known.end:
            raise OffsetMismatchError(
                f"{self._shared.name}: expected offset {expected_offset} but the log ends at "
                f"{self._known.end}",
                expected_offset=expected_offset,
                log_end_offset=self._known.end,
            )

    def _encode(
        self,
        batch: pa.RecordBatch,
        offset: int,
        append_id: str,
        identity: WriterIdentity,
    ) -> tuple[memoryview, SegmentHeader]:
        header = SegmentHeader(
            base_offset=offset,
            record_count=batch.num_rows,
            timestamp_ms=int(time.time() * 1000),
            append_id=append_id,
            identity=identity,
        )
        compression = self._shared.topic.config.compression
        data, header = encode(batch, header, compression, stats=not identity.control)
        limit = self._shared.topic.config.max_batch_bytes
        if len(data) > limit:
            raise RecordBatchTooLargeError(
                f"batch encodes to {len(data)} bytes, over the topic's max_batch_bytes "
                f"({limit}); split it"
            )
        return data, header
