"""Restartable bulk loading with expected offsets (KIP-27's bulk-load use case).

A load writes a dataset into one partition in fixed-size chunks, each appended
with ``expected_offset`` = where the previous chunk ended. Rerun after a crash,
it asks the log where it really ends, skips the rows already there, checks that
the rows at the log's end are the dataset's own (so a wrong ``start_offset`` or a
changed input is caught instead of silently doubling data), and resumes. However
often it is killed, the partition ends up holding the input exactly once, in
order.
"""

from __future__ import annotations

import collections
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass

import pyarrow as pa

from arrowlog.errors import ArrowLogError, InvalidConfigError, OffsetMismatchError
from arrowlog.format.segment import one_batch
from arrowlog.partition import PartitionLog


class LoadMismatchError(ArrowLogError):
    """The partition does not hold a prefix of this load's input where the load
    should have put it: another writer wrote there, the start offset is wrong,
    or the input changed between runs. Nothing was written."""


@dataclass(frozen=True, slots=True)
class LoadProgress:
    rows_done: int
    bytes_done: int
    rows_skipped: int


@dataclass(frozen=True, slots=True)
class LoadResult:
    start_offset: int
    end_offset: int
    rows_written: int
    rows_skipped: int
    batches_written: int


def rechunk(batches: Iterable[pa.RecordBatch], rows: int) -> Iterator[pa.RecordBatch]:
    """Cut a stream of batches into batches of exactly ``rows`` rows (the last may
    be shorter). The cut depends only on the rows, never on how the input was
    batched, so every run of a load cuts the same way."""
    pending: list[pa.RecordBatch] = []
    have = 0
    for batch in batches:
        while batch.num_rows:
            take = min(rows - have, batch.num_rows)
            pending.append(batch.slice(0, take))
            have += take
            batch = batch.slice(take)
            if have == rows:
                yield one_batch(pa.Table.from_batches(pending))
                pending, have = [], 0
    if have:
        yield one_batch(pa.Table.from_batches(pending))


def bulk_load(
    log: PartitionLog,
    batches: Iterable[pa.RecordBatch],
    *,
    start_offset: int,
    rows_per_batch: int = 65_536,
    progress: Callable[[LoadProgress], None] | None = None,
) -> LoadResult:
    """Load ``batches`` into ``log`` starting at ``start_offset``, resuming a
    previous run of the same load if there was one.

    Args:
        log: the partition to load into.
        batches: the input, in order; it must be the same on every run.
        start_offset: where the load's first row goes (the log end when the load
            first started; 0 for a new partition).
        rows_per_batch: rows per segment.
        progress: called after each segment is written.

    Raises:
        LoadMismatchError: the log does not hold this input's prefix at
            ``start_offset``.
        OffsetMismatchError: another writer appended while the load ran.
        InvalidConfigError: ``rows_per_batch`` is not a positive int.
        SchemaMismatchError, InvalidBatchError: a chunk does not fit the topic;
            it is not written (the chunks before it are: rerun to resume).
    """
    check_rows_per_batch(rows_per_batch)
    end = log.end_offset(complete=True)  # a listing may stop short of the last chunk
    if end < start_offset:
        raise LoadMismatchError(
            f"the log ends at {end}, before the load's start offset {start_offset}"
        )
    done = end - start_offset
    skipped = 0
    sizes: collections.deque[int] = collections.deque()  # of the chunks handed on

    def to_write() -> Iterator[pa.RecordBatch]:
        """The chunks past what the log holds, after checking the rows it does."""
        nonlocal skipped
        at = start_offset  # where the next input row is, or goes
        for chunk in rechunk(batches, rows_per_batch):
            if skipped < done:
                take = min(done - skipped, chunk.num_rows)
                _check_already_loaded(log, chunk.slice(0, take), at, end)
                skipped += take
                at += take
                chunk = chunk.slice(take)
                if not chunk.num_rows:
                    continue
            sizes.append(chunk.nbytes)
            yield chunk

    offset = end
    bytes_done = 0
    written = 0
    batches_written = 0
    try:
        # each chunk is encoded while the one before is written
        for result in log.append_batches(to_write(), expected_offset=end):
            offset = result.next_offset
            batches_written += 1
            written += result.record_count
            bytes_done += sizes.popleft()
            if progress is not None:
                progress(LoadProgress(skipped + written, bytes_done, skipped))
    except OffsetMismatchError as e:
        raise OffsetMismatchError(
            f"another writer appended to {log.topic.name}/{log.partition} during the load: {e}",
            expected_offset=e.expected_offset,
            log_end_offset=e.log_end_offset,
        ) from e
    if skipped < done:
        raise LoadMismatchError(
            f"the log holds {done} rows after offset {start_offset} but the input has only "
            f"{skipped}: this is not a rerun of the same load"
        )
    return LoadResult(start_offset, offset, written, skipped, batches_written)


def check_rows_per_batch(rows_per_batch: object) -> None:
    """Refuse a chunk size that is not a positive int (a bool is not a count).

    Raises:
        InvalidConfigError: it is not.
    """
    if (
        isinstance(rows_per_batch, bool)
        or not isinstance(rows_per_batch, int)
        or rows_per_batch < 1
    ):
        raise InvalidConfigError(f"rows_per_batch must be >= 1, got {rows_per_batch!r}")


def _check_already_loaded(log: PartitionLog, rows: pa.RecordBatch, offset: int, end: int) -> None:
    """Compare the input rows that the log should already hold with the log's own
    rows, for the part that touches the log's end (reading everything a previous
    run wrote would cost as much as writing it again)."""
    check_from = max(offset, end - 1024)
    if offset + rows.num_rows <= check_from:
        return
    lo = check_from - offset
    stored = log.read(check_from, offset + rows.num_rows)
    expected = pa.Table.from_batches([rows.slice(lo)])
    if not stored.equals(expected):
        raise LoadMismatchError(
            f"{log.topic.name}/{log.partition}: the rows at offsets "
            f"[{check_from}, {offset + rows.num_rows}) differ from the input: wrong start "
            "offset, changed input, or another writer"
        )
