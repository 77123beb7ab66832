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
import threading
import time
import uuid
from collections.abc import Callable, Generator, Iterator
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass
from typing import TypeVar

import pyarrow as pa

from arrowlog.checkpoint import Checkpoint
from arrowlog.config import MAX_OFFSET, LogConfig
from arrowlog.errors import (
    AppendOutcomeUnknownError,
    CorruptCheckpointError,
    CorruptSegmentError,
    InvalidBatchError,
    OffsetMismatchError,
    OffsetOutOfRangeError,
    RecordBatchTooLargeError,
    SchemaMismatchError,
    TransientStoreError,
)
from arrowlog.segment import (
    HEAD_BYTES,
    PLAIN_APPEND,
    SegmentHeader,
    WriterIdentity,
    decode_segment,
    encode_segment,
    read_header,
)
from arrowlog.storage import Store
from arrowlog.topic import (
    Topic,
    checkpoint_key,
    checkpoint_prefix,
    parse_checkpoint_key,
    parse_segment_key,
    segment_key,
    segment_prefix,
)

T = TypeVar("T")


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
    partition per process is enough (``ArrowLog.partition`` caches them)."""

    def __init__(self, store: Store, topic: Topic, partition: int, config: LogConfig) -> None:
        self._store = store
        self._topic = topic
        self._partition = topic.check_partition(partition)
        self._config = config
        self._interval = topic.config.checkpoint_interval
        self._lock = threading.RLock()
        self._opened = False
        self._log_start = 0
        # Everything known about the log since the newest known checkpoint: the
        # next checkpoint window starts at _window_start; _tail holds (base, size)
        # of every segment from there to _end, in order.
        self._window_start = 0
        self._tail: list[tuple[int, int]] = []
        self._end = 0
        self._last_base: int | None = None
        self._last_checkpoint: Checkpoint | None = None
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
        sleeps = self._config.retry.sleeps()
        while True:
            try:
                return call()
            except TransientStoreError:
                pause = next(sleeps, None)
                if pause is None:
                    raise
                time.sleep(pause)

    def _ensure_open(self) -> bool:
        """Open the partition if not yet open; True if it was opened just now
        (and so is fresh: no need to list the tail again)."""
        if self._opened:
            return False
        self._open()
        return True

    def _open(self) -> None:
        """Read the newest checkpoint, then list the segments after it."""
        newest = self._retry(
            lambda: list(
                self._store.list(checkpoint_prefix(self._topic.name, self._partition), limit=1)
            )
        )
        self._tail = []
        self._last_checkpoint = None
        self._last_base = None
        self._window_start = self._end = self._log_start = 0
        if newest:
            start = parse_checkpoint_key(newest[0].key)
            if start is None:
                raise CorruptCheckpointError("not a checkpoint name", key=newest[0].key)
            cp = self._load_checkpoint(start)
            self._last_checkpoint = cp
            self._log_start = cp.log_start
            self._window_start = self._end = cp.end
            self._last_base = cp.bases[-1]
        self._opened = True
        self._sync_tail()

    def _load_checkpoint(self, start: int) -> Checkpoint:
        key = checkpoint_key(self._topic.name, self._partition, start)
        raw = self._retry(lambda: self._store.get(key))
        return Checkpoint.from_json(raw, key=key, start=start)

    def _sync_tail(self) -> bool:
        """List segments after the last known one; True if the log grew."""
        after = None if self._last_base is None else self._key(self._last_base)
        prefix = segment_prefix(self._topic.name, self._partition)
        found = self._retry(lambda: list(self._store.list(prefix, start_after=after)))
        new = [
            (base, info.size) for info in found if (base := parse_segment_key(info.key)) is not None
        ]
        if not new:
            return False
        if new[0][0] != self._end:
            raise CorruptSegmentError(
                f"log chain broken: expected the next segment at offset {self._end}",
                key=self._key(new[0][0]),
            )
        last_base = new[-1][0]
        header = self._read_header(last_base)
        self._tail.extend(new)
        self._end = header.next_offset
        self._last_base = last_base
        return True

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

    def end_offset(self, *, refresh: bool = True) -> int:
        """The high watermark: the offset the next append lands at."""
        with self._lock:
            if not self._ensure_open() and refresh:
                self._sync_tail()
            return self._end

    def start_offset(self) -> int:
        """The log start offset: the first offset still readable."""
        with self._lock:
            self._ensure_open()
            return self._log_start

    # --- appends ------------------------------------------------------------------

    def prepare_batch(self, batch: pa.RecordBatch | pa.Table) -> pa.RecordBatch:
        """Check a batch against the topic and return it as one record batch with
        the topic's exact schema.

        Raises:
            InvalidBatchError: not Arrow data, or empty.
            SchemaMismatchError: columns, types or nullability differ from the topic.
        """
        if isinstance(batch, pa.Table):
            batch = batch.combine_chunks()
            batch = (
                batch.to_batches()[0]
                if batch.num_rows
                else pa.RecordBatch.from_pylist([], batch.schema)
            )
        if not isinstance(batch, pa.RecordBatch):
            raise InvalidBatchError(
                f"expected a pyarrow RecordBatch or Table, got {type(batch).__name__}"
            )
        schema = self._topic.schema
        if not batch.schema.equals(schema, check_metadata=False):
            raise SchemaMismatchError(_describe_mismatch(self._topic.name, schema, batch.schema))
        if batch.num_rows == 0:
            raise InvalidBatchError("empty batch: a segment holds at least one record")
        return pa.RecordBatch.from_arrays(batch.columns, schema=schema)

    def append(
        self,
        batch: pa.RecordBatch | pa.Table,
        *,
        expected_offset: int | None = None,
        identity: WriterIdentity = PLAIN_APPEND,
    ) -> AppendResult:
        """Append ``batch`` at the log end, or exactly at ``expected_offset``.

        Without an expected offset, a lost race is retried at the new end. With
        one (KIP-27), the batch lands exactly there or not at all.

        Raises:
            OffsetMismatchError: the log does not end at ``expected_offset``;
                nothing was written.
            SchemaMismatchError, InvalidBatchError, RecordBatchTooLargeError: bad
                input; nothing was written.
            AppendOutcomeUnknownError: the deadline passed while the outcome of
                the last attempt could not be read back.
        """
        batch = self.prepare_batch(batch)
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
        append_id = uuid.uuid4().hex
        with self._lock:
            self._ensure_open()
            if expected_offset is not None and expected_offset != self._end:
                self._sync_tail()
                self._check_expected(expected_offset)
            offset = self._end
            data = self._encode(batch, offset, append_id, identity)
            sleeps = self._config.retry.sleeps()
            uncertain = False
            while True:
                if offset != self._end:  # lost a race: move to the new end
                    offset = self._end
                    data = self._encode(batch, offset, append_id, identity)
                owner, maybe_applied = self._try_put(offset, data, append_id)
                uncertain = uncertain or maybe_applied
                if maybe_applied:
                    self.stats["ambiguous"] += 1
                if owner is _Owner.OURS:
                    self.stats["appends"] += 1
                    self._record_append(offset, batch.num_rows, len(data))
                    return AppendResult(self._topic.name, self._partition, offset, batch.num_rows)
                if owner is _Owner.THEIRS:
                    self.stats["conflicts"] += 1
                    self._sync_tail()
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
        if expected_offset != self._end:
            raise OffsetMismatchError(
                f"{self._topic.name}/{self._partition}: expected offset {expected_offset} "
                f"but the log ends at {self._end}",
                expected_offset=expected_offset,
                log_end_offset=self._end,
            )

    def _encode(
        self,
        batch: pa.RecordBatch,
        offset: int,
        append_id: str,
        identity: WriterIdentity,
    ) -> memoryview:
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
        return data

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

    def _record_append(self, offset: int, count: int, size: int) -> None:
        self._tail.append((offset, size))
        self._end = offset + count
        self._last_base = offset
        self._write_due_checkpoints()

    def _write_due_checkpoints(self) -> None:
        """Write the checkpoint of every complete window we know of. Best effort:
        a checkpoint only saves work, so a failure here never fails an append."""
        while len(self._tail) >= self._interval:
            window = self._tail[: self._interval]
            end = self._tail[self._interval][0] if len(self._tail) > self._interval else self._end
            cp = Checkpoint(
                log_start=self._log_start,
                start=self._window_start,
                end=end,
                bases=tuple(b for b, _ in window),
                sizes=tuple(s for _, s in window),
            )
            key = checkpoint_key(self._topic.name, self._partition, cp.start)
            try:
                self._store.put_if_absent(key, cp.to_json())
            except FileExistsError:
                pass  # another writer wrote the same window: same facts
            except TransientStoreError:
                return  # the next append tries again
            self._last_checkpoint = cp
            self._window_start = end
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
                f"{self._topic.name}/{self._partition}: offset {start} is below the log "
                f"start {self._log_start}"
            )
        if end > self._end or start > end:
            raise OffsetOutOfRangeError(
                f"{self._topic.name}/{self._partition}: range [{start}, {end}) is outside "
                f"the log [{self._log_start}, {self._end})"
            )
        return start, end

    def segments(self, start: int | None = None, end: int | None = None) -> list[SegmentRef]:
        """The segments that hold offsets ``[start, end)`` (default: the whole log).

        Raises:
            OffsetOutOfRangeError: the range is not inside the log.
        """
        return self._plan(start, end)[2]

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
        cp: Checkpoint | None = None
        if start < self._window_start:
            last = self._last_checkpoint
            if last is not None and last.start <= start < last.end:
                cp = last
            else:
                cp = self._checkpoint_covering(start)
        while cp is not None:
            yield from _window_refs(
                self._topic.name, self._partition, cp.bases, cp.sizes, cp.end, offset
            )
            offset = cp.end
            if cp.end >= self._window_start:
                break
            cp = self._load_checkpoint(cp.end)
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
        if start is None:
            raise CorruptCheckpointError(f"no checkpoint covers offset {offset}", key=prefix)
        cp = self._load_checkpoint(start)
        if not cp.start <= offset < cp.end:
            raise CorruptCheckpointError(f"checkpoint does not cover offset {offset}", key=prefix)
        return cp

    def iter_segments(
        self, start: int | None = None, end: int | None = None
    ) -> Generator[tuple[SegmentHeader, pa.RecordBatch], None, None]:
        """Stream ``(header, batch)`` for offsets ``[start, end)``: each batch is
        the part of its segment inside the range. Up to ``read_ahead`` segments
        are fetched in parallel; memory stays bounded however long the range.

        Raises:
            OffsetOutOfRangeError: the range is not inside the log.
            CorruptSegmentError: a segment fails its checksum.
        """
        start, end, refs = self._plan(start, end)
        ahead = self._config.read_ahead
        if ahead is None:
            ahead = 1 if self._store.url.startswith(("file:", "memory:")) else 8
        if ahead == 1:
            for ref in refs:
                yield _cut(self._fetch(ref), ref, start, end)
            return
        pool = ThreadPoolExecutor(max_workers=ahead, thread_name_prefix="arrowlog-read")
        pending: list[Future[tuple[SegmentHeader, pa.RecordBatch]]] = []
        try:
            queue = iter(refs)
            for ref in queue:
                pending.append(pool.submit(self._fetch, ref))
                if len(pending) >= ahead:
                    break
            index = 0
            while index < len(refs):
                header, batch = pending.pop(0).result()
                for ref in queue:
                    pending.append(pool.submit(self._fetch, ref))
                    break
                yield _cut((header, batch), refs[index], start, end)
                index += 1
        finally:
            for future in pending:
                future.cancel()
            pool.shutdown(wait=False, cancel_futures=True)

    def _fetch(self, ref: SegmentRef) -> tuple[SegmentHeader, pa.RecordBatch]:
        data = self._retry(lambda: self._store.get(ref.key))
        header, batch = decode_segment(data, key=ref.key)
        if header.base_offset != ref.base or header.next_offset != ref.end:
            raise CorruptSegmentError(
                f"segment holds [{header.base_offset}, {header.next_offset}), the log "
                f"says [{ref.base}, {ref.end})",
                key=ref.key,
            )
        return header, batch

    def iter_batches(
        self, start: int | None = None, end: int | None = None
    ) -> Generator[pa.RecordBatch, None, None]:
        """Stream the records of ``[start, end)`` as record batches (control
        records left out)."""
        for header, batch in self.iter_segments(start, end):
            if not header.identity.control:
                yield batch

    def read(self, start: int | None = None, end: int | None = None) -> pa.Table:
        """The records of ``[start, end)`` as one table."""
        return pa.Table.from_batches(list(self.iter_batches(start, end)), schema=self._topic.schema)


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


def _describe_mismatch(topic: str, want: pa.Schema, got: pa.Schema) -> str:
    problems = []
    want_fields = {f.name: f for f in want}
    got_fields = {f.name: f for f in got}
    for name in want.names:
        if name not in got_fields:
            problems.append(f"missing column {name!r}")
        elif not got_fields[name].equals(want_fields[name]):
            problems.append(f"column {name!r} is {got_fields[name]}, topic has {want_fields[name]}")
    problems += [f"unexpected column {n!r}" for n in got.names if n not in want_fields]
    if not problems and want.names != got.names:
        problems.append(f"column order {got.names} differs from the topic's {want.names}")
    return f"batch does not match the schema of topic {topic!r}: " + "; ".join(problems)
