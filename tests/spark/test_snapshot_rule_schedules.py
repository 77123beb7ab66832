"""Schedules against one promise (docs/spark.md, "What a query sees"): a query
over arrowlog answers the same rows whatever reads it (the JVM reader, the
Python source in a default session, the Python source with Spark's filter
pushdown, and ``Consumer.read_snapshot`` of every partition read, filtered
after); the read's options alone decide its snapshot, filters only pick rows
of it, and each query of a loaded DataFrame plans its own.

Each test builds its log step by step (transactions committed, aborted and left
open across partitions and topics, partitions added, compaction, vacuum) and
runs every reader at fixed points of that schedule. The findings (places where
the readers parted, or every reader failed a read the promise covers) were
strict xfails until fixed; their docstrings give the log, the query and what
each reader returned before the fix."""

from __future__ import annotations

import json
import time
from collections.abc import Callable, Iterable
from contextlib import AbstractContextManager, nullcontext
from pathlib import Path
from typing import Any

import pyarrow as pa
import pytest

import arrowlog
from arrowlog import TopicConfig
from arrowlog.maintenance.compaction import MIN_TARGET_BYTES
from arrowlog.read.scan import TopicPartition
from arrowlog.read.visibility import IsolationLevel
from tests.support.spark import READERS, python_pushdown, snapshot_rows, sorted_rows, with_options
from tests.support.stores import StoreSpec

pytestmark = pytest.mark.spark

SCHEMA = pa.schema([pa.field("v", pa.int64())])
#: the columns compared with the library's snapshot read
ROW = ["topic", "partition", "offset", "v"]

Keep = Callable[[dict[str, Any]], bool]


def batch(*values: int) -> pa.RecordBatch:
    return pa.record_batch({"v": list(values)}, schema=SCHEMA)


def local(tmp_path: Path) -> StoreSpec:
    return StoreSpec("local", str(tmp_path / "log"), {"fsync": False})


def load(spark: Any, spec: StoreSpec, reader: str, **options: str) -> Any:
    """A batch read of ``spec``'s root through ``reader`` (one of READERS)."""
    chosen = "python" if reader == "python-pushdown" else reader
    return with_options(spark.read.format("arrowlog"), spec, {"reader": chosen, **options}).load()


def planning(spark: Any, reader: str) -> AbstractContextManager[None]:
    """What the queries of ``reader`` run inside: Spark reads the pushdown flag
    when it plans a query."""
    return python_pushdown(spark) if reader == "python-pushdown" else nullcontext()


def values(rows: Any) -> list[int]:
    """The ``v`` of each row (a DataFrame's, or snapshot_rows' dicts), sorted."""
    if not isinstance(rows, list):
        rows = [r.asDict() for r in rows.collect()]
    return sorted(r["v"] for r in rows)


def begin(log: arrowlog.ArrowLog, transactional_id: str) -> Any:
    producer = log.producer(transactional_id=transactional_id)
    producer.init_transactions()
    producer.begin_transaction()
    return producer


def error_name(e: Exception) -> str:
    """The arrowlog error a failed Spark query names first (Spark wraps it)."""
    import arrowlog.errors

    text = str(e)
    names = [
        n
        for n, c in vars(arrowlog.errors).items()
        if isinstance(c, type) and issubclass(c, arrowlog.ArrowLogError) and n in text
    ]
    return min(names, key=text.index) if names else type(e).__name__


def commit(producer: Any) -> None:
    """Commit, and wait for the markers (written in the background), so that
    the records appended next land after them: the same offsets every run."""
    producer.commit_transaction()
    producer.flush()


def held_log(spec: StoreSpec) -> arrowlog.ArrowLog:
    """Topic ``t``, three partitions::

        p0: 1 2 | A:3 | 4 | C:6 | 7          (plain, and transactions A and C)
        p1: A:30 | B:5 (open) | C:60         (B holds p1's LSO at offset 2)
        p2: 20 21

    A committed in p0 and p1; C committed in p0 and p1, but its p1 record lies
    behind B's open one: the snapshot of every partition ends p0 before C, so
    the unfiltered read is 1 2 3 4 | 30 | 20 21."""
    log = spec.connect()
    log.create_topic("t", SCHEMA, partitions=3)
    log.append("t", batch(1, 2), partition=0)
    a = begin(log, "a")
    a.send("t", batch(3), partition=0)
    a.send("t", batch(30), partition=1)
    commit(a)
    log.append("t", batch(4), partition=0)
    b = begin(log, "b")
    b.send("t", batch(5), partition=1)
    b.flush()  # left open
    time.sleep(0.003)  # C's append time is its own (milliseconds)
    c = begin(log, "c")
    c.send("t", batch(6), partition=0)
    c.send("t", batch(60), partition=1)
    commit(c)
    log.append("t", batch(7), partition=0)
    log.append("t", batch(20, 21), partition=2)
    snapshot = snapshot_rows(log, "t")
    assert values(snapshot) == [1, 2, 3, 4, 20, 21, 30]
    p0 = [(r["offset"], r["v"]) for r in snapshot if r["partition"] == 0]
    assert p0 == [(0, 1), (1, 2), (2, 3), (4, 4)]  # A's marker at 3, C's 6 at 5
    return log


def append_ms(log: arrowlog.ArrowLog, topic: str, partition: int, value: int) -> int:
    """The append time (ms) of the segment that holds ``value`` in the partition."""
    for s in log.partition(topic, partition).summaries():
        if s.transactional or not s.control:
            rows = log.consumer(isolation_level="read_uncommitted").read(
                topic, partition, s.base, s.end
            )
            if value in rows.column("v").to_pylist():
                return s.timestamp_ms
    raise AssertionError(f"{value} not in {topic}/{partition}")


def same_rows(
    spark: Any,
    spec: StoreSpec,
    log: arrowlog.ArrowLog,
    topics: str | list[str],
    cases: dict[str, Keep],
    *,
    options: dict[str, str],
    partitions: Iterable[TopicPartition] | None = None,
    starts: dict[TopicPartition, int] | None = None,
    ends: dict[TopicPartition, int] | None = None,
    uncommitted: bool = False,
    row: list[str] = ROW,
) -> None:
    """Every reader's rows of each filter in ``cases`` are those of the
    library's snapshot read of the same ranges, filtered after by its
    ``keep``."""
    level: IsolationLevel = "read_uncommitted" if uncommitted else "read_committed"
    for reader in READERS:
        df = load(spark, spec, reader, **options)
        with planning(spark, reader):
            for where, keep in cases.items():
                want = snapshot_rows(
                    log, topics, partitions=partitions, starts=starts, ends=ends,
                    isolation_level=level, keep=keep,
                )  # fmt: skip
                got = df.filter(where)
                assert sorted_rows(got, row) == sorted_rows(want, row), (reader, where)


# --- attacks that held --------------------------------------------------------------


def test_or_not_and_in_with_nulls_pick_rows_of_the_snapshot_whatever_the_reader(
    spark: Any, tmp_path: Path
) -> None:
    """Filters Spark cannot push whole (OR across partition and offset, NOT, IN
    and NOT IN with a null), beside pushed ones, and filters on the data column
    whose statistics leave out segments (C's record 6 sits alone in a segment
    beyond the snapshot's end in p0): no reader lets C in, none loses a row.
    Also a count per partition, a limit, and a SQL view of the read."""
    spec = local(tmp_path)
    log = held_log(spec)
    c_ms = append_ms(log, "t", 0, 6)
    cases: dict[str, Keep] = {
        "partition = 0 or offset > 1": lambda r: r["partition"] == 0 or r["offset"] > 1,
        "not (partition = 1 or offset < 2)": lambda r: r["partition"] != 1 and r["offset"] >= 2,
        "partition not in (1, null)": lambda r: False,  # NOT IN with a null is never true
        "offset >= 5 or v = 6": lambda r: r["offset"] >= 5 or r["v"] == 6,
        "v in (6, 60, null) or (v > 25 and partition = 1)": (
            lambda r: r["v"] in (6, 60) or (r["v"] > 25 and r["partition"] == 1)
        ),
        f"timestamp >= timestamp_millis({c_ms}) or (partition = 0 and v < 2)": (
            lambda r: r["timestamp_ms"] >= c_ms or (r["partition"] == 0 and r["v"] < 2)
        ),
    }
    same_rows(spark, spec, log, "t", cases, options={"topic": "t"})
    # p0 read from 6, past C's record there: C is in no partition read, 7 is kept
    past_c: dict[str, Keep] = {"true": lambda r: True}
    same_rows(
        spark, spec, log, "t", past_c, starts={("t", 0): 6},
        options={"topic": "t", "startingOffsets": json.dumps({"t": {"0": 6}})},
    )  # fmt: skip
    assert 7 in values(snapshot_rows(log, "t", starts={("t", 0): 6}))
    want = snapshot_rows(log, "t")
    for reader in READERS:
        df = load(spark, spec, reader, topic="t")
        with planning(spark, reader):
            counts = {r["partition"]: r["count"] for r in df.groupBy("partition").count().collect()}
            assert counts == {n: len([r for r in want if r["partition"] == n]) for n in range(3)}
            assert df.filter("partition = 0").limit(3).count() == 3, reader
            df.createOrReplaceTempView("held")
            view = spark.sql("select v from held where partition = 0 and offset > 2")
            assert values(view) == [4], reader  # A's marker at 3


def test_renamed_metadata_columns_beside_topic_columns_of_those_names(
    spark: Any, tmp_path: Path
) -> None:
    """A topic with its own ``partition`` and ``offset`` columns (holding other
    numbers than the record's): the metadata columns are ``_partition`` and
    ``_offset``. Filters on either kind, OR-ed and IN-ed, over a log where C
    is cut by B's open record: each reader keeps the same rows as the library."""
    schema = pa.schema(
        [
            pa.field("partition", pa.int64()),
            pa.field("offset", pa.int64()),
            pa.field("v", pa.int64()),
        ]
    )

    def rows(*vs: int) -> pa.RecordBatch:
        # the data column `partition` says the other partition, `offset` 100 + v
        return pa.record_batch(
            {"partition": [1 - v % 2 for v in vs], "offset": [100 + v for v in vs], "v": list(vs)},
            schema=schema,
        )

    spec = local(tmp_path)
    log = spec.connect()
    log.create_topic("t", schema, partitions=2)
    log.append("t", rows(0, 2), partition=0)
    log.append("t", rows(1), partition=1)
    b = begin(log, "b")
    b.send("t", rows(3), partition=1)
    b.flush()  # open: holds p1
    c = begin(log, "c")
    c.send("t", rows(4), partition=0)
    c.send("t", rows(5), partition=1)
    commit(c)
    log.append("t", rows(6), partition=0)
    row = ["topic", "_partition", "_offset", "partition", "offset", "v"]
    cases: dict[str, Keep] = {
        "partition = 0": lambda r: r["partition"] == 0,
        "_partition = 0": lambda r: r["_partition"] == 0,
        "_partition = 0 or partition = 0": lambda r: r["_partition"] == 0 or r["partition"] == 0,
        "_partition in (1, null) and offset >= 101": (
            lambda r: r["_partition"] == 1 and r["offset"] >= 101
        ),
        "offset = 104 or _offset = 0": lambda r: r["offset"] == 104 or r["_offset"] == 0,
        "not (_partition = 1) and _offset < 3": lambda r: r["_partition"] != 1 and r["_offset"] < 3,
    }
    assert values(snapshot_rows(log, "t")) == [0, 1, 2]
    same_rows(spark, spec, log, "t", cases, options={"topic": "t"}, row=row)


def test_a_transaction_across_two_topics_held_open_in_one(spark: Any, tmp_path: Path) -> None:
    """Topics ``a`` and ``b`` (two partitions each). O is open in b/0; X
    committed 2 in a/1 and 3 in b/0 behind O's record, so a read of both topics
    ends a/1 before X (and before 4 after it); a read of ``a`` alone, or one
    that assigns a/1 alone, sees X whole. Offsets JSON that names some
    partitions (a/1 from 1: past X; b/1 to 1), a pattern, assign, and
    read_uncommitted: every reader keeps the library's rows."""
    spec = local(tmp_path)
    log = spec.connect()
    log.create_topic("a", SCHEMA, partitions=2)
    log.create_topic("b", SCHEMA, partitions=2)
    log.append("a", batch(1), partition=0)
    o = begin(log, "o")
    o.send("b", batch(100), partition=0)
    o.flush()
    x = begin(log, "x")
    x.send("a", batch(2), partition=1)
    x.send("b", batch(3), partition=0)
    commit(x)
    log.append("a", batch(4), partition=1)
    log.append("b", batch(5), partition=1)
    log.append("b", batch(6), partition=1)
    every: dict[str, Keep] = {
        "true": lambda r: True,
        "topic = 'a' or partition = 1": lambda r: r["topic"] == "a" or r["partition"] == 1,
        "partition = 1 and topic = 'a'": lambda r: r["partition"] == 1 and r["topic"] == "a",
    }
    some: dict[str, Keep] = {
        "true": lambda r: True,
        "partition = 1 or v = 1": lambda r: r["partition"] == 1 or r["v"] == 1,
    }
    assert values(snapshot_rows(log, ["a", "b"])) == [1, 5, 6]
    same_rows(spark, spec, log, ["a", "b"], every, options={"topic": "a,b"})
    same_rows(spark, spec, log, ["a", "b"], some, options={"subscribePattern": "[ab]"})
    assert values(snapshot_rows(log, "a")) == [1, 2, 4]
    same_rows(spark, spec, log, "a", {"true": lambda r: True}, options={"topic": "a"})
    starts, ends = {("a", 1): 1}, {("b", 1): 1}
    same_rows(
        spark, spec, log, ["a", "b"], some, starts=starts, ends=ends,
        options={
            "subscribe": "a,b",
            "startingOffsets": json.dumps({"a": {"1": 1}}),
            "endingOffsets": json.dumps({"b": {"1": 1}}),
        },
    )  # fmt: skip
    for assigned in ({"a": [1], "b": [0]}, {"a": [1]}):
        parts = [(t, p) for t, ps in assigned.items() for p in ps]
        same_rows(
            spark, spec, log, ["a", "b"], {"true": lambda r: True}, partitions=parts,
            options={"assign": json.dumps(assigned)},
        )  # fmt: skip
    same_rows(
        spark, spec, log, ["a", "b"], {"partition = 1 or v = 1": some["partition = 1 or v = 1"]},
        uncommitted=True,
        options={"topic": "a,b", "isolationLevel": "read_uncommitted"},
    )  # fmt: skip


def test_timestamp_options_below_the_lso_decide_the_same_ranges(spark: Any, tmp_path: Path) -> None:
    """p0: 1 2 3, p1: 10, then an open transaction's 11 (holds p1): each append
    at its own millisecond. startingTimestamp, endingTimestamp and the
    per-partition JSON, each landing on a record below the LSO, decide where
    each partition starts and ends; filters then pick rows."""
    spec = local(tmp_path)
    log = spec.connect()
    log.create_topic("t", SCHEMA, partitions=2)
    stamps = []
    for v, p in ((1, 0), (10, 1), (2, 0)):
        log.append("t", batch(v), partition=p)
        stamps.append(log.partition("t", p).summaries()[-1].timestamp_ms)
        time.sleep(0.003)
    o = begin(log, "o")
    o.send("t", batch(11), partition=1)
    o.flush()
    time.sleep(0.003)
    log.append("t", batch(3), partition=0)
    t10, t2 = stamps[1], stamps[2]
    cases: dict[str, Keep] = {
        "true": lambda r: True,
        "offset > 0 or partition = 1": lambda r: r["offset"] > 0 or r["partition"] == 1,
    }
    lso = log.stable_offsets("t")
    assert lso == {0: 3, 1: 1}
    same_rows(
        spark, spec, log, "t", cases, starts={("t", 0): 1, ("t", 1): 1},
        options={"topic": "t", "startingTimestamp": str(t2)},
    )  # fmt: skip
    same_rows(
        spark, spec, log, "t", cases, ends={("t", 0): 1, ("t", 1): 0},
        options={"topic": "t", "endingTimestamp": str(t10)},
    )  # fmt: skip
    same_rows(
        spark, spec, log, "t", cases, starts={("t", 0): 1, ("t", 1): 0},
        ends={("t", 0): 2},
        options={
            "topic": "t",
            "startingOffsetsByTimestamp": json.dumps({"t": {"0": t10, "1": t10}}),
            "endingOffsetsByTimestamp": json.dumps({"t": {"0": stamps[2] + 1, "1": t10 + 10**6}}),
        },
    )  # fmt: skip


def test_each_query_of_one_dataframe_sees_what_changed_since_the_last(
    spark: Any, tmp_path: Path
) -> None:
    """One DataFrame per reader, loaded once, queried at each step of a
    schedule: partitions added after the load (with an open transaction over
    an old and a new partition, then committed), small segments compacted,
    and a topic created that the read's pattern matches, in a transaction
    left open there. Each query plans its own snapshot: every reader, at every
    step, reads what the library reads at that step."""
    spec = local(tmp_path)
    log = spec.connect()
    config = TopicConfig(checkpoint_interval=2)
    log.create_topic("p1", SCHEMA, partitions=1, config=config)
    log.append("p1", batch(1), partition=0)
    frames = {r: load(spark, spec, r, subscribePattern="p.*") for r in READERS}

    def check(topics: list[str], cases: dict[str, Keep]) -> None:
        for reader, df in frames.items():
            with planning(spark, reader):
                for where, keep in cases.items():
                    want = snapshot_rows(log, topics, keep=keep)
                    got = df.filter(where)
                    assert sorted_rows(got, ROW) == sorted_rows(want, ROW), (reader, where)
                assert df.count() == len(snapshot_rows(log, topics)), reader

    check(["p1"], {"true": lambda r: True})
    log.create_partitions("p1", 3)
    x = begin(log, "x")
    x.send("p1", batch(2), partition=0)
    x.send("p1", batch(20), partition=2)
    x.flush()
    log.append("p1", batch(10), partition=1)
    check(["p1"], {"partition = 2": lambda r: r["partition"] == 2})
    commit(x)
    check(["p1"], {"partition = 2": lambda r: r["partition"] == 2})
    for v in range(3, 9):
        log.append("p1", batch(v), partition=0)
    late = {"partition = 0 and offset > 1": lambda r: r["partition"] == 0 and r["offset"] > 1}
    check(["p1"], late)
    assert log.maintenance.compact(["p1"], target_bytes=MIN_TARGET_BYTES)
    check(["p1"], late)
    # a new topic the pattern matches, a transaction across both left open in it
    log.create_topic("p2", SCHEMA, partitions=1, config=config)
    y = begin(log, "y")
    y.send("p2", batch(200), partition=0)
    y.flush()
    z = begin(log, "z")
    z.send("p1", batch(9), partition=1)
    z.send("p2", batch(201), partition=0)
    commit(z)
    both: dict[str, Keep] = {
        "true": lambda r: True,
        "topic = 'p1' and partition = 1": lambda r: r["topic"] == "p1" and r["partition"] == 1,
    }
    assert 9 not in values(snapshot_rows(log, ["p1", "p2"]))
    check(["p1", "p2"], both)
    commit(y)
    check(["p1", "p2"], both)
    assert 9 in values(snapshot_rows(log, ["p1", "p2"]))


def test_a_commit_whose_marker_is_held_back_is_read_by_its_decision(
    spark: Any, tmp_path: Path
) -> None:
    """C commits (PREPARE_COMMIT written) and its markers go out in the
    background: the one for p1 is held. Meanwhile another client appends 11 to
    p1, taking the offset the marker was headed for. Queries now, and after the
    marker lands (at the next offset): every reader shows C in both partitions,
    and 11, as the library does."""
    from arrowlog.storage.url import open_store
    from arrowlog.testing.scripted import ScriptedStore

    spec = local(tmp_path)
    scripted = ScriptedStore(open_store(spec.url, spec.options))
    log = arrowlog.connect(scripted)
    other = spec.connect()
    log.create_topic("t", SCHEMA, partitions=2)
    log.append("t", batch(1), partition=0)
    log.append("t", batch(10), partition=1)
    c = begin(log, "c")
    c.send("t", batch(6), partition=0)
    c.send("t", batch(60), partition=1)
    c.flush()
    gate = scripted.hold("put_if_absent", "t/1/segments/*")
    try:
        c.commit_transaction()
        held = gate.wait_reached()
        other.append("t", batch(11), partition=1)  # takes the marker's key
        assert held == "t/1/segments/00000000000000000002.arrow"
        assert values(snapshot_rows(other, "t")) == [1, 6, 10, 11, 60]
        cases: dict[str, Keep] = {
            "true": lambda r: True,
            "partition = 1 and offset >= 1": lambda r: r["partition"] == 1 and r["offset"] >= 1,
        }
        same_rows(spark, spec, other, "t", cases, options={"topic": "t"})
    finally:
        gate.release()
    c.flush()
    assert [s.control for s in other.partition("t", 1).summaries()] == [False, False, False, True]
    same_rows(spark, spec, other, "t", cases, options={"topic": "t"})


def test_read_uncommitted_across_a_compaction_of_aborted_records(
    spark: Any, tmp_path: Path
) -> None:
    """read_uncommitted shows an aborted transaction's records until compaction
    leaves them out of its object; one DataFrame per reader, queried before and
    after the compaction, reads what the library reads each time."""
    spec = local(tmp_path)
    log = spec.connect()
    log.create_topic("t", SCHEMA, partitions=2, config=TopicConfig(checkpoint_interval=2))
    log.append("t", batch(1), partition=0)
    x = begin(log, "x")
    x.send("t", batch(2), partition=0)
    x.send("t", batch(20), partition=1)
    x.abort_transaction()
    x.flush()
    for v in range(3, 7):
        log.append("t", batch(v), partition=0)
    options = {"topic": "t", "isolationLevel": "read_uncommitted"}
    cases: dict[str, Keep] = {
        "true": lambda r: True,
        "partition = 0 and offset between 1 and 3": (
            lambda r: r["partition"] == 0 and 1 <= r["offset"] <= 3
        ),
    }
    assert 2 in values(snapshot_rows(log, "t", isolation_level="read_uncommitted"))
    same_rows(spark, spec, log, "t", cases, options=options, uncommitted=True)
    assert log.maintenance.compact(["t"], target_bytes=MIN_TARGET_BYTES)
    assert 2 not in values(snapshot_rows(log, "t", isolation_level="read_uncommitted"))
    same_rows(spark, spec, log, "t", cases, options=options, uncommitted=True)


# --- findings ----------------------------------------------------------------------


def test_two_scans_of_one_dataframe_in_one_query_each_read_their_own_rows(
    spark: Any, tmp_path: Path
) -> None:
    """Log: :func:`held_log` (snapshot 1 2 3 4 | 30 | 20 21). Queries, on one
    loaded DataFrame ``df`` (and a temp view of it):

    - ``df.filter("partition = 0").union(df.filter("partition = 1"))``
    - ``df.union(df.filter("partition = 2"))``
    - ``select * from view where partition = 0 union all ... where partition = 2``
    - ``df.filter("partition = 0")`` joined with ``df.filter("partition = 1")`` on
      ``topic``: a count

    Every reader: [1, 2, 3, 4, 30]; [1, 2, 3, 4, 20, 20, 21, 21, 30];
    [1, 2, 3, 4, 20, 21]; 4. Spark builds every scan of a query (pushFilters
    each) before it plans their partitions, and one provider serves every scan
    of the DataFrame: each scan must read its own filters' plan, not the last
    one pushed."""
    spec = local(tmp_path)
    log = held_log(spec)
    every = snapshot_rows(log, "t")
    p = {n: sorted(r["v"] for r in every if r["partition"] == n) for n in range(3)}
    want = {
        "union": sorted(p[0] + p[1]),
        "union with itself": sorted(values(every) + p[2]),
        "view twice": sorted(p[0] + p[2]),
        "self-join": len(p[0]) * len(p[1]),
    }
    got = {}
    for reader in READERS:
        df = load(spark, spec, reader, topic="t")
        df.createOrReplaceTempView(f"held_{reader.replace('-', '_')}")
        view = f"held_{reader.replace('-', '_')}"
        with planning(spark, reader):
            got[reader] = {
                "union": values(df.filter("partition = 0").union(df.filter("partition = 1"))),
                "union with itself": values(df.union(df.filter("partition = 2"))),
                "view twice": values(
                    spark.sql(
                        f"select * from {view} where partition = 0 "
                        f"union all select * from {view} where partition = 2"
                    )
                ),
                "self-join": df.filter("partition = 0")
                .alias("x")
                .join(df.filter("partition = 1").alias("y"), "topic")
                .count(),
            }
    assert got == dict.fromkeys(READERS, want)


def test_a_cached_query_reads_its_own_filter_after_another_query_of_the_read(
    spark: Any, tmp_path: Path
) -> None:
    """Log: :func:`held_log`, nothing changes. ``c = df.filter("partition = 0")
    .cache()``; then ``df.filter("partition = 2").collect()``; then
    ``c.collect()``. Rows of ``c``: [1, 2, 3, 4] whatever the reader. cache()
    builds the scan (and pushes its filter) but plans its partitions only when
    the cache is filled, after the other query's pushdown: the scan must keep
    its own filters. The same holds for any planned but not yet run query."""
    spec = local(tmp_path)
    log = held_log(spec)
    want = values(snapshot_rows(log, "t", keep=lambda r: r["partition"] == 0))
    got = {}
    for reader in READERS:
        df = load(spark, spec, reader, topic="t")
        with planning(spark, reader):
            cached = df.filter("partition = 0").cache()
            try:
                assert values(df.filter("partition = 2")) == [20, 21]
                got[reader] = values(cached)
            finally:
                cached.unpersist()
    assert got == dict.fromkeys(READERS, want)


def test_a_query_run_again_after_compaction_and_vacuum_reads_the_same_rows(
    spark: Any, tmp_path: Path
) -> None:
    """Log: topic t (checkpoint every 2 segments, delete delay 100 ms), 0..7 in
    eight segments. Each reader's ``df.collect()`` (the DataFrame's plan is made
    once, at its first action); then compact and, the delay over, vacuum (the
    small segments are removed); then ``df.collect()`` again, which runs the same
    plan. Every reader reads [0..7] both times: the Python reader's read_task
    and the JVM reader's executor (asking the planner) find a removed segment's
    records in the compacted object. A long query whose tasks run after a
    compaction and vacuum meets the same."""
    spec = local(tmp_path)
    log = spec.connect()
    log.create_topic("t", SCHEMA, config=TopicConfig(delete_delay_ms=100, checkpoint_interval=2))
    for v in range(8):
        log.append("t", batch(v))
    frames = {r: load(spark, spec, r, topic="t") for r in READERS}
    first = {}
    for reader, df in frames.items():
        with planning(spark, reader):
            first[reader] = values(df)
    assert first == {r: list(range(8)) for r in READERS}
    assert log.maintenance.compact(["t"], target_bytes=MIN_TARGET_BYTES)
    time.sleep(2.2)  # the delay, on the store's clock (seconds)
    removed = [r.key for r in log.maintenance.vacuum(["t"]) if "/segments/" in r.key]
    assert "t/0/segments/00000000000000000000.arrow" in removed
    again: dict[str, Any] = {}
    for reader, df in frames.items():
        with planning(spark, reader):
            try:
                again[reader] = values(df)
            except Exception as e:  # noqa: BLE001 - the failure is the finding
                again[reader] = error_name(e)
    assert again == first


def test_a_timestamp_bound_finer_than_the_columns_unit_prunes_no_matching_segment(
    spark: Any, tmp_path: Path
) -> None:
    """Log: topic t with millisecond columns ``tz`` (timestamp[ms, UTC]) and
    ``ntz`` (timestamp[ms]), two segments: v=1 at 2024-01-01 00:00:00.001 and
    v=3 at .003. Query: ``tz < timestamp_micros(1704067200001500)`` (.0015), and
    the same on ``ntz``. Spark keeps v=1 (.001 < .0015). Rows today: tz: jvm
    [1], python [1], python-pushdown []; ntz: jvm [], python [1],
    python-pushdown []. ``stats._comparable`` turns the bound into the column's
    unit with ``pa.scalar(value, type=t)``, which floors .0015 to .001, and
    ``lo < v`` (.001 < .001) then proves no row matches. (The JVM keeps the tz
    segment only because its naive datetime bound is not usable on a tz column
    at all: that column is never pruned by the JVM reader.)"""
    fields: list[pa.Field[Any]] = [
        pa.field("tz", pa.timestamp("ms", tz="UTC")),
        pa.field("ntz", pa.timestamp("ms")),
        pa.field("v", pa.int64()),
    ]
    schema = pa.schema(fields)
    spec = local(tmp_path)
    log = spec.connect()
    log.create_topic("t", schema)
    for ms, v in ((1704067200001, 1), (1704067200003, 3)):
        log.append("t", pa.record_batch({"tz": [ms], "ntz": [ms], "v": [v]}, schema=schema))
    bound = "timestamp_micros(1704067200001500)"
    got = {}
    for reader in READERS:
        df = load(spark, spec, reader, topic="t")
        with planning(spark, reader):
            got[reader] = (
                values(df.filter(f"tz < {bound}")),
                values(df.filter(f"ntz < cast({bound} as timestamp_ntz)")),
            )
    assert got == {r: ([1], [1]) for r in READERS}


def test_a_timestamp_whose_first_offset_lies_past_the_lso_reads_to_the_lso(
    spark: Any, tmp_path: Path
) -> None:
    """Log: topic t, one partition: 1 (plain), 2 (an open transaction's: the LSO
    is 1), 3 (plain, appended later, at ``t3``). Queries:

    - ``startingTimestamp=t3, startingOffsetsByTimestampStrategy=latest``: every
      reader fails, ``OffsetOutOfRangeError: t/0: starting offset 2 is after
      ending offset 1``;
    - ``endingTimestamp=t3``: every reader fails, ``ending offset 2 is past the
      latest offset 1 (the LSO under read_committed)``.

    The first record at or after t3 cannot be read under read_committed (it is
    past the LSO); Kafka's ListOffsets under READ_COMMITTED only answers offsets
    below the LSO, so the Kafka source finds none: the start takes the strategy
    (latest: the LSO, no rows) and the end the latest offset (rows [1]), which
    is what docs/spark.md says of a timestamp with no record at or after it."""
    spec = local(tmp_path)
    log = spec.connect()
    log.create_topic("t", SCHEMA)
    log.append("t", batch(1))
    o = begin(log, "o")
    o.send("t", batch(2), partition=0)
    o.flush()
    time.sleep(0.01)
    log.append("t", batch(3))
    t3 = log.partition("t", 0).summaries()[-1].timestamp_ms
    assert log.stable_offsets("t") == {0: 1}
    cases = {
        "start": {"startingTimestamp": str(t3), "startingOffsetsByTimestampStrategy": "latest"},
        "end": {"endingTimestamp": str(t3)},
    }
    got: dict[str, dict[str, Any]] = {}
    for reader in READERS:
        got[reader] = {}
        for name, options in cases.items():
            with planning(spark, reader):
                try:
                    got[reader][name] = values(load(spark, spec, reader, topic="t", **options))
                except Exception as e:  # noqa: BLE001 - the failure is the finding
                    got[reader][name] = error_name(e)
    assert got == {r: {"start": [], "end": [1]} for r in READERS}
