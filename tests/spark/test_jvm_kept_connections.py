"""Adversarial tests of the JVM reader's planner, which keeps its connections
between the plans of a driver, and of the JVM reader's zero-copy segment reads.

The planner's guarantee: every plan made with kept connections is the plan a
brand-new connection makes at that moment, whatever happened to the log in
between (transactions decided, records deleted, segments compacted and vacuumed,
topics deleted, created again or altered, a root emptied and filled anew, other
storage options, other roots). Each test changes the log behind a warm
:class:`Clients` and compares its plan with a fresh one's, and with the rows the
log really holds.

The reader's guarantee: the same rows as the Python reader for every type, nulls
and cut ranges (starting at an offset that is not a multiple of 8: validity and
boolean bits), compressed segments, a damaged segment fails the task naming it,
and no Arrow memory is left behind after many queries.

Origin: the attack on the JVM planner and reader (was tests/spark/test_planner_attack.py)."""

from __future__ import annotations

import contextlib
import datetime
import os
import shutil
import threading
import time
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import pyarrow as pa
import pytest

import arrowlog
from arrowlog import Compression, TopicConfig
from arrowlog.errors import UnknownTopicOrPartitionError
from arrowlog.maintenance.compaction import MIN_TARGET_BYTES
from arrowlog.spark.jvm_planner import Clients, plan
from arrowlog.spark.plan_wire import PlanAnswer
from tests.support.spark import MASTER, with_options
from tests.support.stores import StoreSpec

#: no grace before a deleted name is created again
QUICK = arrowlog.LogConfig(metadata_max_age_ms=0)
SCHEMA = pa.schema([("v", pa.int64())])


def request(root: Path | str, topic: str = "t", **options: str) -> dict[str, Any]:
    return {
        "options": {"path": str(root), "topic": topic, "storage.fsync": "false", **options},
        "columns": None,
        "filters": [],
    }


def connect(root: Path) -> arrowlog.ArrowLog:
    return arrowlog.connect(str(root), {"fsync": False}, config=QUICK)


def offsets(planned: Mapping[str, Any]) -> list[tuple[int, int]]:
    """(partition, offset) of every row the plan reads, duplicates kept."""
    out: list[tuple[int, int]] = []
    for task in planned["tasks"]:
        for s in task["segments"]:
            part = s.get("partition", task.get("partition"))
            out.extend((part, o) for o in range(s["lo"], s["hi"]))
    return sorted(out)


def segments(planned: Mapping[str, Any]) -> list[dict[str, Any]]:
    return [s for t in planned["tasks"] for s in t["segments"]]


def same_as_new(root: Path | str, clients: Clients, **options: str) -> PlanAnswer:
    """The plan of the kept connections, checked against a brand-new one's."""
    warm = plan(request(root, **options), clients)
    cold = plan(request(root, **options))
    assert warm == cold
    return warm


# --- the planner: kept connections against the log's changes ------------------


def test_undecided_then_committed_and_aborted_transactions(tmp_path: Path) -> None:
    """A transaction open while a plan is made holds the LSO; committed after it,
    the next plan shows it; an aborted one is never shown; read_uncommitted shows
    the open one."""
    root = tmp_path / "log"
    log = connect(root)
    log.create_topic("t", SCHEMA, partitions=2)
    log.append("t", pa.record_batch({"v": [1]}), partition=0)
    clients = Clients()
    assert len(offsets(same_as_new(root, clients))) == 1

    p = log.producer(transactional_id="tx")
    p.init_transactions()
    p.begin_transaction()
    p.send("t", pa.record_batch({"v": [10, 11]}), partition=0)
    p.send("t", pa.record_batch({"v": [12]}), partition=1)
    # undecided: read_committed stops at the LSO, read_uncommitted shows it
    assert offsets(same_as_new(root, clients)) == [(0, 0)]
    assert len(offsets(same_as_new(root, clients, isolationLevel="read_uncommitted"))) == 4
    p.commit_transaction()
    assert offsets(same_as_new(root, clients)) == [(0, 0), (0, 1), (0, 2), (1, 0)]

    p.begin_transaction()
    p.send("t", pa.record_batch({"v": [20]}), partition=1)
    assert offsets(same_as_new(root, clients)) == [(0, 0), (0, 1), (0, 2), (1, 0)]
    p.abort_transaction()
    p.flush()  # the markers land in the background: the append comes after them
    log.append("t", pa.record_batch({"v": [30]}), partition=1)
    got = same_as_new(root, clients)
    # 1/1 the aborted record, 1/2 its marker, 1/3 the plain append
    assert offsets(got) == [(0, 0), (0, 1), (0, 2), (1, 0), (1, 4)]


def test_a_transaction_left_open_then_expired_by_another_client(tmp_path: Path) -> None:
    """A producer dies with a transaction open; another client aborts it. The kept
    connection saw it open (holding the LSO); the next plan must not show it."""
    root = tmp_path / "log"
    log = connect(root)
    log.create_topic("t", SCHEMA)
    p = log.producer(transactional_id="dead", transaction_timeout_ms=1000)
    p.init_transactions()
    p.begin_transaction()
    p.send("t", pa.record_batch({"v": [1, 2]}))
    clients = Clients()
    assert offsets(same_as_new(root, clients)) == []
    other = connect(root)
    other.admin.abort_transaction("dead")
    other.append("t", pa.record_batch({"v": [3]}))
    # the aborted records at 0 and 1 (no partition was registered for a marker)
    got = offsets(same_as_new(root, clients))
    assert got == [(0, 2)] or got == [(0, 3)]


def test_delete_records_and_vacuum_move_the_start(tmp_path: Path) -> None:
    root = tmp_path / "log"
    log = connect(root)
    log.create_topic("t", SCHEMA, config=TopicConfig(delete_delay_ms=100, checkpoint_interval=2))
    for v in range(6):
        log.append("t", pa.record_batch({"v": [v, v]}))
    clients = Clients()
    assert len(offsets(same_as_new(root, clients))) == 12
    log.delete_records("t", 0, 5)  # inside the third segment
    got = same_as_new(root, clients)
    assert offsets(got) == [(0, o) for o in range(5, 12)]
    time.sleep(0.2)
    log.maintenance.vacuum(["t"])
    assert offsets(same_as_new(root, clients)) == [(0, o) for o in range(5, 12)]
    # a start below the log start: failOnDataLoss (default true) is an error
    with pytest.raises(Exception, match=r"(?i)OffsetOutOfRange|data loss|log start"):
        plan(request(root, startingOffsets='{"t": {"0": 0}}'), clients)
    lost = same_as_new(root, clients, startingOffsets='{"t": {"0": 0}}', failOnDataLoss="false")
    assert offsets(lost) == [(0, o) for o in range(5, 12)]


def test_retention_moves_the_start_for_a_kept_connection(tmp_path: Path) -> None:
    root = tmp_path / "log"
    log = connect(root)
    log.create_topic("t", SCHEMA, config=TopicConfig(delete_delay_ms=100))
    for v in range(3):
        log.append("t", pa.record_batch({"v": [v]}))
    clients = Clients()
    assert len(offsets(same_as_new(root, clients))) == 3
    time.sleep(0.3)
    log.alter_topic_config("t", retention_ms=100)
    log.append("t", pa.record_batch({"v": [3]}))
    time.sleep(0.05)
    same_as_new(root, clients)
    time.sleep(0.3)
    log.maintenance.vacuum(["t"])
    same_as_new(root, clients)


def test_compaction_vacuum_and_a_stray_at_a_freed_key(tmp_path: Path) -> None:
    """Writer A knows the log ends at 1; B appends 1..19, compacts them into one
    object and, the delay over, vacuum removes the small segments: key 1 is free
    again, and A's append lands there (a stray). A kept connection knew the small
    segments (their keys, their append ids) and plans as a new one does at every
    step: each offset once, from the compacted object."""
    root = tmp_path / "log"
    a = connect(root)
    a.create_topic("t", SCHEMA, config=TopicConfig(delete_delay_ms=100, checkpoint_interval=4))
    a.append("t", pa.record_batch({"v": [0]}))
    b = connect(root)
    for v in range(1, 20):
        b.append("t", pa.record_batch({"v": [v]}))
    clients = Clients()
    assert offsets(same_as_new(root, clients)) == [(0, o) for o in range(20)]
    assert b.maintenance.compact(["t"], target_bytes=MIN_TARGET_BYTES)
    after = same_as_new(root, clients)
    assert offsets(after) == [(0, o) for o in range(20)]
    time.sleep(2.2)  # the delay, on the store's clock (seconds)
    removed = [r.key for r in b.maintenance.vacuum(["t"]) if r.key.endswith(".arrow")]
    assert "t/0/segments/00000000000000000001.arrow" in removed
    assert offsets(same_as_new(root, clients)) == [(0, o) for o in range(20)]
    # the stray, at key 1 (refused or not, its object may be there)
    with contextlib.suppress(arrowlog.ArrowLogError):
        a.append("t", pa.record_batch({"v": [100]}))
    got = same_as_new(root, clients)
    ends = offsets(got)
    assert ends[:20] == [(0, o) for o in range(20)] and len(ends) == len(set(ends))
    b.append("t", pa.record_batch({"v": [200]}))
    got = same_as_new(root, clients)
    ends = offsets(got)
    assert ends[:20] == [(0, o) for o in range(20)] and len(ends) == len(set(ends))


def test_a_root_emptied_and_filled_with_fewer_records(tmp_path: Path) -> None:
    root = tmp_path / "log"
    log = connect(root)
    log.create_topic("t", SCHEMA, partitions=3)
    for p in range(3):
        for v in range(4):
            log.append("t", pa.record_batch({"v": [v]}), partition=p)
    clients = Clients()
    assert len(offsets(same_as_new(root, clients))) == 12
    shutil.rmtree(root)
    log = connect(root)
    log.create_topic("t", SCHEMA, partitions=2)
    log.append("t", pa.record_batch({"v": [7]}), partition=1)
    got = same_as_new(root, clients)
    assert offsets(got) == [(1, 0)]
    # emptied and not filled: no topic at all
    shutil.rmtree(root)
    root.mkdir()
    with pytest.raises(UnknownTopicOrPartitionError):
        plan(request(root), clients)


def test_a_root_restored_from_an_older_backup(tmp_path: Path) -> None:
    """A root restored from a copy taken earlier (a bucket backup): the same topic
    config object (the same change id), fewer segments than the connection knew;
    then a new record is written at the key of a segment the connection knew."""
    root = tmp_path / "log"
    log = connect(root)
    log.create_topic("t", SCHEMA)
    for v in range(2):
        log.append("t", pa.record_batch({"v": [v, v]}))
    backup = tmp_path / "backup"
    shutil.copytree(root, backup)
    log.append("t", pa.record_batch({"v": [2, 2]}))  # 4..6, not in the backup
    clients = Clients()
    assert len(offsets(same_as_new(root, clients))) == 6
    shutil.rmtree(root)
    shutil.copytree(backup, root)
    try:
        assert offsets(same_as_new(root, clients)) == [(0, o) for o in range(4)]
    finally:  # the second half runs even when the first fails
        log = connect(root)
        log.append("t", pa.record_batch({"v": [9]}))  # at key 4 again, one record
        cold = plan(request(root))
        assert offsets(cold) == [(0, o) for o in range(5)]
    assert offsets(same_as_new(root, clients)) == [(0, o) for o in range(5)]


def test_topic_deleted_and_created_with_fewer_then_more_partitions(tmp_path: Path) -> None:
    root = tmp_path / "log"
    log = connect(root)
    log.create_topic("t", SCHEMA, partitions=4)
    for p in range(4):
        log.append("t", pa.record_batch({"v": [p, p]}), partition=p)
    clients = Clients()
    assert len(offsets(same_as_new(root, clients))) == 8
    log.delete_topic("t")
    log.create_topic("t", SCHEMA, partitions=1)
    log.append("t", pa.record_batch({"v": [9]}))
    assert offsets(same_as_new(root, clients)) == [(0, 0)]
    log.create_partitions("t", 3)
    log.append("t", pa.record_batch({"v": [10]}), partition=2)
    assert offsets(same_as_new(root, clients)) == [(0, 0), (2, 0)]
    # an assign of a partition that came with the alteration
    assigned = same_as_new(root, clients, assign='{"t": [2]}', topic="")
    assert offsets(assigned) == [(2, 0)]


def test_several_topics_one_deleted_in_between(tmp_path: Path) -> None:
    root = tmp_path / "log"
    log = connect(root)
    for name in ("a", "b"):
        log.create_topic(name, SCHEMA)
        log.append(name, pa.record_batch({"v": [1, 2]}))
    clients = Clients()
    assert len(offsets(same_as_new(root, clients, topic="a,b"))) == 4
    log.delete_topic("b")
    log.create_topic("b", SCHEMA)
    log.append("b", pa.record_batch({"v": [5]}))
    log.append("a", pa.record_batch({"v": [3]}))
    got = same_as_new(root, clients, topic="a,b")
    assert len(offsets(got)) == 4
    pattern = same_as_new(root, clients, topic="", subscribePattern="[ab]")
    assert len(offsets(pattern)) == 4


def test_two_roots_with_the_same_names_and_more_roots_than_kept(tmp_path: Path) -> None:
    """Nine roots (one more than the connections kept), each topic `t` with as many
    rows as its number, planned round after round: never another root's data."""
    clients = Clients()
    roots = [tmp_path / f"r{i}" for i in range(9)]
    for i, root in enumerate(roots):
        log = connect(root)
        log.create_topic("t", SCHEMA)
        log.append("t", pa.record_batch({"v": list(range(i + 1))}))
    for _ in range(2):
        for i, root in enumerate(roots):
            got = same_as_new(root, clients)
            assert len(offsets(got)) == i + 1
            assert all(str(root) in s["location"] for s in segments(got))
    # the same root spelled another way (trailing slash, file://)
    for spelled in (f"{roots[3]}/", f"file://{roots[3]}"):
        got = plan(request(spelled), clients)
        assert len(offsets(got)) == 4


def test_timestamps_after_more_appends(tmp_path: Path) -> None:
    root = tmp_path / "log"
    log = connect(root)
    log.create_topic("t", SCHEMA)
    log.append("t", pa.record_batch({"v": [1]}))
    clients = Clients()
    same_as_new(root, clients)
    time.sleep(0.01)
    cut = int(time.time() * 1000)
    time.sleep(0.01)
    log.append("t", pa.record_batch({"v": [2]}))
    got = same_as_new(root, clients, startingTimestamp=str(cut))
    assert offsets(got) == [(0, 1)]


def test_planning_from_threads_at_once_while_the_log_grows(tmp_path: Path) -> None:
    """Plans of one Clients from several threads (a driver can plan queries from
    several threads) while another thread appends: each plan a prefix of the log,
    never a hole or a duplicate."""
    root = tmp_path / "log"
    log = connect(root)
    log.create_topic("t", SCHEMA, partitions=2, config=TopicConfig(checkpoint_interval=2))
    clients = Clients()
    errors: list[BaseException] = []
    stop = threading.Event()

    def planner() -> None:
        try:
            while not stop.is_set():
                got = offsets(plan(request(root), clients))
                for p in (0, 1):
                    mine = [o for q, o in got if q == p]
                    assert mine == list(range(len(mine)))
        except BaseException as e:  # noqa: BLE001 - reported below
            errors.append(e)
            stop.set()

    threads = [threading.Thread(target=planner) for _ in range(3)]
    for t in threads:
        t.start()
    for v in range(30):
        log.append("t", pa.record_batch({"v": [v]}), partition=v % 2)
    stop.set()
    for t in threads:
        t.join()
    assert not errors, errors[0]
    assert len(offsets(same_as_new(root, clients))) == 30


def test_a_topic_created_after_a_failed_plan_and_a_pattern_that_gains_topics(
    tmp_path: Path,
) -> None:
    root = tmp_path / "log"
    log = connect(root)
    log.create_topic("x", SCHEMA)
    clients = Clients()
    with pytest.raises(UnknownTopicOrPartitionError):
        plan(request(root), clients)
    log.create_topic("t", SCHEMA)
    log.append("t", pa.record_batch({"v": [1]}))
    assert offsets(same_as_new(root, clients)) == [(0, 0)]
    assert len(offsets(same_as_new(root, clients, topic="", subscribePattern="t.*"))) == 1
    log.create_topic("t2", SCHEMA)
    log.append("t2", pa.record_batch({"v": [1, 2]}))
    got = same_as_new(root, clients, topic="", subscribePattern="t.*")
    assert sorted(t["topic"] for t in got["tasks"]) == ["t", "t2"]
    log.delete_topic("t")
    got = same_as_new(root, clients, topic="", subscribePattern="t.*")
    assert [t["topic"] for t in got["tasks"]] == ["t2"]


@pytest.mark.s3
def test_other_credentials_for_the_same_root_on_s3(tmp_path: Path, s3_server: Any) -> None:
    """The same S3 root with other credentials: the kept connection of the first
    must not sign the second's URLs (nor plan with the first's rights)."""
    from urllib.parse import parse_qs, urlsplit

    url = s3_server.url(f"attack-{os.getpid()}-{time.monotonic_ns()}")
    good = dict(s3_server.storage_options)
    log = arrowlog.connect(url, good)
    log.create_topic("t", SCHEMA)
    log.append("t", pa.record_batch({"v": [1, 2]}))

    def s3_request(options: dict[str, Any]) -> dict[str, Any]:
        from arrowlog.spark.options import spark_storage_options

        return {
            "options": {"path": url, "topic": "t", **spark_storage_options(options)},
            "columns": None,
            "filters": [],
        }

    def signer(planned: Mapping[str, Any]) -> str:
        [seg] = segments(planned)
        query = parse_qs(urlsplit(seg["location"]).query)
        return str(query["X-Amz-Credential"][0].split("/")[0])

    clients = Clients()
    assert signer(plan(s3_request(good), clients)) == good["key"]
    other = {**good, "key": "someone-else", "secret": "not-the-secret"}
    try:
        cold: PlanAnswer | None = plan(s3_request(other))
    except arrowlog.ArrowLogError:
        cold = None  # the server checks credentials: the kept one must fail too
    if cold is None:
        with pytest.raises(arrowlog.ArrowLogError):
            plan(s3_request(other), clients)
    else:
        assert signer(plan(s3_request(other), clients)) == "someone-else"
    assert signer(plan(s3_request(good), clients)) == good["key"]


# --- the JVM reader: zero-copy segments against the Python reader -------------

spark_only = pytest.mark.skipif(
    bool(os.environ.get("ARROWLOG_SPARK_MIN")), reason="the jar is built for make setup's pyspark"
)
UTC = datetime.timezone.utc
#: fixed-width columns read by address, with nulls where a bitmap's bit is not at
#: a byte's start, and booleans (bits themselves)
FIXED_FIELDS: list[pa.Field[Any]] = [
    pa.field("i8", pa.int8()),
    pa.field("i16", pa.int16()),
    pa.field("i32", pa.int32()),
    pa.field("i64", pa.int64()),
    pa.field("f32", pa.float32()),
    pa.field("f64", pa.float64()),
    pa.field("b", pa.bool_()),
    pa.field("d", pa.date32()),
    pa.field("ts", pa.timestamp("us", tz="UTC")),
    pa.field("ntz", pa.timestamp("us")),
    pa.field("ms", pa.timestamp("ms", tz="UTC")),
    pa.field("s", pa.string()),
    pa.field("dec", pa.decimal128(10, 2)),
]
FIXED = pa.schema(FIXED_FIELDS)


def fixed_rows(start: int, n: int) -> pa.RecordBatch:
    import decimal

    idx = range(start, start + n)
    base = datetime.datetime(2024, 1, 1, tzinfo=UTC)

    def nulled(values: list[Any], every: int) -> list[Any]:
        return [None if (start + k) % every == 0 else v for k, v in enumerate(values)]

    cols = {
        "i8": nulled([i % 120 - 60 for i in idx], 3),
        "i16": nulled([i * 3 - 500 for i in idx], 5),
        "i32": nulled([i * 7 for i in idx], 7),
        "i64": nulled([i * 10**11 for i in idx], 2),
        "f32": nulled([i / 8 for i in idx], 3),
        "f64": nulled([i / 3 for i in idx], 4),
        "b": nulled([i % 3 == 1 for i in idx], 5),
        "d": nulled([datetime.date(2020, 1, 1) + datetime.timedelta(days=i) for i in idx], 6),
        "ts": nulled([base + datetime.timedelta(microseconds=i * 1001) for i in idx], 7),
        "ntz": nulled(
            [datetime.datetime(2024, 1, 1) + datetime.timedelta(seconds=i) for i in idx], 9
        ),
        "ms": nulled([base + datetime.timedelta(milliseconds=i) for i in idx], 11),
        "s": nulled([f"s{i}" * (i % 4) for i in idx], 3),
        "dec": nulled([decimal.Decimal(i) / 100 for i in idx], 4),
    }
    return pa.record_batch(cols, schema=FIXED)


def local_spec(tmp_path: Path, name: str = "log") -> StoreSpec:
    return StoreSpec("local", str(tmp_path / name), {"fsync": False})


def read(spark: Any, spec: StoreSpec, reader: str, **options: str) -> Any:
    return with_options(spark.read.format("arrowlog"), spec, {"reader": reader, **options}).load()


def rows_of(df: Any) -> list[tuple[Any, ...]]:
    return sorted((tuple(r) for r in df.collect()), key=repr)


@spark_only
@pytest.mark.spark
@pytest.mark.parametrize("compression", [Compression.NONE, Compression.LZ4, Compression.ZSTD])
def test_cut_ranges_at_odd_offsets_with_nulls_read_the_same(
    spark: Any, tmp_path: Path, compression: Compression
) -> None:
    """Segments of 37 rows with nulls at every few rows, read from offsets inside
    segments that are not multiples of 8: a vector read by address must take the
    cut's first row's validity bit and boolean bit, not the segment's first."""
    spec = local_spec(tmp_path)
    log = spec.connect()
    log.create_topic("f", FIXED, partitions=2, config=TopicConfig(compression=compression))
    for k in range(3):
        for p in (0, 1):
            log.append("f", fixed_rows(37 * k + p, 37), partition=p)
    cuts = [
        ('{"f": {"0": 3, "1": 13}}', '{"f": {"0": 110, "1": 101}}'),
        ('{"f": {"0": 38, "1": 1}}', '{"f": {"0": 45, "1": 2}}'),  # a few rows of one
        ('{"f": {"0": 74, "1": 73}}', '{"f": {"0": 75, "1": 111}}'),
    ]
    for start, end in cuts:
        opts = {"topic": "f", "startingOffsets": start, "endingOffsets": end}
        jvm = rows_of(read(spark, spec, "jvm", **opts))
        python = rows_of(read(spark, spec, "python", **opts))
        assert jvm == python
        assert jvm and len(jvm) == len({(r[-3], r[-2]) for r in jvm})
    if compression != Compression.NONE:
        return  # the rest reads the same vectors, decompressed or not
    # one segment split between tasks (minPartitions): each task's cut its own
    opts = {"topic": "f", "minPartitions": "9"}
    whole = rows_of(read(spark, spec, "python", topic="f"))
    assert rows_of(read(spark, spec, "jvm", **opts)) == whole
    # filters on the fixed-width columns (evaluated on the vectors) and aggregates
    agg = [
        *("count(i8)", "sum(i16)", "sum(i32)", "max(i64)", "sum(f32)", "count(b)"),
        *("sum(cast(b as int))", "min(d)", "max(ts)", "count(ntz)", "max(ms)", "sum(dec)"),
    ]
    jvm_agg, python_agg = (
        read(spark, spec, reader, topic="f", startingOffsets='{"f": {"0": 5, "1": 9}}')
        .where("b or i8 is null")
        .selectExpr(*agg)
        .collect()
        for reader in ("jvm", "python")
    )
    assert jvm_agg == python_agg


@spark_only
@pytest.mark.spark
def test_rows_kept_past_their_batch_are_not_freed_memory(spark: Any, tmp_path: Path) -> None:
    """Operators that keep rows beyond the batch they came from (a sort, collect_list,
    a cached DataFrame, a distinct of strings, a local checkpoint): with batches that
    are slices of a segment's memory, freed at the next segment or the task's end, a
    row kept by reference would read freed (or reused) memory."""
    spec = local_spec(tmp_path)
    log = spec.connect()
    log.create_topic("f", FIXED, partitions=2, config=TopicConfig(compression=Compression.NONE))
    for k in range(8):
        log.append("f", fixed_rows(50 * k, 50), partition=k % 2)

    def results(reader: str) -> list[Any]:
        df = read(spark, spec, reader, topic="f")
        out: list[Any] = []
        out.append([tuple(r) for r in df.orderBy("offset", "partition").collect()])
        lists = df.groupBy("partition").agg({"s": "collect_list", "i64": "collect_list"})
        out.append(
            sorted(
                (r[0], sorted(map(repr, r[1])), sorted(map(repr, r[2]))) for r in lists.collect()
            )
        )
        out.append(sorted(map(repr, df.select("s", "d").distinct().collect())))
        cached = df.cache()
        cached.count()
        out.append(rows_of(cached))
        cached.unpersist()
        out.append(rows_of(df.localCheckpoint()))
        out.append(sorted(map(repr, df.rdd.map(lambda r: (r["s"], r["f64"], r["b"])).collect())))
        return out

    assert results("jvm") == results("python")


def off_heap(spark: Any) -> int:
    """Bytes of memory off the JVM's heap: Spark's Arrow allocator, Netty's direct
    memory (Arrow's allocators take theirs there, pooled) and NIO's direct buffers."""
    jvm = spark._jvm
    management = jvm.java.lang.management
    pools = management.ManagementFactory.getPlatformMXBeans(
        management.BufferPoolMXBean._java_lang_class
    )
    return (
        int(jvm.org.apache.spark.sql.util.ArrowUtils.rootAllocator().getAllocatedMemory())
        + int(jvm.io.netty.util.internal.PlatformDependent.usedDirectMemory())
        + sum(int(b.getMemoryUsed()) for b in pools)
    )


@spark_only
@pytest.mark.spark
@pytest.mark.skipif(MASTER.startswith("local-cluster"), reason="the executors' memory is elsewhere")
def test_many_small_queries_leave_no_memory_behind(spark: Any, tmp_path: Path) -> None:
    """200 small queries, each reading about 1 MiB of decompressed columns (whole
    reads, a limit that stops a task early, failing reads of a damaged segment):
    a reader that kept a segment's memory would grow the JVM's off-heap memory by
    about 200 MiB; a pool's few chunks are all it may take."""
    import numpy as np

    spec = local_spec(tmp_path)
    log = spec.connect()
    fields: list[pa.Field[Any]] = [pa.field("v", pa.int64()), pa.field("s", pa.string())]
    schema = pa.schema(fields)
    log.create_topic("f", schema, config=TopicConfig(compression=Compression.ZSTD))
    rng = np.random.default_rng(5)
    n = 16_000
    for _ in range(4):
        log.append(
            "f",
            pa.record_batch(
                [pa.array(rng.integers(0, 2**62, n)), pa.array([f"s{i}" for i in range(n)])],
                schema=schema,
            ),
        )
    log.create_topic("bad", SCHEMA, config=TopicConfig(compression=Compression.NONE))
    for k in range(3):
        log.append("bad", pa.record_batch({"v": list(range(100 * k, 100 * k + 100))}))
    victim = sorted((Path(spec.url) / "bad" / "0" / "segments").glob("*.arrow"))[2]
    data = bytearray(victim.read_bytes())
    data[len(data) // 2] ^= 0x01
    victim.write_bytes(bytes(data))

    def query(i: int) -> None:
        if i % 20 == 19:
            with pytest.raises(Exception, match="CorruptSegmentError"):
                read(spark, spec, "jvm", topic="bad").selectExpr("sum(v)").collect()
        elif i % 4 == 0:
            assert len(read(spark, spec, "jvm", topic="f").limit(3).collect()) == 3
        else:
            got = read(spark, spec, "jvm", topic="f").selectExpr("count(s)", "count(v)").collect()
            assert tuple(got[0]) == (4 * n, 4 * n)

    for i in range(10):  # the pools' first chunks
        query(i)
    before = off_heap(spark)
    for i in range(200):
        query(i)
    grown = off_heap(spark) - before
    assert grown < 48 * 2**20, f"off-heap memory grew by {grown} bytes"


@spark_only
@pytest.mark.spark
@pytest.mark.parametrize("compression", [Compression.NONE, Compression.LZ4, Compression.ZSTD])
@pytest.mark.parametrize("damage", ["last byte", "first byte", "truncated", "grown"])
def test_a_damaged_segment_in_the_middle_of_a_task_fails_it_naming_the_object(
    spark: Any, tmp_path: Path, compression: Compression, damage: str
) -> None:
    """Three segments in one task; the second damaged at its edges (the footer, the
    magic), cut short or given bytes more: the task fails naming it."""
    spec = local_spec(tmp_path)
    log = spec.connect()
    log.create_topic("c", FIXED, config=TopicConfig(compression=compression))
    for k in range(3):
        log.append("c", fixed_rows(40 * k, 40))
    victim = sorted((Path(spec.url) / "c" / "0" / "segments").glob("*.arrow"))[1]
    data = bytearray(victim.read_bytes())
    if damage == "last byte":
        data[-1] ^= 0x01
    elif damage == "first byte":
        data[0] ^= 0x01
    elif damage == "truncated":
        del data[-10:]
    else:
        data += b"\0" * 8
    victim.write_bytes(bytes(data))
    with pytest.raises(
        Exception, match=rf"(CorruptSegment|SegmentNotFound)Error: \S*{victim.name}"
    ):
        read(spark, spec, "jvm", topic="c").selectExpr("sum(i32)", "count(s)").collect()
    with pytest.raises(
        Exception, match=rf"(CorruptSegment|SegmentNotFound)Error: \S*{victim.name}"
    ):
        read(spark, spec, "jvm", topic="c").count()


@spark_only
@pytest.mark.spark
def test_queries_from_threads_on_two_roots_with_the_same_names(spark: Any, tmp_path: Path) -> None:
    """Queries from several driver threads at once, on two roots that hold a topic of
    the same name, one growing between queries, and a union of both in one query:
    each sees its own root's rows, all of them."""
    specs = [local_spec(tmp_path, "a"), local_spec(tmp_path, "b")]
    logs = [spec.connect() for spec in specs]
    for i, log in enumerate(logs):
        log.create_topic("t", SCHEMA, partitions=2)
        log.append("t", pa.record_batch({"v": [1000 * i + k for k in range(10)]}))
    errors: list[BaseException] = []
    lock = threading.Lock()
    appended = [10, 10]

    def work(which: int) -> None:
        try:
            for _ in range(6):
                with lock:
                    floor = appended[which]
                got = [
                    r[0] for r in read(spark, specs[which], "jvm", topic="t").select("v").collect()
                ]
                assert len(got) >= floor
                assert all(1000 * which <= v < 1000 * which + 1000 for v in got), got
                assert len(got) == len(set(got))
        except BaseException as e:  # noqa: BLE001 - reported below
            errors.append(e)

    threads = [threading.Thread(target=work, args=(k % 2,)) for k in range(4)]
    for t in threads:
        t.start()
    for k in range(6):
        for i, log in enumerate(logs):
            log.append("t", pa.record_batch({"v": [1000 * i + 10 + k]}), partition=1)
            with lock:
                appended[i] += 1
    for t in threads:
        t.join()
    assert not errors, errors[0]
    both = read(spark, specs[0], "jvm", topic="t").union(read(spark, specs[1], "jvm", topic="t"))
    assert sorted(r[0] for r in both.select("v").collect()) == sorted(
        [*range(16), *range(1000, 1016)]
    )


@spark_only
@pytest.mark.spark
def test_a_root_restored_from_an_older_backup_through_spark(spark: Any, tmp_path: Path) -> None:
    spec = local_spec(tmp_path)
    root = Path(spec.url)
    log = spec.connect()
    log.create_topic("t", SCHEMA)
    for v in range(2):
        log.append("t", pa.record_batch({"v": [v, v]}))
    backup = tmp_path / "backup"
    shutil.copytree(root, backup)
    log.append("t", pa.record_batch({"v": [2, 2]}))  # [4, 6): not in the backup

    def values(reader: str) -> list[int]:
        return sorted(r[0] for r in read(spark, spec, reader, topic="t").select("v").collect())

    assert values("jvm") == [0, 0, 1, 1, 2, 2]
    shutil.rmtree(root)
    shutil.copytree(backup, root)
    log = spec.connect()
    p = log.producer(transactional_id="x")
    p.init_transactions()
    p.begin_transaction()
    p.send("t", pa.record_batch({"v": [66, 66]}))  # [4, 6) again, aborted
    p.abort_transaction()
    log.append("t", pa.record_batch({"v": [7]}))
    assert values("python") == [0, 0, 1, 1, 7]
    failures: list[str] = []
    for _ in range(3):  # "plan the scan again": each query plans anew
        try:
            assert values("jvm") == [0, 0, 1, 1, 7]
        except Exception as e:  # noqa: BLE001 - counted
            failures.append(str(e).split("\n")[0][:200])
    assert not failures, failures


def test_a_transaction_past_its_timeout_with_no_one_to_finish_it(tmp_path: Path) -> None:
    """A producer dies with a transaction open and nobody aborts it: once its
    timeout has passed, a kept connection (which saw it open) plans what a new
    one plans."""
    root = tmp_path / "log"
    log = connect(root)
    log.create_topic("t", SCHEMA)
    log.append("t", pa.record_batch({"v": [0]}))
    p = log.producer(transactional_id="gone", transaction_timeout_ms=1000)
    p.init_transactions()
    p.begin_transaction()
    p.send("t", pa.record_batch({"v": [1, 2]}))
    clients = Clients()
    assert offsets(same_as_new(root, clients)) == [(0, 0)]
    time.sleep(2.2)  # the store's clock counts seconds
    same_as_new(root, clients)
    connect(root).append("t", pa.record_batch({"v": [3]}))
    got = offsets(same_as_new(root, clients))
    assert (0, 1) not in got and (0, 2) not in got


NESTED_FIELDS: list[pa.Field[Any]] = [
    pa.field("ints", pa.list_(pa.int32())),
    pa.field("st", pa.struct([("x", pa.int64()), ("y", pa.string()), ("z", pa.bool_())])),
    pa.field("m", pa.map_(pa.string(), pa.float64())),
    pa.field("nothing", pa.null()),
    pa.field("never_null", pa.int64()),
    pa.field("all_null", pa.int32()),
    pa.field("bits", pa.bool_()),
    pa.field("word", pa.string()),
]
NESTED = pa.schema(NESTED_FIELDS)


def nested_rows(start: int, n: int, nulls: bool) -> pa.RecordBatch:
    idx = list(range(start, start + n))

    def maybe(i: int, v: Any, every: int) -> Any:
        return None if nulls and i % every == 0 else v

    return pa.record_batch(
        {
            "ints": [maybe(i, [i, None, -i][: i % 4], 3) for i in idx],
            "st": [
                maybe(i, {"x": i, "y": maybe(i + 1, f"y{i}", 2), "z": i % 2 == 0}, 5) for i in idx
            ],
            "m": [maybe(i, [(f"k{i}", i / 2), ("c", None)][: i % 3], 4) for i in idx],
            "nothing": [None] * n,
            "never_null": [i * 3 for i in idx],
            "all_null": [None] * n,
            "bits": [maybe(i, i % 7 in (1, 2, 4), 9) for i in idx],
            "word": [maybe(i, f"w{i % 5}", 6) for i in idx],  # repeats: dictionary-encoded
        },
        schema=NESTED,
    )


@spark_only
@pytest.mark.spark
@pytest.mark.parametrize("compression", [Compression.LZ4, Compression.NONE])
def test_nested_all_null_and_null_free_columns_in_cut_ranges(
    spark: Any, tmp_path: Path, compression: Compression
) -> None:
    """Lists, structs and maps with nulls inside and out, a null-typed column, a
    column with no null (no validity buffer in the segment) and one all null,
    segments with and without nulls, read from odd offsets inside segments."""
    spec = local_spec(tmp_path)
    log = spec.connect()
    log.create_topic("n", NESTED, config=TopicConfig(compression=compression))
    for k in range(4):
        log.append("n", nested_rows(29 * k, 29, nulls=k % 2 == 0))
    for start, end in (("3", "113"), ("30", "57"), ("59", "60"), ("0", "116")):
        opts = {
            "topic": "n",
            "startingOffsets": f'{{"n": {{"0": {start}}}}}',
            "endingOffsets": f'{{"n": {{"0": {end}}}}}',
        }
        jvm, python = (
            sorted(map(repr, read(spark, spec, reader, **opts).collect()))
            for reader in ("jvm", "python")
        )
        assert jvm == python and len(jvm) == int(end) - int(start)


@spark_only
@pytest.mark.spark
def test_spark_writes_between_jvm_reads(spark: Any, tmp_path: Path) -> None:
    """Spark batch writes (one transaction each, members' producer ids) between
    reads by the kept planner: each committed job is seen whole at the next read."""
    spec = local_spec(tmp_path)
    log = spec.connect()
    log.create_topic("w", SCHEMA, partitions=3)
    seen: list[int] = []
    for job in range(2):
        df = spark.createDataFrame([(job * 100 + i,) for i in range(20)], "v long").repartition(3)
        with_options(df.write.format("arrowlog"), spec, {"topic": "w"}).mode("append").save()
        got = sorted(r[0] for r in read(spark, spec, "jvm", topic="w").select("v").collect())
        seen = sorted([*seen, *(job * 100 + i for i in range(20))])
        assert got == seen


def test_the_segments_a_connection_knew_last_all_deleted_or_compacted(tmp_path: Path) -> None:
    """The newest segment a kept connection knew (where it would list from) is gone:
    all records deleted and vacuumed in one root; compacted with everything after
    it and vacuumed in another. Timestamps then start inside a compacted object."""
    roots = [tmp_path / "deleted", tmp_path / "compacted"]
    logs = [connect(root) for root in roots]
    clients = Clients()
    for log, root in zip(logs, roots, strict=True):
        log.create_topic(
            "t", SCHEMA, config=TopicConfig(delete_delay_ms=100, checkpoint_interval=4)
        )
        for v in range(3):
            log.append("t", pa.record_batch({"v": [v, v]}))
        assert len(offsets(same_as_new(root, clients))) == 6
    logs[0].delete_records("t", 0, 6)
    for v in range(3, 20):
        logs[1].append("t", pa.record_batch({"v": [v, v]}))
        if v == 10:
            time.sleep(0.01)
            cut = int(time.time() * 1000)
            time.sleep(0.01)
    assert logs[1].maintenance.compact(["t"], target_bytes=MIN_TARGET_BYTES)
    time.sleep(2.2)  # the delay, on the store's clock
    for log in logs:
        log.maintenance.vacuum(["t"])
        log.append("t", pa.record_batch({"v": [99]}))
    assert offsets(same_as_new(roots[0], clients)) == [(0, 6)]
    assert offsets(same_as_new(roots[1], clients)) == [(0, o) for o in range(41)]
    late = same_as_new(roots[1], clients, startingTimestamp=str(cut))
    assert offsets(late) == [(0, o) for o in range(22, 41)]


@spark_only
@pytest.mark.spark
def test_a_large_segment_read_by_columns_from_inside_it(spark: Any, tmp_path: Path) -> None:
    """Segments over the column-read threshold (ranged reads of a local file), with
    nulls, read from an offset inside the first to one inside the second, some
    columns only: the same rows as the Python reader."""
    import numpy as np

    from arrowlog.partition.fetch import COLUMN_READ_MIN_BYTES

    spec = local_spec(tmp_path)
    log = spec.connect()
    fields: list[pa.Field[Any]] = [
        pa.field("a", pa.float64()),
        pa.field("b", pa.int64()),
        pa.field("c", pa.string()),
        pa.field("d", pa.bool_()),
    ]
    schema = pa.schema(fields)
    log.create_topic("big", schema, config=TopicConfig(compression=Compression.LZ4))
    rng = np.random.default_rng(11)
    n = 100_000
    for k in range(2):
        b = np.arange(k * n, (k + 1) * n)
        log.append(
            "big",
            pa.record_batch(
                [
                    pa.array(rng.random(n)),
                    pa.array(b, mask=b % 7 == 3),
                    pa.array([None if i % 5 == 0 else f"c{i % 13}" for i in range(n)]),
                    pa.array(b % 3 == 0, mask=b % 11 == 5),
                ],
                schema=schema,
            ),
        )
    assert log.partition("big", 0).segments()[0].size >= COLUMN_READ_MIN_BYTES
    opts = {"topic": "big", "startingOffsets": '{"big": {"0": 99999}}'}
    opts["endingOffsets"] = '{"big": {"0": 100013}}'
    jvm, python = (
        sorted(
            repr(tuple(r))
            for r in read(spark, spec, reader, **opts).select("b", "d", "c", "offset").collect()
        )
        for reader in ("jvm", "python")
    )
    assert jvm == python and len(jvm) == 14
    # the rest of the first segment and most of the second, through the JVM alone
    opts["startingOffsets"] = '{"big": {"0": 12345}}'
    opts["endingOffsets"] = '{"big": {"0": 187654}}'
    got = read(spark, spec, "jvm", **opts).selectExpr("count(b)", "sum(b)", "count(d)", "count(c)")
    b = np.arange(12345, 187654)
    c = np.arange(12345, 187654) % n
    expected = (
        int((b % 7 != 3).sum()),
        int(b[b % 7 != 3].sum()),
        int((b % 11 != 5).sum()),
        int((c % 5 != 0).sum()),
    )
    assert tuple(got.collect()[0]) == expected
