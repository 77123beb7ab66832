"""Driver-side planning shared by batch and streaming reads: what a read
subscribes to, where it starts and ends (offsets or timestamps, with Kafka's
precedence), and how its tasks are split (``minPartitions``)."""

from __future__ import annotations

import dataclasses
import math
import re
from collections.abc import Mapping, Sequence

import arrowlog
from arrowlog.errors import InvalidConfigError, OffsetOutOfRangeError, UnknownTopicOrPartitionError
from arrowlog.read.scan import LATEST, OffsetSpec, ScanSegment, ScanTask, TopicPartition
from arrowlog.read.visibility import IsolationLevel
from arrowlog.spark.options import ReadOptions


def subscribed_topics(log: arrowlog.ArrowLog, options: ReadOptions) -> tuple[str, ...]:
    """The topics a read covers: named, assigned, or matching subscribePattern
    (the whole name, as Kafka's pattern subscription)."""
    if options.topic_pattern is None:
        return options.topics
    pattern = re.compile(options.topic_pattern)
    topics = tuple(sorted(t for t in log.list_topics() if pattern.fullmatch(t)))
    if not topics:
        raise UnknownTopicOrPartitionError(
            f"subscribePattern {options.topic_pattern!r} matches no topic"
        )
    return topics


def subscribed_partitions(
    log: arrowlog.ArrowLog, options: ReadOptions, topics: Sequence[str] | None = None
) -> list[TopicPartition]:
    """Every partition a read covers, in order.

    Raises:
        UnknownTopicOrPartitionError: a topic, or an assigned partition, does not exist.
    """
    if topics is None:
        topics = subscribed_topics(log, options)
    if options.assigned is not None:
        for topic, partition in sorted(options.assigned):
            log.topic(topic).check_partition(partition)
    return [
        (t, p)
        for t in topics
        for p in range(log.topic(t).partitions)
        if options.assigned is None or (t, p) in options.assigned
    ]


def starting_offsets(
    log: arrowlog.ArrowLog, options: ReadOptions, partitions: Sequence[TopicPartition]
) -> OffsetSpec:
    """Where a read starts: startingTimestamp, else startingOffsetsByTimestamp,
    else startingOffsets (Kafka's precedence). A timestamp gives the first offset
    appended at or after it; with none, startingOffsetsByTimestampStrategy says
    what happens.

    Raises:
        OffsetOutOfRangeError: no record at or after a starting timestamp (strategy error).
    """
    stamps = _timestamps(
        options.starting_timestamp,
        options.starting_by_timestamp,
        partitions,
        "startingOffsetsByTimestamp",
    )
    if stamps is None:
        return options.starting
    out: dict[TopicPartition, int] = {}
    for tp, ts in stamps.items():
        found = offset_for_time(log, tp, ts, options.isolation_level)
        if found is None and options.timestamp_strategy == "error":
            raise OffsetOutOfRangeError(
                f"{tp[0]}/{tp[1]}: no record at or after timestamp {ts}; set "
                "startingOffsetsByTimestampStrategy=latest to start such partitions at the "
                "latest offset"
            )
        out[tp] = LATEST if found is None else found
    return out


def ending_offsets(
    log: arrowlog.ArrowLog, options: ReadOptions, partitions: Sequence[TopicPartition]
) -> OffsetSpec:
    """Where a batch read ends: endingTimestamp, else endingOffsetsByTimestamp,
    else endingOffsets. A timestamp with no record at or after it ends at the
    latest offset (as in Kafka)."""
    stamps = _timestamps(
        options.ending_timestamp,
        options.ending_by_timestamp,
        partitions,
        "endingOffsetsByTimestamp",
    )
    if stamps is None:
        return options.ending
    out: dict[TopicPartition, int] = {}
    for tp, ts in stamps.items():
        found = offset_for_time(log, tp, ts, options.isolation_level)
        out[tp] = LATEST if found is None else found
    return out


def _timestamps(
    every: int | None,
    each: Mapping[TopicPartition, int] | None,
    partitions: Sequence[TopicPartition],
    option: str,
) -> dict[TopicPartition, int] | None:
    if every is not None:
        return dict.fromkeys(partitions, every)
    if each is None:
        return None
    unknown = sorted(set(each) - set(partitions))
    if unknown:
        raise UnknownTopicOrPartitionError(
            f"{option} names {', '.join(f'{t}/{p}' for t, p in unknown)}, which is not being read"
        )
    missing = [tp for tp in partitions if tp not in each]
    if missing:
        # as Kafka: a timestamp per partition, or startingTimestamp for all
        raise InvalidConfigError(
            f"{option} must give every partition read a timestamp (as in Kafka); missing "
            + ", ".join(f"{t}/{p}" for t, p in missing)
        )
    return {tp: each[tp] for tp in partitions}


def offset_for_time(
    log: arrowlog.ArrowLog,
    tp: TopicPartition,
    timestamp_ms: int,
    isolation_level: IsolationLevel = "read_committed",
) -> int | None:
    """The first offset appended at or after ``timestamp_ms``, or None (Kafka's
    offsetsForTimes). Every record of a segment has the segment's timestamp.
    A record past the latest offset (the LSO under read_committed, the high
    watermark under read_uncommitted) cannot be read: such a time gives the
    latest offset, as the library's own timestamp reads do."""
    part = log.partition(*tp)
    start = part.start_offset()
    for s in part.summaries(start, part.end_offset()):
        if s.timestamp_ms >= timestamp_ms:
            latest = log.consumer(isolation_level=isolation_level).stable_offset(*tp)
            return max(min(s.base, latest), start)
    return None


def split_tasks(tasks: Sequence[ScanTask], min_partitions: int | None) -> list[ScanTask]:
    """Kafka's minPartitions: with fewer tasks than that, split each task in
    proportion to its rows (a task that gets a part of a segment still fetches
    the whole segment)."""
    total = sum(t.rows for t in tasks)
    if not min_partitions or len(tasks) >= min_partitions or total == 0:
        return list(tasks)
    out: list[ScanTask] = []
    for task in tasks:
        parts = min(task.rows, math.ceil(task.rows * min_partitions / total))
        out.extend(_pieces(task, max(1, parts)))
    return out


def _pieces(task: ScanTask, n: int) -> list[ScanTask]:
    """``task`` cut into ``n`` tasks of (nearly) equal rows."""
    if n <= 1:
        return [task]
    ends = iter([task.rows * k // n for k in range(1, n + 1)])
    cut = next(ends)
    pieces: list[list[ScanSegment]] = []
    current: list[ScanSegment] = []
    done = 0
    for s in task.segments:
        lo = s.lo
        while lo < s.hi:
            take = min(s.hi - lo, cut - done)
            current.append(dataclasses.replace(s, lo=lo, hi=lo + take))
            lo += take
            done += take
            if done == cut:
                pieces.append(current)
                current = []
                cut = next(ends, task.rows + 1)
    return [
        ScanTask(
            task.topic,
            task.partition,
            tuple(segs),
            task.bytes * _rows(segs) // task.rows,
            task.schema,
        )
        for segs in pieces
    ]


def _rows(segments: Sequence[ScanSegment]) -> int:
    return sum(s.hi - s.lo for s in segments)
