"""The log the compaction schedules work on (topic t, windows of 4 segments, a delete
delay of 15 minutes), what reads of it return, and objects replaced, forged or
flipped in the store."""

from __future__ import annotations

import dataclasses
from typing import Any

import pyarrow as pa

import arrowlog
from arrowlog import TopicConfig
from arrowlog.format.segment import Compaction, SegmentHeader, encode
from arrowlog.format.topic import segment_prefix
from arrowlog.read.scan import output_schema, plan_scan, read_task
from tests.support.schedules import FAST

MIN = 60_000
DELAY = 15 * MIN

FIELDS: list[pa.Field[Any]] = [pa.field("v", pa.int64()), pa.field("s", pa.string())]
SCHEMA = pa.schema(FIELDS)


def rows(*values: int) -> pa.RecordBatch:
    return pa.record_batch({"v": list(values), "s": [f"s{v}" for v in values]}, schema=SCHEMA)


CONFIG = TopicConfig(checkpoint_interval=4, delete_delay_ms=DELAY)


def connect(store: Any, **kw: Any) -> arrowlog.ArrowLog:
    return arrowlog.connect(store, config=dataclasses.replace(FAST, **kw))


def keys(store: Any, prefix: str = "") -> list[str]:
    return [i.key for i in store.list(prefix)]


def segs(store: Any, partition: int = 0) -> list[str]:
    return [k for k in keys(store, segment_prefix("t", partition)) if k.endswith(".arrow")]


def vals(table: pa.Table) -> list[Any]:
    return table.column("v").to_pylist()


def scanned(log: arrowlog.ArrowLog, **kw: Any) -> pa.Table:
    plan = plan_scan(log, ["t"], **kw)
    schema = output_schema(log.topic("t").schema)
    batches = [b for task in plan.tasks for b in read_task(log.store, task, schema)]
    return pa.Table.from_batches(batches, schema=schema).sort_by(
        [("partition", "ascending"), ("offset", "ascending")]
    )


def mixed_log(store: Any, partitions: int = 1) -> arrowlog.ArrowLog:
    """Topic t: plain appends, idempotent sends, committed and aborted
    transactions across partitions (markers), about 50 segments per partition
    in windows of 4."""
    log = connect(store)
    log.create_topic("t", SCHEMA, partitions=partitions, config=CONFIG)
    for p in range(partitions):
        for v in range(6):
            log.append("t", rows(v, v + 1000), partition=p)
    pr = log.producer()
    for v in range(6, 12):
        pr.send("t", rows(v), partition=0)
    pr.flush()
    tx = log.producer(transactional_id="tx")
    tx.init_transactions()
    for n in range(6):
        tx.begin_transaction()
        for p in range(partitions):
            tx.send("t", rows(100 + n, 200 + n), partition=p)
            tx.send("t", rows(300 + n), partition=p)
        tx.flush()
        if n % 2:
            tx.abort_transaction()
        else:
            tx.commit_transaction()
    tx.flush()  # the last markers (they follow in the background) land before the plain records
    for p in range(partitions):
        for v in range(20, 34):
            log.append("t", rows(v), partition=p)
    return log


def replace_object(store: Any, key: str | None, data: bytes) -> None:
    assert key is not None
    store.delete(key)
    store.put_if_absent(key, data)


def forge_compacted(log: arrowlog.ArrowLog, start: int, end: int, batch: pa.RecordBatch,
           runs: list[tuple[int, int, int]]) -> bytes:  # fmt: skip
    header = SegmentHeader(
        base_offset=start,
        record_count=batch.num_rows,
        timestamp_ms=0,
        append_id="forged",
        compaction=Compaction(start, end, tuple(runs)),
    )
    data, _ = encode(batch, header, log.topic("t").config.compression, stats=True)
    return bytes(data)


def honest_compacted(
    log: arrowlog.ArrowLog, key: str | None
) -> tuple[SegmentHeader, pa.RecordBatch, Compaction]:
    from arrowlog.format.topic import parse_compacted_key
    from arrowlog.partition import fetch_compacted

    assert key is not None
    span = parse_compacted_key(key)
    assert span is not None
    header, batch = fetch_compacted(log.store, key, *span)
    assert header.compaction is not None
    return header, batch, header.compaction


def flip_bit(store: Any, key: str, at: int | None = None) -> bytes:
    """Flip one bit of the object at ``key`` (its middle byte by default);
    returns what it held."""
    good = bytes(store.get(key))
    bad = bytearray(good)
    bad[len(bad) // 2 if at is None else at] ^= 0x01
    replace_object(store, key, bytes(bad))
    return good
