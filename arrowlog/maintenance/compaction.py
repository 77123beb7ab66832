"""Compacting small segments: the committed records of decided ranges are
rewritten into large compacted objects, which readers and the Spark planner
read instead; ``vacuum`` removes the segments (a commit object with the
staged data objects it names) once the topic's ``delete_delay_ms`` has
passed. See docs/protocol.md, "Compacting small segments".

A range is whole checkpoint windows below the newest one and below the last
stable offset: every transaction in it is decided, and no writer appends there.
What a read_committed reader sees of it is what the compacted object holds:
aborted records and transaction markers are left out, and each kept batch's
records keep their offsets and timestamp (a run of the object's table: one
per segment, and one per staged batch a commit object names, read from its
staged object). Its index holds the summary of every object at a segment key,
as the checkpoints do (a commit's with its batches), and the windows they
fall in (see :mod:`arrowlog.format.compacted_index`).
"""

from __future__ import annotations

import warnings
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import TYPE_CHECKING

import pyarrow as pa

from arrowlog.errors import CorruptSegmentError, InvalidConfigError, UnknownTopicOrPartitionError
from arrowlog.format.compacted_index import CompactedIndex
from arrowlog.maintenance.vacuum import named_topics
from arrowlog.read.visibility import last_stable_offset, plan_committed

if TYPE_CHECKING:
    from arrowlog.format.checkpoint import PartitionState
    from arrowlog.partition import CompactionRange, PartitionLog
    from arrowlog.txn.resolver import Snapshot
    from arrowlog.txn.view import LogView

#: the stored size a compacted object aims at
DEFAULT_TARGET_BYTES = 64 * 1024 * 1024
#: bounds of ``target_bytes``: one object is built in memory and put in one PUT
MIN_TARGET_BYTES = 1024 * 1024
MAX_TARGET_BYTES = 1024 * 1024 * 1024


@dataclass(frozen=True, slots=True)
class Compacted:
    """A range ``compact`` compacted (or, in a dry run, would)."""

    topic: str
    partition: int
    start: int
    end: int
    #: objects at segment keys the range held (segments and commit objects),
    #: and their bytes with those of the staged data objects the commits name
    segments: int
    bytes_before: int
    #: records kept and the object's key (None in a dry run)
    records: int | None = None
    key: str | None = None
    #: staged data objects the range's commit objects name
    staged: int = 0


def compact(
    log: LogView,
    topics: Iterable[str] | None = None,
    *,
    target_bytes: int = DEFAULT_TARGET_BYTES,
    dry_run: bool = False,
    progress: Callable[[str, int, list[Compacted]], None] | None = None,
) -> list[Compacted]:
    """Compact every partition of ``topics`` (default: all) as far as its
    last stable offset allows; return what was compacted. Idempotent: killed
    anywhere, a rerun writes the same ranges (put-if-absent keeps the first).
    With ``dry_run``, nothing is written: the ranges are only planned.
    ``progress(topic, partition, compacted)`` is called as each partition is
    done.

    Raises:
        InvalidConfigError: ``target_bytes`` or ``dry_run`` is not valid (nothing
            is written).
        UnknownTopicOrPartitionError: a named topic does not exist.
    """
    if not isinstance(dry_run, bool):
        raise InvalidConfigError(f"dry_run must be True or False, got {dry_run!r}")
    if (
        isinstance(target_bytes, bool)
        or not isinstance(target_bytes, int)
        or not MIN_TARGET_BYTES <= target_bytes <= MAX_TARGET_BYTES
    ):
        raise InvalidConfigError(
            f"target_bytes must be an int between {MIN_TARGET_BYTES} and {MAX_TARGET_BYTES}, "
            f"got {target_bytes!r}"
        )
    names = named_topics(log, topics)
    done: list[Compacted] = []
    for name in names:
        try:
            for part in log.iter_partitions(name):
                ranges = compact_partition(log, part, target_bytes, dry_run=dry_run)
                done += ranges
                if progress is not None:
                    progress(name, part.partition, ranges)
        except UnknownTopicOrPartitionError:
            if topics is not None:
                raise
            # deleted since it was listed: nothing of it is read any more
    return done


def compact_partition(
    log: LogView, part: PartitionLog, target_bytes: int, *, dry_run: bool = False
) -> list[Compacted]:
    """Compact one partition's next ranges (see :func:`compact`)."""
    view = part.state()
    decide = log.resolver.snapshot()
    stable = last_stable_offset(*view, decide, log_start=part.start_offset())
    done = []
    for r in part.plan_compaction(target_bytes, stable):
        name, p = part.topic.name, part.partition
        if dry_run:
            done.append(Compacted(name, p, r.start, r.end, r.segments, r.size, staged=r.staged))
            continue
        try:
            batch, runs = _committed_records(part, r, decide, view)
        except _TooLarge as e:
            # ranges follow each other: this partition compacts no further
            warnings.warn(f"{name}/{p}: not compacted from {r.start}: {e}", stacklevel=2)
            break
        except _Overtaken:
            break  # the next run plans from the newer mark
        index = CompactedIndex(start=r.start, end=r.end, windows=r.windows, segments=r.objects)
        key = part.write_compacted(r.start, r.end, batch, runs, index)
        done.append(
            Compacted(name, p, r.start, r.end, r.segments, r.size, batch.num_rows, key, r.staged)
        )
    return done


def _committed_records(
    part: PartitionLog, r: CompactionRange, decide: Snapshot, view: tuple[int, PartitionState]
) -> tuple[pa.RecordBatch, list[tuple[int, int, int]]]:
    """What a read_committed reader sees of ``r``: one batch, and the run
    ``(base, count, timestamp_ms)`` of each batch whose records it holds (a
    segment's, or a staged batch's: reads resolve a commit object into the
    staged objects it names)."""
    plan = plan_committed(part, r.start, r.end, decide, view)
    if plan.forgotten:
        # records of transactions cleanup forgot: compacted already, by a
        # compactor that got here first (this one planned on an older mark)
        raise _Overtaken
    schema = part.topic.schema
    batches: list[pa.RecordBatch] = []
    runs: list[tuple[int, int, int]] = []
    hidden = plan.hidden
    for header, batch in part.iter_segments(
        r.start, r.end, skip=lambda ref: ref.base in hidden, summaries=plan.segments
    ):
        if header.identity.control or batch.num_rows == 0:
            continue
        if batch.num_rows != header.record_count:
            raise CorruptSegmentError(
                f"read {batch.num_rows} of {header.record_count} records",
                key=part.segment_key(header.base_offset),
            )
        runs.append((header.base_offset, header.record_count, header.timestamp_ms))
        batches.append(batch.replace_schema_metadata(schema.metadata))
    table = pa.Table.from_batches(batches, schema=schema).combine_chunks()
    combined = table.to_batches()
    if not combined:
        return pa.RecordBatch.from_pylist([], schema=schema), runs
    if len(combined) != 1:
        raise _TooLarge(
            "its records decode to more than one Arrow record batch holds (2 GiB of a "
            "string or binary column): compact with a smaller target_bytes"
        )
    return combined[0], runs


class _TooLarge(Exception):
    """A range whose records do not fit one record batch."""


class _Overtaken(Exception):
    """Another compactor compacted the range since this one planned it."""
