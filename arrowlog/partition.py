"""One partition's log: contiguous offsets claimed by put-if-absent.

The append protocol, and why it cannot leave gaps or overlaps
-------------------------------------------------------------
The object at ``segment_key(N)`` *is* the claim on offset N, and a writer only
ever writes at an offset where it knows a segment ends (or at the log start of
an empty partition). By induction the segments form one chain
``0 = b0 < b1 < ...`` with ``b[i+1] = b[i] + count[i]``: a write at the end of a
segment that is not the last finds the key taken and fails; a write at the end
of the last one extends the chain. Nothing else is ever written in
``segments/``. There is no "reserve, then write" step whose crash could leave a
hole. See docs/protocol.md for the whole argument.

A lost reply is resolved by reading back what sits at the offset and comparing
its ``append_id`` with ours, never by retrying blindly, so an acknowledged batch
is in the log exactly once.
"""

from __future__ import annotations

import bisect
import collections
import enum
import functools
import threading
import time
import uuid
import warnings
from collections.abc import Callable, Generator, Iterator
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass
from typing import TypeVar

import pyarrow as pa

from arrowlog.checkpoint import (
    Checkpoint,
    Decision,
    OpenTxn,
    PartitionState,
    ProducerEntry,
    SegmentSummary,
    advance,
)
from arrowlog.config import MAX_OFFSET, LogConfig, RetryPolicy
from arrowlog.control import ControlType, marker_batch
from arrowlog.errors import (
    AppendOutcomeUnknownError,
    ArrowLogError,
    CorruptCheckpointError,
    CorruptSegmentError,
    DuplicateSequenceError,
    InvalidBatchError,
    OffsetMismatchError,
    OffsetOutOfRangeError,
    OutOfOrderSequenceError,
    ProducerFencedError,
    RecordBatchTooLargeError,
    SchemaMismatchError,
    SegmentNotFoundError,
    TransientStoreError,
)
from arrowlog.segment import (
    HEAD_BYTES,
    PLAIN_APPEND,
    SegmentHeader,
    WriterIdentity,
    decode_segment,
    empty_batch,
    encode_segment,
    read_header,
    segment_size_floor,
)
from arrowlog.storage import ObjectInfo, Store
from arrowlog.topic import (
    Topic,
    checkpoint_key,
    checkpoint_prefix,
    not_null_violations,
    parse_checkpoint_key,
    parse_segment_key,
    segment_key,
    segment_prefix,
)

T = TypeVar("T")
#: more than a real segment header can add to the shortest one (ids, offsets,
#: a transactional id of up to 249 characters, the timestamp)
_HEADER_SLACK = 1024

#: How long a producer's latest batch is remembered after it was written (Kafka's
#: producer.id.expiration.ms is a day; transactional ids live 7 days).
PRODUCER_STATE_RETENTION_MS = 7 * 24 * 3600 * 1000
#: Segment headers a sync reads at once (in parallel).
_HEADER_READS = 8


@dataclass(frozen=True, slots=True)
class AppendResult:
    """Where an appended batch landed: offsets ``[base_offset, next_offset)``."""

    topic: str
    partition: int
    base_offset: int
    record_count: int

    @property
    def next_offset(self) -> int:
        return self.base_offset + self.record_count


@dataclass(frozen=True, slots=True)
class SegmentRef:
    """A segment known from the index: offsets ``[base, end)``, ``size`` bytes."""

    key: str
    base: int
    end: int
    size: int


class _Owner(enum.Enum):
    """Who holds an offset, as read back after an ambiguous write."""

    OURS = "ours"
    THEIRS = "theirs"
    NOBODY = "nobody"


class PartitionLog:
    """Appends to and reads from one partition. Thread-safe; one instance per
    partition per process is enough (``ArrowLog.partition`` caches them).

    ``decide`` (given by the ArrowLog) asks the coordinator log how a transaction
    ended; checkpoints use it to drop decided transactions from their open set.
    """

    def __init__(
        self,
        store: Store,
        topic: Topic,
        partition: int,
        config: LogConfig,
        *,
        decide: Callable[[OpenTxn], Decision] | None = None,
    ) -> None:
        self._store = store
        self._topic = topic
        self._partition = topic.check_partition(partition)
        self._config = config
        self._decide = decide
        self._interval = topic.config.checkpoint_interval
        self._lock = threading.RLock()
        self._opened = False
        self._log_start = 0
        # Everything known about the log since the newest known checkpoint: the
        # next checkpoint window starts at _window_start, where the partition state
        # was _base_state; _tail holds (base, size) of every segment from there to
        # _end, in order (a chain: each starts where the one before ends);
        # _summaries the header of each of those segments, read or written.
        self._window_start = 0
        self._base_state = PartitionState()
        self._tail: list[tuple[int, int]] = []
        self._summaries: dict[int, SegmentSummary] = {}
        self._end = 0
        self._last_base: int | None = None
        self._last_checkpoint: Checkpoint | None = None
        # The latest batch of each producer that wrote through this object, and the
        # producers whose last append ended with an unknown outcome.
        self._own: dict[int, ProducerEntry] = {}
        self._in_doubt: set[int] = set()
        #: Counters since this object was made: appends, lost races (conflicts),
        #: replies lost or failed writes resolved by reading back (ambiguous).
        self.stats: collections.Counter[str] = collections.Counter()

    # --- state --------------------------------------------------------------------

    @property
    def topic(self) -> Topic:
        return self._topic

    @property
    def partition(self) -> int:
        return self._partition

    def _retry(self, call: Callable[[], T]) -> T:
        """Run a read-only request, retrying transient failures until the deadline."""
        return self._config.retry.call(call)

    def _ensure_open(self) -> bool:
        """Open the partition if not yet open; True if it was opened just now
        (and so is fresh: no need to list the tail again)."""
        if self._opened:
            return False
        self._open()
        return True

    def _open(self) -> None:
        """Read the newest usable checkpoint, then list the segments after it."""
        self._tail = []
        self._summaries = {}
        self._last_checkpoint = None
        self._last_base = None
        self._base_state = PartitionState()
        self._window_start = self._end = self._log_start = 0
        cp = self._newest_checkpoint()
        if cp is not None:
            self._last_checkpoint = cp
            self._log_start = cp.log_start
            self._window_start = self._end = cp.end
            self._base_state = cp.state.copy()
            self._last_base = cp.segments[-1].base
        self._opened = True
        self._sync_tail()

    def _newest_checkpoint(self) -> Checkpoint | None:
        """The newest checkpoint that reads back intact; None if there is none.

        A corrupt one is skipped with a warning, for the next older one (and
        then the log start): a checkpoint only saves work. The segments it
        summarised are read instead, each checked by its own checksums. Each
        checkpoint skipped costs one more LIST and GET.
        """
        prefix = checkpoint_prefix(self._topic.name, self._partition)

        def first_after(key: str | None) -> list[ObjectInfo]:
            return list(self._store.list(prefix, start_after=key, limit=1))

        after: str | None = None
        while found := self._retry(functools.partial(first_after, after)):
            after = found[0].key
            start = parse_checkpoint_key(after)
            try:
                if start is None:
                    raise CorruptCheckpointError("not a checkpoint name", key=after)
                return self._load_checkpoint(start)
            except (CorruptCheckpointError, FileNotFoundError) as e:
                _warn_skipped(after, e, "opening from an older one or the log start")
        return None

    def _load_checkpoint(self, start: int) -> Checkpoint:
        key = checkpoint_key(self._topic.name, self._partition, start)
        raw = self._retry(lambda: self._store.get(key))
        return Checkpoint.from_json(raw, key=key, start=start)

    def _load_window(self, start: int) -> Checkpoint:
        """The checkpoint of the window starting at ``start``, for reading. If it
        is corrupt (or gone), the window is rebuilt from its segments' headers,
        with a warning: one LIST and ``checkpoint_interval`` ranged GETs. The
        rebuilt one has no partition state: reads use only its segments."""
        try:
            return self._load_checkpoint(start)
        except (CorruptCheckpointError, FileNotFoundError) as e:
            key = checkpoint_key(self._topic.name, self._partition, start)
            _warn_skipped(key, e, "reading its segments' headers instead")
        prefix = segment_prefix(self._topic.name, self._partition)
        after = None if start == 0 else self._key(start - 1)
        found = self._retry(
            lambda: list(self._store.list(prefix, start_after=after, limit=self._interval))
        )
        listed = [
            (b, info.size) for info in found if (b := parse_segment_key(info.key)) is not None
        ]
        window = self._chain_from(start, listed)
        if len(window) < self._interval:
            raise SegmentNotFoundError(
                f"checkpoint window at {start} is corrupt and its segments are not all there",
                key=self._key(window[-1].end if window else start),
            )
        return Checkpoint(log_start=self._log_start, start=start, end=window[-1].end,
                          segments=tuple(window), state=PartitionState())  # fmt: skip

    def _sync_tail(self) -> bool:
        """List the segments from the last known one on; True if the log grew.

        A listing is not a snapshot: racing appends, it can show segment N+1
        without N. So a listed segment counts only if it starts where the one
        before it ends, by that one's header; from the first gap on, keys are
        "not visible yet": ignored now, never cached, listed again next time.

        The listing starts just before the last known segment, so that segment
        is in it: if it is gone, the log lost records this client (or the
        checkpoint it opened from) saw, and appending at its end would reuse
        their offsets.

        Cost: one LIST, plus one ranged GET (of at most ``HEAD_BYTES``) per new
        segment, in parallel. No fewer is sound: only a header tells where its
        segment ends, so each link of the chain needs the header before it. A
        writer reads each header at most once (it is kept for the checkpoint).
        """
        last = self._last_base
        after = None if last is None or last == 0 else self._key(last - 1)
        prefix = segment_prefix(self._topic.name, self._partition)
        found = self._retry(lambda: list(self._store.list(prefix, start_after=after)))
        listed = [
            (b, info.size) for info in found if (b := parse_segment_key(info.key)) is not None
        ]
        if last is not None:
            if listed and listed[0][0] == last:
                del listed[0]
            elif not self._exists(last):
                # the listing may just have missed it (not a snapshot): only a
                # HEAD that finds nothing says it is gone
                raise SegmentNotFoundError(
                    f"segment missing: the log was known to reach offset {self._end} "
                    "through it; its records are lost",
                    key=self._key(last),
                )
        chain = self._chain_from(self._end, listed)
        if not chain:
            return False
        for summary in chain:
            self._tail.append((summary.base, summary.size))
            self._summaries[summary.base] = summary
        self._end = chain[-1].end
        self._last_base = chain[-1].base
        return True

    def _exists(self, base: int) -> bool:
        key = self._key(base)
        try:
            self._retry(lambda: self._store.head(key))
        except FileNotFoundError:
            return False
        return True

    def _chain_from(self, end: int, listed: list[tuple[int, int]]) -> list[SegmentSummary]:
        """The listed ``(base, size)`` segments that continue the chain from
        ``end``, up to the first gap; headers read a few at a time in parallel."""
        chain: list[SegmentSummary] = []
        for i in range(0, len(listed), _HEADER_READS):
            batch = listed[i : i + _HEADER_READS]
            if batch[0][0] != end:
                return chain  # a gap: read no header past it
            headers = self._read_headers([base for base, _ in batch])
            for (base, size), header in zip(batch, headers, strict=True):
                if base != end or isinstance(header, FileNotFoundError):
                    return chain  # a gap, or a key gone since the listing
                if isinstance(header, BaseException):
                    raise header  # a corrupt segment in the chain is never skipped
                chain.append(SegmentSummary.of(header, size))
                end = header.next_offset
        return chain

    def _read_headers(self, bases: list[int]) -> list[SegmentHeader | BaseException]:
        """The headers of ``bases`` read in parallel, each or its error."""

        def read(base: int) -> SegmentHeader | BaseException:
            try:
                return self._read_header(base)
            except (ArrowLogError, FileNotFoundError) as e:
                return e

        if len(bases) == 1:
            return [read(bases[0])]
        with ThreadPoolExecutor(max_workers=len(bases), thread_name_prefix="arrowlog-head") as pool:
            return list(pool.map(read, bases))

    def _key(self, offset: int) -> str:
        return segment_key(self._topic.name, self._partition, offset)

    def _read_header(self, base: int) -> SegmentHeader:
        key = self._key(base)
        head = self._retry(lambda: self._store.get_range(key, 0, HEAD_BYTES))
        header = read_header(head, key=key)
        if isinstance(header, int):
            need = header
            head = self._retry(lambda: self._store.get_range(key, 0, need))
            header = read_header(head, key=key)
            if isinstance(header, int):
                raise CorruptSegmentError("segment truncated inside its schema", key=key)
        if header.base_offset != base:
            raise CorruptSegmentError(f"segment says it starts at {header.base_offset}", key=key)
        return header

    def _tail_summaries(self, upto: int | None = None) -> list[SegmentSummary]:
        """Summaries of the tail segments (the first ``upto``). All are known: a
        sync reads the header of every segment it adds to the chain."""
        wanted = self._tail if upto is None else self._tail[:upto]
        return [self._summaries[base] for base, _ in wanted]

    def end_offset(self, *, refresh: bool = True, complete: bool = False) -> int:
        """The high watermark: the offset the next append lands at. With
        ``complete``, at least every append acknowledged before the call (see
        :meth:`_probe_tail`); otherwise a listing may have missed the newest."""
        with self._lock:
            if not self._ensure_open() and refresh:
                self._sync_tail()
            if complete:
                self._probe_tail()
            return self._end

    def start_offset(self) -> int:
        """The log start offset: the first offset still readable."""
        with self._lock:
            self._ensure_open()
            return self._log_start

    def state(self, *, refresh: bool = True, complete: bool = False) -> tuple[int, PartitionState]:
        """The high watermark and the partition state there: the latest batch of
        every producer, and the transactions with data but no marker. With
        ``complete``, as :meth:`end_offset`."""
        with self._lock:
            if not self._ensure_open() and refresh:
                self._sync_tail()
            if complete:
                self._probe_tail()
            return self._end, advance(self._base_state, self._tail_summaries())

    def _probe_tail(self) -> None:
        """Follow the chain past the listing, object by object: a listing racing
        appends may stop short of segments already written (a gap is "not
        visible yet" to it), but a HEAD of the key at the known end sees any
        completed write. One HEAD when nothing follows; a HEAD and a header read
        per segment the listing missed. Where the end must cover everything
        acknowledged before (a transaction's bound, a snapshot's views), not
        just what a listing showed."""
        while True:
            key = self._key(self._end)
            try:
                info = self._retry(functools.partial(self._store.head, key))
            except FileNotFoundError:
                return
            summary = SegmentSummary.of(self._read_header(self._end), info.size)
            self._tail.append((summary.base, summary.size))
            self._summaries[summary.base] = summary
            self._end = summary.end
            self._last_base = summary.base

    # --- appends ------------------------------------------------------------------

    def prepare_batch(self, batch: pa.RecordBatch | pa.Table) -> pa.RecordBatch:
        """Check a batch against the topic and return it as one record batch with
        the topic's exact schema.

        Every check here is cheap (no data is copied or encoded), so a producer can
        call this before it writes anything for the batch (a coordinator entry).

        Raises:
            InvalidBatchError: not Arrow data, or empty.
            SchemaMismatchError: columns, types or nullability differ from the
                topic, or a not-null column (or struct or list child) holds nulls.
            RecordBatchTooLargeError: the batch's segment would exceed the topic's
                ``max_batch_bytes`` (checked again, exactly, when it is encoded).
        """
        if isinstance(batch, pa.Table):
            table = batch.combine_chunks()
            batch = table.to_batches()[0] if table.num_rows else empty_batch(table.schema)
        if not isinstance(batch, pa.RecordBatch):
            raise InvalidBatchError(
                f"expected a pyarrow RecordBatch or Table, got {type(batch).__name__}"
            )
        schema = self._topic.schema
        if not batch.schema.equals(schema, check_metadata=False):
            raise SchemaMismatchError(_describe_mismatch(self._topic.name, schema, batch.schema))
        if batch.num_rows == 0:
            raise InvalidBatchError("empty batch: a segment holds at least one record")
        # Equal schemas say nothing of the data: nulls can sit under a not-null field.
        problems = not_null_violations(schema, batch)
        if problems:
            raise SchemaMismatchError(
                f"batch for topic {self._topic.name!r}: " + "; ".join(problems)
            )
        batch = pa.RecordBatch.from_arrays(batch.columns, schema=schema)
        size = segment_size_floor(batch)
        limit = self._topic.config.max_batch_bytes
        if size > limit:
            raise RecordBatchTooLargeError(
                f"batch encodes to at least {size} bytes, over the topic's max_batch_bytes "
                f"({limit}); split it"
            )
        return batch

    def check_fits(self, batch: pa.RecordBatch, identity: WriterIdentity) -> None:
        """Refuse a prepared batch whose segment would exceed ``max_batch_bytes``
        wherever it lands. :meth:`prepare_batch` checks a lower bound; within a
        header's length of the limit this encodes the batch once, at the largest
        offset, to be sure before anything is written elsewhere (a transaction
        registering the partition).

        Raises:
            RecordBatchTooLargeError: the segment would be too large.
        """
        if segment_size_floor(batch) + _HEADER_SLACK <= self._topic.config.max_batch_bytes:
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
        return self._append(self.prepare_batch(batch), expected_offset, identity)

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
        return self._append(marker_batch(kind, entry), None, marker)

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
                log_end_offset=self.end_offset(refresh=False),
            )

    def _append(
        self, batch: pa.RecordBatch, expected_offset: int | None, identity: WriterIdentity
    ) -> AppendResult:
        self.check_expected_offset(expected_offset)
        append_id = uuid.uuid4().hex
        with self._lock:
            self._ensure_open()
            if identity.producer_id >= 0 and not identity.control:
                duplicate = self._check_sequence(identity, batch.num_rows)
                if duplicate is not None:
                    return duplicate
            if expected_offset is not None and expected_offset != self._end:
                self._sync_tail()
                self._check_expected(expected_offset)
            try:
                result = self._put_at_end(batch, expected_offset, identity, append_id)
            except AppendOutcomeUnknownError:
                if identity.producer_id >= 0:
                    self._in_doubt.add(identity.producer_id)
                raise
            if identity.producer_id >= 0 and not identity.control:
                self._own[identity.producer_id] = ProducerEntry(
                    identity.producer_id, identity.producer_epoch, identity.base_sequence,
                    batch.num_rows, result.base_offset, int(time.time() * 1000),
                )  # fmt: skip
                self._in_doubt.discard(identity.producer_id)
            return result

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
            self._sync_tail()
            latest = advance(self._base_state, self._tail_summaries()).producers.get(pid)
        if latest is None:
            if who.base_sequence != 0:
                raise OutOfOrderSequenceError(
                    f"producer {pid} has no batch in {self._name}; its first must have "
                    f"sequence 0, not {who.base_sequence}"
                )
            return None
        if who.producer_epoch < latest.producer_epoch:
            raise ProducerFencedError(
                f"producer {pid} epoch {who.producer_epoch} is older than epoch "
                f"{latest.producer_epoch} already in {self._name}"
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
            self._in_doubt.discard(pid)
            return AppendResult(self._topic.name, self._partition, latest.base_offset, count)
        if who.base_sequence <= latest.last_sequence:
            raise DuplicateSequenceError(
                f"producer {pid} sequence {who.base_sequence} in {self._name} was written "
                f"before (latest batch: sequences {latest.base_sequence}..{latest.last_sequence})"
            )
        raise OutOfOrderSequenceError(
            f"producer {pid} sequence {who.base_sequence} in {self._name} leaves a gap after "
            f"{latest.last_sequence}"
        )

    @property
    def _name(self) -> str:
        return f"{self._topic.name}/{self._partition}"

    def _put_at_end(
        self,
        batch: pa.RecordBatch,
        expected_offset: int | None,
        identity: WriterIdentity,
        append_id: str,
    ) -> AppendResult:
        offset = self._end
        data, header = self._encode(batch, offset, append_id, identity)
        sleeps = self._config.retry.sleeps()
        uncertain = False
        while True:
            if offset != self._end:  # lost a race: move to the new end
                offset = self._end
                data, header = self._encode(batch, offset, append_id, identity)
            owner, maybe_applied = self._try_put(offset, data, append_id)
            uncertain = uncertain or maybe_applied
            if maybe_applied:
                self.stats["ambiguous"] += 1
            if owner is _Owner.OURS:
                self.stats["appends"] += 1
                self._record_append(SegmentSummary.of(header, len(data)))
                return AppendResult(self._topic.name, self._partition, offset, batch.num_rows)
            if owner is _Owner.THEIRS:
                self.stats["conflicts"] += 1
                self._sync_tail()
                if self._end <= offset:
                    # the listing missed the segment that beat us (not a snapshot):
                    # follow the chain by HEAD instead of retrying the same key
                    self._probe_tail()
                if identity.producer_id >= 0 and not identity.control:
                    # What won may be this very batch, written by an earlier send
                    # whose outcome was unknown and whose PUT landed late: decide by
                    # writer identity (producer id, epoch, sequence), not append id.
                    self._in_doubt.add(identity.producer_id)
                    duplicate = self._check_sequence(identity, batch.num_rows)
                    if duplicate is not None:
                        return duplicate
                if expected_offset is not None:
                    self._check_expected(expected_offset)
                uncertain = False  # our earlier attempts at that offset cannot land now
                continue
            pause = next(sleeps, None)
            if pause is None:
                if uncertain:
                    raise AppendOutcomeUnknownError(
                        f"{self._key(offset)}: gave up after the deadline; the last "
                        "attempt may still have landed",
                        offset=offset,
                    )
                raise TransientStoreError(
                    f"{self._key(offset)}: store unavailable until the deadline",
                    maybe_applied=False,
                )
            time.sleep(pause)

    def _check_expected(self, expected_offset: int) -> None:
        if expected_offset > self._end:
            # the listing may have stopped short of the real end: the error must
            # carry the end the log really has (a loader resumes from it)
            self._probe_tail()
        if expected_offset != self._end:
            raise OffsetMismatchError(
                f"{self._name}: expected offset {expected_offset} but the log ends at {self._end}",
                expected_offset=expected_offset,
                log_end_offset=self._end,
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
        data = encode_segment(batch, header)
        limit = self._topic.config.max_batch_bytes
        if len(data) > limit:
            raise RecordBatchTooLargeError(
                f"batch encodes to {len(data)} bytes, over the topic's max_batch_bytes "
                f"({limit}); split it"
            )
        return data, header

    def _try_put(self, offset: int, data: memoryview, append_id: str) -> tuple[_Owner, bool]:
        """One put-if-absent attempt, and who holds the offset afterwards.

        Returns the owner (NOBODY means: try again) and whether this attempt
        may have been applied without our knowing.
        """
        key = self._key(offset)
        try:
            self._store.put_if_absent(key, data)
        except FileExistsError:
            # Ours if an earlier attempt of this very append landed unseen (the S3
            # client retries internally too, so always read back).
            return self._owner(offset, append_id), False
        except TransientStoreError as e:
            if not e.maybe_applied:
                return _Owner.NOBODY, False
            return self._owner(offset, append_id), True
        return _Owner.OURS, False

    def _owner(self, offset: int, append_id: str) -> _Owner:
        """Read back what sits at ``offset``.

        Raises:
            AppendOutcomeUnknownError: the store stayed unavailable until the deadline.
        """
        try:
            header = self._read_header(offset)
        except FileNotFoundError:
            return _Owner.NOBODY
        except TransientStoreError as e:
            raise AppendOutcomeUnknownError(
                f"{self._key(offset)}: cannot read back the outcome of an append: {e}",
                offset=offset,
            ) from e
        return _Owner.OURS if header.append_id == append_id else _Owner.THEIRS

    def _record_append(self, summary: SegmentSummary) -> None:
        self._tail.append((summary.base, summary.size))
        self._summaries[summary.base] = summary
        self._end = summary.end
        self._last_base = summary.base
        self._write_due_checkpoints()

    def _write_due_checkpoints(self) -> None:
        """Write the checkpoint of every complete window we know of. Best effort:
        a checkpoint only saves work, so a failure here never fails an append."""
        while len(self._tail) >= self._interval:
            try:
                window = self._tail_summaries(self._interval)
                state = advance(self._base_state, window)
                if self._decide is not None:
                    state.forget_decided(self._decide)
            except ArrowLogError:
                return  # store or coordinator unavailable: the next append tries again
            state.forget_producers_before(window[-1].timestamp_ms - PRODUCER_STATE_RETENTION_MS)
            cp = Checkpoint(
                log_start=self._log_start,
                start=self._window_start,
                end=window[-1].end,
                segments=tuple(window),
                state=state,
            )
            key = checkpoint_key(self._topic.name, self._partition, cp.start)
            try:
                self._store.put_if_absent(key, cp.to_json())
            except FileExistsError:
                pass  # another writer wrote the same window
            except TransientStoreError:
                return
            self._last_checkpoint = cp
            self._window_start = cp.end
            self._base_state = state
            for base, _ in self._tail[: self._interval]:
                self._summaries.pop(base, None)
            del self._tail[: self._interval]

    # --- reads --------------------------------------------------------------------

    def _resolve_range(self, start: int | None, end: int | None) -> tuple[int, int]:
        if not self._ensure_open() and (end is None or end > self._end):
            self._sync_tail()
        start = self._log_start if start is None else start
        end = self._end if end is None else end
        for name, value in (("start", start), ("end", end)):
            if isinstance(value, bool) or not isinstance(value, int):
                raise OffsetOutOfRangeError(f"{name} offset must be an int, got {value!r}")
        if start < self._log_start:
            raise OffsetOutOfRangeError(
                f"{self._name}: offset {start} is below the log start {self._log_start}"
            )
        if end > self._end or start > end:
            raise OffsetOutOfRangeError(
                f"{self._name}: range [{start}, {end}) is outside the log "
                f"[{self._log_start}, {self._end})"
            )
        return start, end

    def segments(self, start: int | None = None, end: int | None = None) -> list[SegmentRef]:
        """The segments that hold offsets ``[start, end)`` (default: the whole log).

        Raises:
            OffsetOutOfRangeError: the range is not inside the log.
        """
        return self._plan(start, end)[2]

    def summaries(self, start: int | None = None, end: int | None = None) -> list[SegmentSummary]:
        """Header summaries of the segments holding ``[start, end)``: from
        checkpoints where they cover the range, else from the segments' heads."""
        with self._lock:
            start, end = self._resolve_range(start, end)
            out: list[SegmentSummary] = []
            if start >= end:
                return out
            for cp in self._checkpoints_from(start):
                out.extend(s for s in cp.segments if s.end > start and s.base < end)
            tail = [s for s in self._tail_summaries() if s.end > start and s.base < end]
            return out + tail

    def _checkpoints_from(self, start: int) -> Iterator[Checkpoint]:
        """The checkpoint windows from the one holding ``start`` to the newest."""
        if start >= self._window_start:
            return
        last = self._last_checkpoint
        cp = (
            last
            if last is not None and last.start <= start < last.end
            else self._checkpoint_covering(start)
        )
        while True:
            yield cp
            if cp.end >= self._window_start:
                return
            cp = self._load_window(cp.end)

    def _plan(self, start: int | None, end: int | None) -> tuple[int, int, list[SegmentRef]]:
        with self._lock:
            start, end = self._resolve_range(start, end)
            refs: list[SegmentRef] = []
            if start < end:
                for ref in self._refs_from(start):
                    if ref.base >= end:
                        break
                    refs.append(ref)
            return start, end, refs

    def _refs_from(self, start: int) -> Iterator[SegmentRef]:
        """Segments in order, from the one holding ``start`` to the known end."""
        offset = start
        for cp in self._checkpoints_from(start):
            yield from _window_refs(
                self._topic.name, self._partition, cp.bases,
                tuple(s.size for s in cp.segments), cp.end, offset,
            )  # fmt: skip
            offset = cp.end
        bases = [b for b, _ in self._tail]
        sizes = [s for _, s in self._tail]
        if bases and offset < self._end:
            yield from _window_refs(
                self._topic.name, self._partition, bases, sizes, self._end, offset
            )

    def _checkpoint_covering(self, offset: int) -> Checkpoint:
        # Checkpoint keys are inverted: the first key at or after checkpoint_key(offset)
        # is the window with the greatest start <= offset.
        prefix = checkpoint_prefix(self._topic.name, self._partition)
        after = checkpoint_key(self._topic.name, self._partition, offset + 1)
        found = self._retry(lambda: list(self._store.list(prefix, start_after=after, limit=1)))
        start = parse_checkpoint_key(found[0].key) if found else None
        # A listing is not a snapshot: it may have missed the window wanted (and
        # shown an older one, or none). Windows are contiguous from the log start:
        # follow them by key from what it showed.
        cp = self._load_window(self._log_start if start is None else start)
        while cp.end <= offset:
            cp = self._load_window(cp.end)
        if not cp.start <= offset:
            raise CorruptCheckpointError(f"checkpoint does not cover offset {offset}", key=prefix)
        return cp

    def iter_segments(
        self,
        start: int | None = None,
        end: int | None = None,
        *,
        skip: Callable[[SegmentRef], bool] | None = None,
    ) -> Generator[tuple[SegmentHeader, pa.RecordBatch], None, None]:
        """Stream ``(header, batch)`` for offsets ``[start, end)``: each batch is
        the part of its segment inside the range. Up to ``read_ahead`` segments
        are fetched in parallel; memory stays bounded however long the range.
        Segments for which ``skip`` is true are not fetched at all.

        Raises:
            OffsetOutOfRangeError: the range is not inside the log.
            CorruptSegmentError: a segment fails its checksum.
            SegmentNotFoundError: a segment of the range is gone.
        """
        start, end, refs = self._plan(start, end)
        if skip is not None:
            refs = [ref for ref in refs if not skip(ref)]
        ahead = self._config.read_ahead
        if ahead is None:
            ahead = 1 if self._store.url.startswith(("file:", "memory:")) else 8
        if ahead == 1:
            for ref in refs:
                yield _cut(self._fetch(ref), ref, start, end)
            return
        pool = ThreadPoolExecutor(max_workers=ahead, thread_name_prefix="arrowlog-read")
        pending: collections.deque[Future[tuple[SegmentHeader, pa.RecordBatch]]] = (
            collections.deque()
        )
        try:
            queue = iter(refs)
            for ref in queue:
                pending.append(pool.submit(self._fetch, ref))
                if len(pending) >= ahead:
                    break
            for ref in refs:
                item = pending.popleft().result()
                for nxt in queue:
                    pending.append(pool.submit(self._fetch, nxt))
                    break
                yield _cut(item, ref, start, end)
        finally:
            for future in pending:
                future.cancel()
            pool.shutdown(wait=False, cancel_futures=True)

    def _fetch(self, ref: SegmentRef) -> tuple[SegmentHeader, pa.RecordBatch]:
        return fetch_segment(self._store, ref.key, ref.base, ref.end, self._config.retry)

    def iter_batches(
        self, start: int | None = None, end: int | None = None
    ) -> Generator[pa.RecordBatch, None, None]:
        """Stream the records of ``[start, end)`` as record batches, every record
        as written (read_uncommitted; control records left out)."""
        for header, batch in self.iter_segments(start, end):
            if not header.identity.control:
                yield batch

    def read(self, start: int | None = None, end: int | None = None) -> pa.Table:
        """The records of ``[start, end)`` as one table (read_uncommitted)."""
        return pa.Table.from_batches(list(self.iter_batches(start, end)), schema=self._topic.schema)


def fetch_segment(
    store: Store, key: str, base: int, end: int, retry: RetryPolicy | None = None
) -> tuple[SegmentHeader, pa.RecordBatch]:
    """Read and check one segment that the index says holds ``[base, end)``.

    Raises:
        CorruptSegmentError: checksum mismatch, or offsets other than the index's.
        SegmentNotFoundError: the segment is gone.
    """
    try:
        data = (retry or RetryPolicy()).call(lambda: store.get(key))
    except FileNotFoundError:
        raise SegmentNotFoundError(
            f"segment missing: the log says it holds [{base}, {end}); its records are lost",
            key=key,
        ) from None
    header, batch = decode_segment(data, key=key)
    if header.base_offset != base or header.next_offset != end:
        raise CorruptSegmentError(
            f"segment holds [{header.base_offset}, {header.next_offset}), the log says "
            f"[{base}, {end})",
            key=key,
        )
    return header, batch


def _window_refs(
    topic: str,
    partition: int,
    bases: list[int] | tuple[int, ...],
    sizes: list[int] | tuple[int, ...],
    end: int,
    offset: int,
) -> Iterator[SegmentRef]:
    first = max(0, bisect.bisect_right(bases, offset) - 1)
    for i in range(first, len(bases)):
        nxt = bases[i + 1] if i + 1 < len(bases) else end
        yield SegmentRef(segment_key(topic, partition, bases[i]), bases[i], nxt, sizes[i])


def _cut(
    item: tuple[SegmentHeader, pa.RecordBatch], ref: SegmentRef, start: int, end: int
) -> tuple[SegmentHeader, pa.RecordBatch]:
    header, batch = item
    lo = max(start, ref.base) - ref.base
    hi = min(end, ref.end) - ref.base
    if lo == 0 and hi == batch.num_rows:
        return header, batch
    return header, batch.slice(lo, hi - lo)


def _warn_skipped(key: str, error: BaseException, instead: str) -> None:
    reason = f"{key}: gone" if isinstance(error, FileNotFoundError) else str(error)
    warnings.warn(
        f"skipping an unusable checkpoint: {reason}; {instead}", RuntimeWarning, stacklevel=2
    )


def _describe_mismatch(topic: str, want: pa.Schema, got: pa.Schema) -> str:
    problems = [
        f"duplicate column {n!r}" for n in dict.fromkeys(got.names) if got.names.count(n) > 1
    ]
    want_fields = {f.name: f for f in want}
    got_fields = {f.name: f for f in got}
    for name in want.names:
        if name not in got_fields:
            problems.append(f"missing column {name!r}")
        elif not got_fields[name].equals(want_fields[name]):
            problems.append(f"column {name!r} is {got_fields[name]}, topic has {want_fields[name]}")
    problems += [
        f"unexpected column {n!r}" for n in dict.fromkeys(got.names) if n not in want_fields
    ]
    if not problems and want.names != got.names:
        problems.append(f"column order {got.names} differs from the topic's {want.names}")
    return f"batch does not match the schema of topic {topic!r}: " + "; ".join(problems)
