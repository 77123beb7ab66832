"""Batches committed by commit objects (staged appends) read through the JVM
reader as through the Python one and the library's own snapshot read: each
from the staged data object its commit names, at the offsets the commit gives
it, with and without a filter, read_committed beside committed and aborted
transactions."""

from __future__ import annotations

import datetime
import os
from pathlib import Path
from typing import Any

import pyarrow as pa
import pytest

import arrowlog
from arrowlog import Compression, LogConfig, TopicConfig
from arrowlog.format.segment import read_header
from arrowlog.read.scan import plan_scan
from arrowlog.testing.scripted import ScriptedStore
from tests.support.clocks import ClockStore
from tests.support.schedules import FAST, Background
from tests.support.spark import python_pushdown, snapshot_rows, sorted_rows, with_options
from tests.support.stores import StoreSpec

pytestmark = [
    pytest.mark.spark,
    pytest.mark.skipif(
        bool(os.environ.get("ARROWLOG_SPARK_MIN")),
        reason="the jar is built for the pyspark of make setup, not the lowest one",
    ),
]

STAGED = LogConfig(retry=FAST.retry, staged_appends=True)
FIELDS: list[pa.Field[Any]] = [
    pa.field("i", pa.int32(), nullable=False),
    pa.field("s", pa.string()),
    pa.field("f", pa.float64()),
    pa.field("ts", pa.timestamp("us", tz="UTC")),
]
SCHEMA = pa.schema(FIELDS)
READ_COMMITTED = {"topic": "t", "isolationLevel": "read_committed"}


def batch(start: int, n: int) -> pa.RecordBatch:
    when = datetime.datetime(2024, 5, 1, tzinfo=datetime.timezone.utc)
    idx = range(start, start + n)
    return pa.record_batch(
        {
            "i": list(idx),
            "s": [None if i % 5 == 1 else f"s{i % 3}" for i in idx],  # repeats: dictionary
            "f": [i / 4 for i in idx],
            "ts": [when + datetime.timedelta(seconds=i) for i in idx],
        },
        schema=SCHEMA,
    )


def read(spark: Any, spec: StoreSpec, reader: str) -> Any:
    options = {"reader": reader, **READ_COMMITTED}
    return with_options(spark.read.format("arrowlog"), spec, options).load()


def rows_of(df: Any) -> list[tuple[Any, ...]]:
    return sorted((tuple(r) for r in df.collect()), key=repr)


def ready(clock: ClockStore, *parts: arrowlog.PartitionLog) -> None:
    """Each writer has followed the chain and dated it (two syncs), and the
    store's clock has moved on: what is staged from now on is helpable."""
    for part in parts:
        part.end_offset()
        part.end_offset()
    clock.advance(2_000)


def write_staged_batches(clock: ClockStore) -> tuple[int, int]:
    """Partition 0: plain segments, a commit carrying two writers' staged
    batches (``a``, paused between its upload and its commit, is helped by
    ``b``), commits of one batch each, a committed and an aborted
    transaction; partition 1: plain segments. Returns how many batches were
    staged and how many were carried by another writer's commit."""
    other = arrowlog.connect(clock, config=LogConfig(staged_appends=False))  # segments only
    other.append("t", batch(0, 4), partition=0)
    other.append("t", batch(100, 3), partition=1)
    scripted = ScriptedStore(clock)
    a = arrowlog.connect(scripted, config=STAGED).partition("t", 0)
    b = arrowlog.connect(clock, config=STAGED).partition("t", 0)
    ready(clock, a, b)
    other.append("t", batch(4, 2), partition=0)  # a and b are behind now
    # a loses its put and stages: the first batch of the producer id it stages
    # plain appends under, which only a commits (nothing says it is next)
    a.append(batch(500, 1))
    other.append("t", batch(6, 3), partition=0)
    # a stages its next batch at once (it lost a moment ago) and is held at its commit
    held = scripted.hold("put_if_absent", "t/0/segments/*")
    run_a = Background(lambda: a.append(batch(10, 5)))
    held.wait_reached()
    other.append("t", batch(9, 1), partition=0)
    b.append(batch(20, 6))  # loses too: its commit carries a's batch and its own
    held.release()  # a's commit goes to an offset b took: lost, and a sees its batch in
    run_a.result()
    for k in range(3):  # each a lost race: staged, committed by b alone
        other.append("t", batch(30 + 10 * k, 2), partition=0)
        b.append(batch(35 + 10 * k, 4))
    tx = other.producer(transactional_id="tx")
    tx.init_transactions()
    for records, end in (
        (batch(210, 3), tx.commit_transaction),
        (batch(220, 2), tx.abort_transaction),
    ):
        tx.begin_transaction()
        tx.send("t", records, partition=0)
        tx.flush()
        end()
    b.append(batch(300, 2))  # staged after the transactions' markers
    other.append("t", batch(120, 2), partition=1)
    return a.stats["staged"] + b.stats["staged"], b.stats["helped"]


def test_staged_batches_read_the_same_through_both_readers(spark: Any, tmp_path: Path) -> None:
    spec = StoreSpec("local", str(tmp_path / "log"), {"fsync": False})
    clock = ClockStore(spec.open())
    # checkpoints every 3 segments: the plan finds commits in checkpoints and in the tail
    config = TopicConfig(compression=Compression.ZSTD, checkpoint_interval=3)
    arrowlog.connect(clock).create_topic("t", SCHEMA, partitions=2, config=config)
    staged, helped = write_staged_batches(clock)
    assert (staged, helped) == (7, 1)
    log = spec.connect()
    keys = [s.key for t in plan_scan(log, ["t"]).tasks for s in t.segments]
    assert sum("/staged/" in k for k in keys) == staged  # every staged batch, from its object
    carried = [o for o in log.partition("t", 0).objects() if len(o.refs) == 2]
    assert len(carried) == 1  # b's commit of a's batch and its own
    commit = read_header(clock.get(log.partition("t", 0).segment_key(carried[0].base)), key="c")
    assert not isinstance(commit, int) and commit.refs is not None and len(commit.refs) == 2

    jvm, python = (rows_of(read(spark, spec, r)) for r in ("jvm", "python"))
    assert jvm == python
    key = ["partition", "offset", "i", "s", "f"]
    want = snapshot_rows(log, "t")
    assert sorted_rows(read(spark, spec, "jvm"), key) == sorted_rows(want, key)
    assert not {210, 211, 212} - {r["i"] for r in want}  # the committed transaction
    assert not {220, 221} & {r["i"] for r in want}  # not the aborted one

    # a filter on the metadata columns (the plan applies it) and on a column
    where = "partition = 0 and offset between 5 and 22 and i >= 8 and i % 2 = 0"
    filtered = [rows_of(read(spark, spec, r).where(where)) for r in ("jvm", "python")]
    with python_pushdown(spark):
        filtered.append(rows_of(read(spark, spec, "python").where(where)))
    assert filtered[0] == filtered[1] == filtered[2]
    expected = snapshot_rows(
        log,
        "t",
        keep=lambda r: (
            r["partition"] == 0 and 5 <= r["offset"] <= 22 and r["i"] >= 8 and r["i"] % 2 == 0
        ),
    )
    assert sorted_rows(read(spark, spec, "jvm").where(where), key) == sorted_rows(expected, key)
    assert len(expected) > 5
