"""Structured Streaming: an arrowlog source and an exactly-once arrowlog sink.

Source offsets are ``{"topic": {"partition": offset}}`` as in Spark's Kafka
source (checkpoints holding the earlier ``{"topic/partition": offset}`` are read
back too): how far each partition was read. A topic created anew under a
deleted one's name is keyed by its prefix, ``{"topic=2": {...}}`` (its
incarnation), so that offsets read in the old topic are never taken as
positions in the new one: the query reports the loss as Kafka's source does
(failOnDataLoss) instead of skipping the new topic's first records. The latest
offset is the LSO under read_committed (every transaction below it is decided,
so a micro-batch never changes its mind) or the high watermark.
``maxOffsetsPerTrigger`` splits the backlog across partitions in proportion,
``minOffsetsPerTrigger`` / ``maxTriggerDelay`` hold a micro-batch back until
enough records are there; ``Trigger.AvailableNow`` reads up to the offsets
current when the query starts.

The sink commits each micro-batch as one transaction, idempotent by (``txnAppId``,
batch id). Tasks stage their rows as Arrow files under
``_arrowlog/staging/<transactional id>/``; the driver's commit appends them to
the log in one transaction whose metadata records the batch id, unless that
batch id (or a later one) was committed already: a query restarted from its
checkpoint replays its last batch, and the replay writes nothing. Staged files
of failed tasks and replays are swept after every commit.
"""

from __future__ import annotations

import time
import uuid
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, NoReturn

import pyarrow as pa
from pyspark.sql.datasource import (
    DataSourceStreamArrowWriter,
    DataSourceStreamReader,
    InputPartition,
    WriterCommitMessage,
)
from pyspark.sql.streaming.datasource import (
    ReadAllAvailable,
    ReadLimit,
    ReadMaxRows,
    SupportsTriggerAvailableNow,
)
from pyspark.sql.types import StructType

import arrowlog
from arrowlog.errors import ArrowLogError, InvalidConfigError, OffsetOutOfRangeError
from arrowlog.format.topic import parse_topic_prefix, topic_prefix
from arrowlog.maintenance.cleanup import STAGING_PREFIX
from arrowlog.read.scan import LATEST, TopicPartition, plan_scan
from arrowlog.read.visibility import plan_snapshot, untorn_ends
from arrowlog.spark.options import ReadOptions, WriteOptions, app_transactional_id
from arrowlog.spark.planning import split_tasks, starting_offsets, subscribed_partitions
from arrowlog.spark.reader import ScanPartition, read_partition
from arrowlog.spark.sink import checked_topic
from arrowlog.spark.writing import (
    compact_after_commit,
    is_done,
    keyed_transactional_id,
    last_version,
    segment_budget,
    split_by_partition,
    within_bytes,
)

#: offsets a micro-batch may end at, and the incarnation of each topic there
_Latest = tuple[dict[TopicPartition, int], dict[str, int]]

# Offsets as Spark's Kafka source writes them to the checkpoint.
StreamOffsets = dict[str, dict[str, int]]


def offsets_json(
    offsets: Mapping[TopicPartition, int], incarnations: Mapping[str, int] | None = None
) -> StreamOffsets:
    """``{"topic": {"0": 42}}``, partitions in order; a topic of incarnation
    k > 0 is keyed ``"topic=k"``."""
    out: StreamOffsets = {}
    for (topic, partition), offset in sorted(offsets.items()):
        key = topic_prefix(topic, (incarnations or {}).get(topic, 0))
        out.setdefault(key, {})[str(partition)] = offset
    return out


def parse_offsets_json(value: Mapping[str, Any]) -> dict[TopicPartition, int]:
    """Offsets read back from a checkpoint: the Kafka shape, or the
    ``{"topic/partition": offset}`` that checkpoints written before it hold.

    Raises:
        InvalidConfigError: neither shape.
    """
    return parse_stream_position(value)[0]


def parse_stream_position(
    value: Mapping[str, Any],
) -> tuple[dict[TopicPartition, int], dict[str, int]]:
    """The offsets of :func:`parse_offsets_json` and each topic's incarnation."""
    out: dict[TopicPartition, int] = {}
    incarnations: dict[str, int] = {}
    for key, item in value.items():
        if isinstance(item, dict):
            topic, incarnation = parse_topic_prefix(key)
            incarnations[topic] = incarnation
            for partition, offset in item.items():
                out[(topic, int(partition))] = int(offset)
        elif isinstance(item, int) and "/" in key:  # topic names have no '/'
            topic, _, partition = key.rpartition("/")
            out[(topic, int(partition))] = item
            incarnations[topic] = 0
        else:
            raise InvalidConfigError(f"not an arrowlog stream offset: {dict(value)!r}")
    return out, incarnations


class ArrowLogStreamReader(DataSourceStreamReader, SupportsTriggerAvailableNow):
    def __init__(self, options: ReadOptions, schema: StructType) -> None:
        self.options = options
        self.schema = schema
        # Trigger.AvailableNow's end, and the topics' incarnations there
        self.target: _Latest | None = None
        # what the last latestOffset saw (reportLatestOffset: progress's latestOffset)
        self.seen: _Latest | None = None
        # when the last micro-batch was let through (minOffsetsPerTrigger);
        # None: the first one goes at once, as in Kafka
        self.last_trigger: float | None = None

    def _log(self) -> arrowlog.ArrowLog:
        return arrowlog.connect(self.options.root, self.options.storage)

    def _latest(
        self,
        start: Mapping[TopicPartition, int] | None = None,
        start_incarnations: Mapping[str, int] | None = None,
    ) -> _Latest:
        """Where the next micro-batch may end, and the incarnation of each
        topic it is in: under read_committed, the ends of one snapshot from
        ``start`` (plan_snapshot), so that a transaction committing while they
        are fixed is in one micro-batch whole, never split across two; else the
        high watermarks. Topics are looked up every time: subscribePattern
        picks up new topics, which start at earliest. Each partition is opened
        first: its listing says which incarnation of the topic it is (a start
        in another one is no start in it)."""
        log = self._log()
        while True:
            tps = subscribed_partitions(log, self.options)
            incarnations = {}
            for tp in tps:
                incarnations[tp[0]] = log.partition(*tp).opened_topic().incarnation
            if self.options.isolation_level == "read_uncommitted":
                return {tp: log.partition(*tp).end_offset() for tp in tps}, incarnations
            known = start_incarnations or {}
            ranges: dict[TopicPartition, tuple[int | None, int | None]] = {
                tp: (
                    (start or {}).get(tp) if known.get(tp[0], 0) == incarnations[tp[0]] else None,
                    None,
                )
                for tp in tps
            }
            latest = {tp: plan.end for tp, plan in plan_snapshot(log, ranges).items()}
            # a partition added while the snapshot was taken may hold part of a
            # transaction it shows committed: then take it again, with it
            for topic in {t for t, _ in tps}:
                log.topic(topic, refresh=True)
            if subscribed_partitions(log, self.options) == tps:
                return latest, incarnations

    def initialOffset(self) -> StreamOffsets:
        latest, incarnations = self._latest()
        log = self._log()
        spec = starting_offsets(log, self.options, list(latest))
        if spec == "latest":
            return offsets_json(latest, incarnations)
        start = {tp: log.partition(*tp).start_offset() for tp in latest}
        if isinstance(spec, dict):
            for tp, offset in spec.items():
                if offset >= 0:
                    start[tp] = offset
                elif offset == LATEST:
                    start[tp] = latest[tp]
        return offsets_json(start, incarnations)

    def getDefaultReadLimit(self) -> ReadLimit:
        # minOffsetsPerTrigger is applied in latestOffset: Python sources have
        # no composite limit (min and max at once)
        limit = self.options.max_offsets_per_trigger
        return ReadMaxRows(limit) if limit else ReadAllAvailable()

    def prepareForTriggerAvailableNow(self) -> None:
        self.target = self._latest()

    def latestOffset(self, start: dict[str, Any], limit: ReadLimit) -> StreamOffsets:
        begin, begun_in = parse_stream_position(start)
        latest, incarnations = (
            self.target if self.target is not None else self._latest(begin, begun_in)
        )
        self.seen = latest, incarnations
        # a topic created anew since the start: the new one is read from its
        # beginning (partitions() reports the loss first, as Kafka's source does)
        begin = {
            tp: offset
            for tp, offset in begin.items()
            if begun_in.get(tp[0], 0) == incarnations.get(tp[0], begun_in.get(tp[0], 0))
        }
        ends = {tp: max(latest.get(tp, begin.get(tp, 0)), begin.get(tp, 0)) for tp in latest}
        begin = {tp: begin.get(tp, 0) for tp in ends}
        backlog = {tp: ends[tp] - begin[tp] for tp in ends}
        if self.target is None and self._delay(sum(backlog.values())):
            return offsets_json(begin, incarnations)
        if isinstance(limit, ReadMaxRows):
            total = sum(backlog.values())
            if total > limit.max_rows:
                budget = limit.max_rows
                full = dict(ends)
                for tp in sorted(backlog):
                    share = min(backlog[tp], max(1, backlog[tp] * limit.max_rows // total), budget)
                    ends[tp] = begin[tp] + share
                    budget -= share
                if self.options.isolation_level == "read_committed":
                    # a micro-batch holds a transaction whole or not at all: the
                    # limit gives way at a transaction's edge
                    ends = untorn_ends(self._log(), begin, ends, full)
        return offsets_json(ends, incarnations)

    def _delay(self, available: int) -> bool:
        """Kafka's minOffsetsPerTrigger: hold the micro-batch back while fewer
        records are available, until maxTriggerDelay has passed since the last
        one. (Never under Trigger.AvailableNow, which would wait forever.)"""
        least = self.options.min_offsets_per_trigger
        if least is None:
            return False
        now = time.monotonic()
        waited = self.last_trigger is None or (
            (now - self.last_trigger) * 1000 >= self.options.max_trigger_delay_ms
        )
        if available < least and not waited:
            return True
        self.last_trigger = now
        return False

    def reportLatestOffset(self) -> StreamOffsets | None:
        """The offsets the last trigger saw as latest: the query's progress shows
        them as the source's ``latestOffset``, next to its ``endOffset``."""
        return None if self.seen is None else offsets_json(*self.seen)

    def partitions(self, start: dict[str, Any], end: dict[str, Any]) -> Sequence[InputPartition]:
        (begin, begun_in), (until, until_in) = (
            parse_stream_position(start),
            parse_stream_position(end),
        )
        o = self.options
        for topic, incarnation in sorted(until_in.items()):
            was = begun_in.get(topic, incarnation)
            if was == incarnation:
                continue
            if o.fail_on_data_loss:
                raise OffsetOutOfRangeError(
                    f"topic {topic!r} was deleted and created anew after this query read "
                    "some of it: what it had not read of the old topic is gone. Set "
                    "failOnDataLoss=false to go on with the new topic from its start"
                )
            begin = {tp: n for tp, n in begin.items() if tp[0] != topic}  # from its start
        if all(until[tp] <= begin.get(tp, 0) for tp in until):
            return []
        plan = plan_scan(
            self._log(),
            sorted({topic for topic, _ in until}),
            starting=begin,
            ending=until,
            isolation_level=o.isolation_level,
            fail_on_data_loss=o.fail_on_data_loss,
            partitions=set(until),
            target_bytes=o.target_bytes,
        )
        return [ScanPartition(task) for task in split_tasks(plan.tasks, o.min_partitions)]

    def read(self, partition: InputPartition) -> Iterator[pa.RecordBatch]:
        return read_partition(self.options, self.schema, partition)

    def commit(self, end: dict[str, Any]) -> None:
        """Nothing to release: the log keeps every record."""


class RefusedStream(DataSourceStreamReader, SupportsTriggerAvailableNow):
    """The stream of options refused: each call raises ``error``. A data
    source's ``streamReader`` must not raise it itself: pyspark's streaming
    source runner then fails in its own cleanup (``reader.stop()`` of the
    reader it never got), and the query stops with an ``UnboundLocalError``
    whose traceback buries the error."""

    def __init__(self, error: ArrowLogError) -> None:
        self.error = error

    def _refuse(self) -> NoReturn:
        raise self.error.with_traceback(None)

    def initialOffset(self) -> StreamOffsets:
        self._refuse()

    def getDefaultReadLimit(self) -> ReadLimit:
        self._refuse()

    def prepareForTriggerAvailableNow(self) -> None:
        self._refuse()

    def latestOffset(self, start: dict[str, Any], limit: ReadLimit) -> StreamOffsets:
        self._refuse()

    def reportLatestOffset(self) -> StreamOffsets | None:
        self._refuse()

    def partitions(self, start: dict[str, Any], end: dict[str, Any]) -> Sequence[InputPartition]:
        self._refuse()

    def read(self, partition: InputPartition) -> Iterator[pa.RecordBatch]:
        self._refuse()

    def commit(self, end: dict[str, Any]) -> None:
        self._refuse()


@dataclass
class StagedRows(WriterCommitMessage):
    """What one task staged: (partition, staging key, rows) per file."""

    files: list[tuple[int, str, int]] = field(default_factory=list)


class ArrowLogStreamWriter(DataSourceStreamArrowWriter):
    def __init__(self, options: WriteOptions, schema: StructType) -> None:
        if options.app_id is None:
            raise InvalidConfigError(
                "a streaming write needs option txnAppId (stable across restarts): it makes "
                "each micro-batch commit exactly once"
            )
        # the checks a batch write makes before its tasks run: a topic, columns or
        # key column refused fail the query at its start, not in every task
        checked_topic(arrowlog.connect(options.root, options.storage), options, schema)
        self.options = options
        self.app_id = options.app_id
        # where tasks stage rows until the driver's commit: one place per query
        # and topic, whatever the topic's incarnation
        query = app_transactional_id(options.topic, options.app_id, streaming=True)
        self.staging = f"{STAGING_PREFIX}{query}/"

    def write(self, iterator: Iterator[pa.RecordBatch]) -> StagedRows:  # type: ignore[override]
        o = self.options
        log = arrowlog.connect(o.root, o.storage)
        topic = log.topic(o.topic)
        from pyspark import TaskContext

        context = TaskContext.get()
        default = (context.partitionId() if context else 0) % topic.partitions
        parts: dict[int, list[pa.RecordBatch]] = {}
        for batch in iterator:
            for p, part in split_by_partition(batch, topic, o.key_column, default):
                parts.setdefault(p, []).append(part)
        staged = StagedRows()
        for p, batches in sorted(parts.items()):
            table = pa.Table.from_batches(batches, topic.schema)
            sink = pa.BufferOutputStream()
            with pa.ipc.new_file(sink, topic.schema) as w:
                w.write_table(table)
            key = f"{self.staging}{uuid.uuid4().hex}.arrow"
            log.store.put_if_absent(key, sink.getvalue().to_pybytes())
            staged.files.append((p, key, table.num_rows))
        return staged

    def commit(self, messages: list[WriterCommitMessage | None], batchId: int) -> None:
        o = self.options
        log = arrowlog.connect(o.root, o.storage)
        transactional_id = keyed_transactional_id(log, o.topic, self.app_id, streaming=True)
        if is_done(last_version(log, transactional_id), batchId):
            self._sweep(log)  # a replay: read only, fence nothing
            return
        producer = log.producer(
            transactional_id=transactional_id,
            transaction_timeout_ms=o.transaction_timeout_ms,
        )
        producer.init_transactions()
        done = producer.last_committed_metadata.get("txnVersion")
        if done is None or int(done) < batchId:
            files = [f for m in messages if isinstance(m, StagedRows) for f in m.files]
            producer.begin_transaction()
            budget = segment_budget(log.topic(o.topic))
            for p, key, _ in files:
                table = pa.ipc.open_file(pa.py_buffer(log.store.get(key))).read_all()
                for batch in table.to_batches(max_chunksize=o.rows_per_batch):
                    for piece in within_bytes(batch, budget):
                        producer.send(o.topic, piece, partition=p)
            producer.commit_transaction(metadata={"txnVersion": str(batchId)})
        producer.close()  # waits for the markers and the COMPLETE entry
        self._sweep(log)
        compact_after_commit(o)

    def abort(self, messages: list[WriterCommitMessage | None], batchId: int) -> None:
        self._sweep(arrowlog.connect(self.options.root, self.options.storage))

    def _sweep(self, log: arrowlog.ArrowLog) -> None:
        # Micro-batches run one after another: once a batch is committed (or
        # aborted), every staged file of this query is done with.
        for info in list(log.store.list(self.staging)):
            log.store.delete(info.key)
