"""Structured Streaming: an arrowlog source and an exactly-once arrowlog sink.

Source offsets are ``{"topic/partition": offset}``: how far each partition was
read. The latest offset is the LSO under read_committed (every transaction below
it is decided, so a micro-batch never changes its mind) or the high watermark.
``maxOffsetsPerTrigger`` splits the backlog across partitions in proportion;
``Trigger.AvailableNow`` reads up to the offsets current when the query starts.

The sink commits each micro-batch as one transaction, idempotent by (``txnAppId``,
batch id). Tasks stage their rows as Arrow files under
``_arrowlog/staging/<transactional id>/``; the driver's commit appends them to
the log in one transaction whose metadata records the batch id, unless that
batch id (or a later one) was committed already: a query restarted from its
checkpoint replays its last batch, and the replay writes nothing. Staged files
of failed tasks and replays are swept after every commit.
"""

from __future__ import annotations

import uuid
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field

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
from arrowlog.consumer import plan_snapshot
from arrowlog.errors import InvalidConfigError
from arrowlog.scan import TopicPartition, plan_scan
from arrowlog.spark.options import ReadOptions, WriteOptions
from arrowlog.spark.sink import is_done, last_version, split_by_partition
from arrowlog.spark.source import _Partition, read_partition

STAGING_PREFIX = "_arrowlog/staging/"


def _key(tp: TopicPartition) -> str:
    return f"{tp[0]}/{tp[1]}"


def _tp(key: str) -> TopicPartition:
    topic, _, partition = key.rpartition("/")
    return topic, int(partition)


class ArrowLogStreamReader(DataSourceStreamReader, SupportsTriggerAvailableNow):
    def __init__(self, options: ReadOptions, schema: StructType) -> None:
        self.options = options
        self.schema = schema
        self.target: dict[str, int] | None = None

    def _log(self) -> arrowlog.ArrowLog:
        return arrowlog.connect(self.options.root, self.options.storage)

    def _latest(self, start: dict[str, int] | None = None) -> dict[str, int]:
        """Where the next micro-batch may end: under read_committed, the ends of
        one snapshot from ``start`` (plan_snapshot), so that a transaction
        committing while they are fixed is in one micro-batch whole, never split
        across two; else the high watermarks."""
        log = self._log()
        tps = [(t, p) for t in self.options.topics for p in range(log.topic(t).partitions)]
        if self.options.isolation_level == "read_uncommitted":
            return {_key(tp): log.partition(*tp).end_offset() for tp in tps}
        ranges: dict[TopicPartition, tuple[int | None, int | None]] = {
            tp: ((start or {}).get(_key(tp)), None) for tp in tps
        }
        return {_key(tp): plan.end for tp, plan in plan_snapshot(log, ranges).items()}

    def initialOffset(self) -> dict[str, int]:
        latest = self._latest()
        spec = self.options.starting
        if spec == "latest":
            return latest
        log = self._log()
        start = {k: log.partition(*_tp(k)).start_offset() for k in latest}
        if isinstance(spec, dict):
            for tp, offset in spec.items():
                if offset >= 0:
                    start[_key(tp)] = offset
                elif offset == -1:
                    start[_key(tp)] = latest[_key(tp)]
        return start

    def getDefaultReadLimit(self) -> ReadLimit:
        limit = self.options.max_offsets_per_trigger
        return ReadMaxRows(limit) if limit else ReadAllAvailable()

    def prepareForTriggerAvailableNow(self) -> None:
        self.target = self._latest()

    def latestOffset(self, start: dict[str, int], limit: ReadLimit) -> dict[str, int]:
        latest = self.target if self.target is not None else self._latest(start)
        ends = {k: max(latest.get(k, start.get(k, 0)), start.get(k, 0)) for k in latest}
        start = {k: start.get(k, 0) for k in ends}
        if isinstance(limit, ReadMaxRows):
            backlog = {k: ends[k] - start[k] for k in ends}
            total = sum(backlog.values())
            if total > limit.max_rows:
                budget = limit.max_rows
                for k in sorted(backlog):
                    share = min(backlog[k], max(1, backlog[k] * limit.max_rows // total), budget)
                    ends[k] = start[k] + share
                    budget -= share
        return ends

    def partitions(self, start: dict[str, int], end: dict[str, int]) -> Sequence[InputPartition]:
        if all(end[k] <= start.get(k, 0) for k in end):
            return []
        o = self.options
        plan = plan_scan(
            self._log(),
            o.topics,
            starting={_tp(k): v for k, v in start.items()},
            ending={_tp(k): v for k, v in end.items()},
            isolation_level=o.isolation_level,
            fail_on_data_loss=o.fail_on_data_loss,
            target_bytes=o.target_bytes,
        )
        return [_Partition(task) for task in plan.tasks]

    def read(self, partition: InputPartition) -> Iterator[pa.RecordBatch]:
        return read_partition(self.options, self.schema, partition)

    def commit(self, end: dict[str, int]) -> None:
        """Nothing to release: the log keeps every record."""


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
        self.options = options
        self.transactional_id = f"spark.stream.{options.app_id}"

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
            key = f"{STAGING_PREFIX}{self.transactional_id}/{uuid.uuid4().hex}.arrow"
            log.store.put_if_absent(key, sink.getvalue().to_pybytes())
            staged.files.append((p, key, table.num_rows))
        return staged

    def commit(self, messages: list[WriterCommitMessage | None], batchId: int) -> None:
        o = self.options
        log = arrowlog.connect(o.root, o.storage)
        if is_done(last_version(log, self.transactional_id), batchId):
            self._sweep(log)  # a replay: read only, fence nothing
            return
        producer = log.producer(
            transactional_id=self.transactional_id,
            transaction_timeout_ms=o.transaction_timeout_ms,
        )
        producer.init_transactions()
        done = producer.last_committed_metadata.get("txnVersion")
        if done is None or int(done) < batchId:
            files = [f for m in messages if isinstance(m, StagedRows) for f in m.files]
            producer.begin_transaction()
            producer.add_partitions({(o.topic, p) for p, _, _ in files})
            for p, key, _ in files:
                table = pa.ipc.open_file(pa.py_buffer(log.store.get(key))).read_all()
                for batch in table.to_batches(max_chunksize=o.rows_per_batch):
                    producer.send(o.topic, batch, partition=p)
            producer.commit_transaction(metadata={"txnVersion": str(batchId)})
        self._sweep(log)

    def abort(self, messages: list[WriterCommitMessage | None], batchId: int) -> None:
        self._sweep(arrowlog.connect(self.options.root, self.options.storage))

    def _sweep(self, log: arrowlog.ArrowLog) -> None:
        # Micro-batches run one after another: once a batch is committed (or
        # aborted), every staged file of this query is done with.
        for info in list(log.store.list(f"{STAGING_PREFIX}{self.transactional_id}/")):
            log.store.delete(info.key)
