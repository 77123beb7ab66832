"""Changing a topic: adding partitions and deleting it (docs/protocol.md,
"Changing a topic"), on every store, with other clients holding the topic, in
transactions, racing in several OS processes, and with the deleter SIGKILLed.

The race and crash workers: ``python -m tests.support.topic_change_worker KIND ...``.
"""

from __future__ import annotations

import json
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pyarrow as pa
import pytest

import arrowlog
from arrowlog import (
    InvalidPartitionsError,
    LogConfig,
    TopicConfig,
    UnknownTopicOrPartitionError,
)
from arrowlog.format.topic import announcement_key, parse_announcement_key
from arrowlog.producer import key_partitions
from arrowlog.read.scan import plan_scan
from arrowlog.storage import Store
from arrowlog.storage.wrappers import CountingStore
from tests.support.clocks import Clocks, ClockStore
from tests.support.schedules import Background
from tests.support.stores import StoreSpec

ROOT = Path(__file__).resolve().parents[2]
FIELDS: list[pa.Field[Any]] = [pa.field("key", pa.string()), pa.field("n", pa.int64())]
SCHEMA = pa.schema(FIELDS)
#: a client that re-creates a deleted name waits its metadata_max_age_ms first
QUICK = LogConfig(metadata_max_age_ms=100)


def rows(*ns: int, key: str = "k") -> pa.RecordBatch:
    return pa.record_batch({"key": [key] * len(ns), "n": list(ns)}, schema=SCHEMA)


def keys_under(store: Store, prefix: str = "") -> list[str]:
    return sorted(o.key for o in store.list(prefix))


def data_keys(store: Store) -> list[str]:
    """Every object outside ``_arrowlog/`` that is not an announcement."""
    return [
        k
        for k in keys_under(store)
        if not k.startswith("_arrowlog/") and parse_announcement_key(k) is None
    ]


# --- adding partitions ----------------------------------------------------------------


def test_every_reader_sees_added_partitions(make_log: Callable[..., arrowlog.ArrowLog]) -> None:
    admin = make_log()
    admin.create_topic("t", SCHEMA, partitions=2)
    admin.append("t", rows(1, 2), partition=1)
    cached = make_log()
    assert cached.end_offsets("t") == {0: 0, 1: 2}  # holds version 0, partitions open

    wider = admin.create_partitions("t", 4)
    assert (wider.partitions, wider.version, wider.incarnation) == (4, 1, 0)
    admin.append("t", rows(7), partition=3)

    fresh = make_log()
    for client in (cached, fresh):
        # listing partition 0 shows the announced version: no wait for max age
        assert client.end_offsets("t") == {0: 0, 1: 2, 2: 0, 3: 1}
        assert client.stable_offsets("t") == {0: 0, 1: 2, 2: 0, 3: 1}
        assert client.start_offsets("t") == {0: 0, 1: 0, 2: 0, 3: 0}
        assert client.topic("t").partitions == 4
        assert client.consumer().read("t", 3)["n"].to_pylist() == [7]
        plan = plan_scan(client, ["t"])
        assert [(r.partition, r.start, r.end) for r in plan.ranges] == [
            (0, 0, 0), (1, 0, 2), (2, 0, 0), (3, 0, 1)
        ]  # fmt: skip
        assert sum(task.rows for task in plan.tasks) == 3
    assert [p.partition for p in make_log().describe_topic("t").partitions] == [0, 1, 2, 3]


def test_a_new_partition_is_found_when_asked_for(
    make_log: Callable[..., arrowlog.ArrowLog],
) -> None:
    admin = make_log()
    admin.create_topic("t", SCHEMA, partitions=1)
    cached = make_log()
    cached.topic("t")
    admin.create_partitions("t", 3)
    # beyond the count it knows: the client reads the topic again before refusing
    cached.append("t", rows(1), partition=2)
    producer = cached.producer(transactional_id="tx")
    producer.init_transactions()
    producer.begin_transaction()
    producer.send("t", rows(2), partition=1)
    producer.commit_transaction()
    producer.flush()  # its marker
    assert admin.stable_offsets("t") == {0: 0, 1: 2, 2: 1}
    admin.create_partitions("t", 5)
    producer.begin_transaction()
    producer.add_partitions([("t", 3)])
    producer.send_offsets_to_transaction({("t", 4): 0}, group_id="g")
    producer.commit_transaction()
    cached.consumer(group_id="g").commit({("t", 4): 0})
    with pytest.raises(UnknownTopicOrPartitionError, match=r"partitions 0\.\.4, not 5"):
        cached.partition("t", 5)


def test_keys_route_by_the_new_count(make_log: Callable[..., arrowlog.ArrowLog]) -> None:
    log = make_log()
    log.create_topic("t", SCHEMA, partitions=2)
    keys = [f"user-{i}" for i in range(40)]
    batch = pa.record_batch({"key": keys, "n": list(range(40))}, schema=SCHEMA)
    producer = log.producer()
    producer.send_keyed("t", batch, key="key")
    log.create_partitions("t", 5)
    producer.send_keyed("t", batch, key="key")
    reader = make_log().consumer()
    where: dict[str, list[int]] = {k: [] for k in keys}
    for p in range(5):
        for key in reader.read("t", p)["key"].to_pylist():
            where[str(key)].append(p)
    old, new = key_partitions(keys, 2), key_partitions(keys, 5)
    assert all(where[k] == sorted([old[i], new[i]]) for i, k in enumerate(keys))
    assert sum(o != n for o, n in zip(old, new, strict=True)) > 10  # many keys moved, as in Kafka
    # round-robin sends reach the new partitions too
    for i in range(10):
        producer.send("t", rows(i))
    assert all(n > 0 for n in log.end_offsets("t").values())


@pytest.mark.parametrize("total", [2, 1, 0, True, "4", 10_001])
def test_create_partitions_refuses_a_bad_total_and_writes_nothing(
    make_log: Callable[..., arrowlog.ArrowLog], store: Store, total: Any
) -> None:
    log = make_log()
    log.create_topic("t", SCHEMA, partitions=2)
    before = keys_under(store)
    with pytest.raises(InvalidPartitionsError):
        log.create_partitions("t", total)
    assert keys_under(store) == before
    with pytest.raises(UnknownTopicOrPartitionError):
        log.create_partitions("nope", 3)


# --- deleting a topic -----------------------------------------------------------------


def test_a_deleted_topic_is_unknown_to_every_client(
    make_log: Callable[..., arrowlog.ArrowLog], store: Store
) -> None:
    admin = make_log()
    admin.create_topic("t", SCHEMA, partitions=3, config=TopicConfig(checkpoint_interval=2))
    admin.create_topic("other", SCHEMA)
    for i in range(5):
        admin.append("t", rows(i), partition=i % 3)
    cached = make_log()
    assert cached.end_offsets("t") == {0: 2, 1: 2, 2: 1}
    cached_part = cached.partition("t", 0)

    deletion = admin.delete_topic("t")
    assert not deletion.already_deleted and deletion.objects_deleted > 5
    # what is left of it: one announcement of the tombstone per partition
    assert data_keys(store) == []
    assert [k for k in keys_under(store) if k.startswith("t/")] == [
        announcement_key("t", p, deletion.tombstone.version) for p in range(3)
    ]

    fresh = make_log()
    for client in (cached, fresh, admin):
        assert client.list_topics() == ["other"]
        for call in (
            lambda c=client: c.end_offsets("t"),
            lambda c=client: c.stable_offsets("t"),
            lambda c=client: c.read("t", 0),
            lambda c=client: c.append("t", rows(9)),
            lambda c=client: c.consumer().read("t", 1),
            lambda c=client: c.describe_topic("t"),
            lambda c=client: plan_scan(c, ["t"]),
            lambda c=client: c.create_partitions("t", 5),
        ):
            with pytest.raises(UnknownTopicOrPartitionError):
                call()
    with pytest.raises(UnknownTopicOrPartitionError, match="was deleted"):
        cached_part.read()  # a partition object held from before

    again = admin.delete_topic("t")  # a rerun only finishes the removal
    assert again.already_deleted and again.objects_deleted == 0
    assert again.tombstone == deletion.tombstone
    with pytest.raises(UnknownTopicOrPartitionError):
        admin.delete_topic("never-was")


def test_a_recreated_topic_never_reads_the_old_ones_objects(
    make_log: Callable[..., arrowlog.ArrowLog], store: Store
) -> None:
    admin = make_log(config=QUICK)
    admin.create_topic("t", SCHEMA, partitions=2)
    admin.append("t", rows(1, 2, 3), partition=0)
    writer = make_log()  # holds the topic, its partition open
    writer.append("t", rows(4), partition=0)
    admin.delete_topic("t")

    # A client that has not learnt of the delete yet (within metadata_max_age_ms,
    # appending in steady state: one PUT, no listing) still appends; its records
    # go to the deleted topic's objects, never to a new topic of the name.
    late = writer.append("t", rows(5), partition=0)
    assert late.base_offset == 4
    assert data_keys(store) == ["t/0/segments/00000000000000000004.arrow"]

    schema = pa.schema([("other", pa.int32())])
    created = admin.create_topic("t", schema, partitions=1)
    assert created.incarnation == created.version == 2 and created.prefix == "t=2"
    # creating the name again first removed what the late writer left
    assert data_keys(store) == []
    with pytest.raises(arrowlog.TopicExistsError):
        make_log().create_topic("t", SCHEMA)
    for client in (make_log(), admin):
        assert client.end_offsets("t") == {0: 0}
        assert client.topic("t").schema.equals(schema)
        assert client.read("t", 0).num_rows == 0
    # the old writer learns on its next listing (or after max age) that its
    # partition is gone; looking it up again gives the new topic
    with pytest.raises(UnknownTopicOrPartitionError, match="created anew"):
        writer.partition("t", 0).end_offset()
    assert writer.end_offsets("t") == {0: 0}
    writer.append("t", pa.record_batch({"other": [8]}, schema=schema))
    assert make_log().read("t", 0)["other"].to_pylist() == [8]

    admin.delete_topic("t")
    assert make_log().list_topics() == []
    assert data_keys(store) == []


def test_writers_and_readers_racing_a_delete_never_see_half_a_topic(
    make_log: Callable[..., arrowlog.ArrowLog],
) -> None:
    """Record n of each partition sits at offset n: a read that succeeds must
    return exactly 0..k-1. Every other outcome must be UnknownTopicOrPartitionError
    (never SegmentNotFoundError, never a shorter or gapped log)."""
    admin = make_log()
    admin.create_topic("t", SCHEMA, partitions=2, config=TopicConfig(checkpoint_interval=3))
    for n in range(10):
        for p in range(2):
            admin.append("t", rows(n), partition=p, expected_offset=n)
    stop = threading.Event()
    deleted = threading.Event()
    outcomes: list[str] = []

    def write(p: int, client: arrowlog.ArrowLog) -> None:
        n = 10
        while not stop.is_set():
            try:
                client.append("t", rows(n), partition=p, expected_offset=n)
            except UnknownTopicOrPartitionError:
                outcomes.append(f"writer {p} refused" + (" after" if deleted.is_set() else ""))
                return
            n += 1

    def read(fresh: bool) -> None:
        cached = make_log()
        rounds_after = 0
        while rounds_after < 5:
            rounds_after += deleted.is_set()
            client = make_log() if fresh else cached
            for p in range(2):
                try:
                    got = client.read("t", p)["n"].to_pylist()
                    assert got == list(range(len(got))) and len(got) >= 10
                    outcomes.append("read")
                except UnknownTopicOrPartitionError:
                    outcomes.append("unknown" + (" after" if deleted.is_set() else ""))

    strict = make_log(config=LogConfig(metadata_max_age_ms=0))
    writer0 = Background(lambda: write(0, strict))
    others = [
        Background(lambda: write(1, make_log())),
        Background(lambda: read(True)),
        Background(lambda: read(False)),
    ]
    deadline = time.monotonic() + 60  # a failed reader raises from result() below
    while outcomes.count("read") < 8 and time.monotonic() < deadline:
        time.sleep(0.01)
    admin.delete_topic("t")
    deleted.set()
    # max age 0: refused from the tombstone on, so at the latest once the delete returned
    writer0.result(timeout=60)
    stop.set()  # the writer with the default max age would go on for 30 s
    for background in others:
        background.result(timeout=60)  # re-raises any failed assertion
    assert "writer 0 refused" in " ".join(outcomes)
    assert outcomes.count("unknown after") >= 10  # every read once the delete returned
    with pytest.raises(UnknownTopicOrPartitionError):
        make_log().read("t", 0)
    assert admin.delete_topic("t").already_deleted  # and removes what the late writer left


def test_with_max_age_zero_a_writer_learns_of_the_delete_at_once(
    make_log: Callable[..., arrowlog.ArrowLog],
) -> None:
    admin = make_log()
    admin.create_topic("t", SCHEMA)
    writer = make_log(config=LogConfig(metadata_max_age_ms=0))
    writer.append("t", rows(1))
    admin.delete_topic("t")
    with pytest.raises(UnknownTopicOrPartitionError, match="was deleted"):
        writer.append("t", rows(2))


def test_an_idempotent_producer_starts_over_in_a_topic_created_anew(
    make_log: Callable[..., arrowlog.ArrowLog],
) -> None:
    admin = make_log(config=QUICK)
    admin.create_topic("t", SCHEMA)
    producer = make_log(config=LogConfig(metadata_max_age_ms=0)).producer()
    for n in range(3):
        producer.send("t", rows(n), partition=0)
    admin.delete_topic("t")
    with pytest.raises(UnknownTopicOrPartitionError):
        producer.send("t", rows(3), partition=0)
    admin.create_topic("t", SCHEMA)
    # its sequence in the old topic's partition means nothing in the new one
    assert producer.send("t", rows(4), partition=0).base_offset == 0
    assert producer.send("t", rows(5), partition=0).base_offset == 1
    assert make_log().read("t", 0)["n"].to_pylist() == [4, 5]


def test_transactions_over_a_deleted_topic_still_end(
    make_log: Callable[..., arrowlog.ArrowLog],
) -> None:
    """A transaction that wrote to a topic deleted before it ended commits (or
    is recovered) in its other partitions; the deleted topic gets no marker,
    as Kafka drops markers of deleted partitions."""
    log = make_log(config=QUICK)
    log.create_topic("keep", SCHEMA)
    log.create_topic("gone", SCHEMA, partitions=2)
    producer = log.producer(transactional_id="tx")
    producer.init_transactions()
    producer.begin_transaction()
    producer.send("keep", rows(1, 2))
    producer.send("gone", rows(3), partition=1)
    make_log().delete_topic("gone")
    producer.commit_transaction()
    assert make_log().consumer().read("keep", 0)["n"].to_pylist() == [1, 2]
    producer.begin_transaction()
    with pytest.raises(UnknownTopicOrPartitionError):
        producer.send("gone", rows(4), partition=0)
    producer.abort_transaction()  # ends, though a partition it named is gone

    # an instance that dies mid-transaction: the next one aborts it, markers
    # written where the topic still exists, the LSO of those partitions freed
    log.create_topic("gone", SCHEMA, partitions=2)
    dying = make_log().producer(transactional_id="tx2")
    dying.init_transactions()
    dying.begin_transaction()
    dying.add_partitions([("keep", 0), ("gone", 0)])  # named: recovery writes markers
    dying.send("keep", rows(5))
    dying.send("gone", rows(6), partition=0)
    make_log().delete_topic("gone")
    assert make_log().stable_offsets("keep") == {0: 3}  # held by the open transaction
    successor = make_log().producer(transactional_id="tx2")
    successor.init_transactions()
    reader = make_log()
    assert reader.stable_offsets("keep") == reader.end_offsets("keep") == {0: 5}
    assert reader.consumer().read("keep", 0)["n"].to_pylist() == [1, 2]


# --- what it costs --------------------------------------------------------------------


def test_changes_cost_the_hot_path_nothing(store: Store, now: list[float]) -> None:
    counting = CountingStore(store)
    admin = arrowlog.connect(store)
    admin.create_topic("t", SCHEMA, partitions=2, config=TopicConfig(checkpoint_interval=50))
    admin.append("t", rows(0))
    admin.create_partitions("t", 3)
    log = arrowlog.connect(counting)
    log.append("t", rows(1))  # opens: GET v0, LIST, LIST (announcement) -> versions 1, 2
    assert counting.counts["get"] == 3  # version 0, version 1, no version 2
    counting.reset()
    for i in range(5):
        log.append("t", rows(i))
    assert counting.counts == {"put_if_absent": 5}  # steady state: one PUT each
    counting.reset()
    assert log.partition("t", 0).end_offset() == 7
    assert counting.counts == {"list": 1}  # the announcement is known: nothing more
    counting.reset()
    assert log.end_offsets("t") == {0: 7, 1: 0, 2: 0}
    assert counting.counts == {"list": 5}  # partition 0 syncs, 1 and 2 open (no checkpoint)


def test_a_first_lookup_gives_the_latest_version(
    make_log: Callable[..., arrowlog.ArrowLog],
) -> None:
    admin = make_log()
    admin.create_topic("t", SCHEMA, partitions=2)
    admin.create_partitions("t", 3)
    assert make_log().topic("t").partitions == 3
    admin.delete_topic("t")
    with pytest.raises(UnknownTopicOrPartitionError, match="was deleted"):
        make_log().topic("t")


def test_a_change_announced_and_never_claimed_costs_a_get_per_sync(store: Store) -> None:
    """A changer that died between announcing a version and claiming it: until
    a change claims that version, each sync of the partition asks for it."""
    admin = arrowlog.connect(store)
    admin.create_topic("t", SCHEMA)
    admin.append("t", rows(1))
    store.put_if_absent(announcement_key("t", 0, 1), b"{}")
    counting = CountingStore(store)
    log = arrowlog.connect(counting)
    assert log.end_offsets("t") == {0: 1}
    counting.reset()
    assert log.partition("t", 0).end_offset() == 1
    assert counting.counts == {"list": 1, "get": 1}  # version 1: not there
    admin.create_partitions("t", 2)  # claims version 1
    counting.reset()
    assert log.end_offsets("t") == {0: 1, 1: 0}
    assert counting.counts == {"list": 3, "get": 2}  # version 1, no version 2; open 1
    counting.reset()
    assert log.partition("t", 0).end_offset() == 1
    assert counting.counts == {"list": 1}


# --- many changes: superseded announcements go -----------------------------------------

#: a client that trusts what it knows of a topic for a day: it learns of
#: changes only from its listings (or by asking)
PATIENT = LogConfig(metadata_max_age_ms=24 * 3600 * 1000)
DELAY_MS = TopicConfig().delete_delay_ms


def announced(store: Store, partition: int = 0) -> list[int]:
    """The versions announced in ``partition``'s listing."""
    found = (parse_announcement_key(k) for k in keys_under(store, f"t/{partition}/segments/"))
    return [v for v in found if v is not None]


def test_a_writer_whose_view_predates_many_alters_and_a_vacuum_sees_the_next_changes(
    store: Store, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Schedule: writer W opens partition 0 (version 0) and appends; retention
    is altered 50 times; the delay passes and a vacuum removes the superseded
    announcements; W appends again (its view is older than half the delay: it
    lists first). Then the topic is deleted, the delay passes again, and W
    appends. Guarantees: the vacuum leaves one announcement (the newest);
    W's first append learns version 50 from it (retention as last altered,
    read from version 50 on: no walk from version 0) and lands; its second
    raises UnknownTopicOrPartitionError and writes nothing: the listing that
    shows a writer a newer version before it appends still does, with old
    announcements gone. Before, no vacuum removed them: every listing of the
    tail returned all 50."""
    clock = ClockStore(store)
    clocks = Clocks(clock, monkeypatch)
    admin = arrowlog.connect(clock)
    admin.create_topic("t", SCHEMA)
    counting = CountingStore(clock)
    w = arrowlog.connect(counting, config=PATIENT).partition("t", 0)
    w.append(rows(0))
    for i in range(50):
        admin.alter_topic_config("t", retention_ms=3_600_000 + i)
    clocks.advance(DELAY_MS + 2_000)
    admin.maintenance.vacuum()
    assert announced(clock) == [50]

    counting.reset()
    assert w.append(rows(1)).base_offset == 1
    assert (w.topic.version, w.topic.config.retention_ms) == (50, 3_600_049)
    assert counting.counts["get"] == 2  # version 50, no version 51

    admin.delete_topic("t")
    clocks.advance(DELAY_MS)
    writes = len(clock.writes)
    with pytest.raises(UnknownTopicOrPartitionError, match="deleted"):
        w.append(rows(2))
    assert len(clock.writes) == writes


def test_a_version_announced_last_and_never_claimed_leaves_the_one_before_known(
    store: Store, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Schedule: 20 alters, then a changer dies after announcing version 21
    and before claiming it; the delay passes and a vacuum runs; a client
    that knew version 0 lists the partition. Guarantees: only the unclaimed
    announcement 21 is left (the newest stays, whatever it is), and the
    client learns version 20 from it: version 21 missing means 20, which its
    changer had read, is the latest. Before, every announcement stayed."""
    clock = ClockStore(store)
    clocks = Clocks(clock, monkeypatch)
    admin = arrowlog.connect(clock)
    admin.create_topic("t", SCHEMA)
    admin.append("t", rows(0))
    reader = arrowlog.connect(clock, config=PATIENT).partition("t", 0)
    assert reader.end_offset() == 1
    for i in range(20):
        admin.alter_topic_config("t", retention_ms=3_600_000 + i)
    clock.put_if_absent(announcement_key("t", 0, 21), b"{}")
    clocks.advance(DELAY_MS + 2_000)
    admin.maintenance.vacuum()
    assert announced(clock) == [21]
    assert reader.end_offset() == 1
    assert (reader.topic.version, reader.topic.config.retention_ms) == (20, 3_600_019)
    assert arrowlog.connect(clock).alter_topic_config("t", retention_ms=1).version == 21


def test_vacuum_keeps_an_announcement_until_a_newer_one_is_older_than_the_delay(
    store: Store, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The announcements of a change written less than the delay ago stay
    with the one before them: a listing that began before the newer one was
    written must still show the older. Schedule: two alters; a vacuum; the
    delay passes; a vacuum. Guarantees: the first keeps both; the second
    leaves version 2's. Before, both stayed for ever."""
    clock = ClockStore(store)
    clocks = Clocks(clock, monkeypatch)
    admin = arrowlog.connect(clock)
    admin.create_topic("t", SCHEMA, partitions=2)
    for i in range(2):
        admin.alter_topic_config("t", retention_ms=3_600_000 + i)
    assert admin.maintenance.vacuum() == []
    assert announced(clock, 0) == announced(clock, 1) == [1, 2]
    clocks.advance(DELAY_MS + 2_000)
    removed = [r.key for r in admin.maintenance.vacuum()]
    assert removed == [announcement_key("t", p, 1) for p in (0, 1)]
    assert announced(clock, 0) == announced(clock, 1) == [2]


# --- several processes ----------------------------------------------------------------


def _spawn(spec: StoreSpec, kind: str, *extra: str) -> subprocess.Popen[str]:
    return subprocess.Popen(
        [sys.executable, "-m", "tests.support.topic_change_worker", kind, *spec.argv(), *extra],
        cwd=ROOT,
        stdout=subprocess.PIPE,
        stdin=subprocess.PIPE,
        text=True,
    )


def _race(spec: StoreSpec, kind: str, args: list[list[str]]) -> list[dict[str, Any]]:
    procs = [_spawn(spec, kind, *a) for a in args]
    for proc in procs:  # everyone imported and connected: go together
        assert proc.stdout is not None and proc.stdout.readline().strip() == "READY"
    for proc in procs:
        assert proc.stdin is not None
        proc.stdin.write("go\n")
        proc.stdin.flush()
    results = []
    for proc in procs:
        out, _ = proc.communicate(timeout=300)
        assert proc.returncode == 0, out
        results.append(json.loads(out))
    return results


@pytest.mark.slow
def test_racing_changes_claim_each_version_once(shared_store_spec: StoreSpec) -> None:
    log = shared_store_spec.connect()
    log.create_topic("t", SCHEMA, partitions=2)
    totals = [3, 3, 5, 5]
    results = _race(shared_store_spec, "widen", [["--total", str(t)] for t in totals])
    won = [r for r in results if "version" in r]
    assert all(r.get("error") == "InvalidPartitionsError" for r in results if r not in won)
    # each version was claimed by exactly one call, counts only ever grow, and a
    # call fails only because a total at least its own was reached first
    versions = sorted((r["version"], r["partitions"]) for r in won)
    assert [v for v, _ in versions] == list(range(1, len(won) + 1))
    assert [n for _, n in versions] == sorted({n for _, n in versions})
    assert versions[-1][1] == 5 and {n for _, n in versions} <= {3, 5}
    latest = shared_store_spec.connect().topic("t", refresh=True)
    assert (latest.version, latest.partitions) == versions[-1]

    deleters = _race(shared_store_spec, "delete", [[], [], []])
    assert sorted(r["already_deleted"] for r in deleters) == [False, True, True]
    assert len({r["tombstone"] for r in deleters}) == 1
    assert shared_store_spec.connect().list_topics() == []


@pytest.mark.slow
def test_a_deleter_killed_midway_leaves_no_live_half_topic(shared_store_spec: StoreSpec) -> None:
    log = shared_store_spec.connect()
    log.create_topic("t", SCHEMA, partitions=3, config=TopicConfig(checkpoint_interval=4))
    for i in range(30):
        log.append("t", rows(i), partition=i % 3)
    store = shared_store_spec.open()
    before = len(data_keys(store))
    cached = shared_store_spec.connect()
    assert cached.end_offsets("t") == {0: 10, 1: 10, 2: 10}

    proc = _spawn(shared_store_spec, "delete", "--kill-after", "5")
    assert proc.stdout is not None and proc.stdout.readline().strip() == "READY"
    assert proc.stdin is not None
    proc.stdin.write("go\n")
    proc.stdin.flush()
    proc.communicate(timeout=300)
    assert proc.returncode == -signal.SIGKILL
    left = len(data_keys(store))
    assert 0 < left < before  # killed in the middle of removing objects

    for client in (cached, shared_store_spec.connect()):
        assert client.list_topics() == []
        for p in range(3):
            with pytest.raises(UnknownTopicOrPartitionError):
                client.read("t", p)
            with pytest.raises(UnknownTopicOrPartitionError):
                client.consumer().read("t", p)
        with pytest.raises(UnknownTopicOrPartitionError):
            client.end_offsets("t")

    rerun = shared_store_spec.connect().delete_topic("t")
    assert rerun.already_deleted and rerun.objects_deleted == left
    assert data_keys(store) == []
    shared_store_spec.connect(config=QUICK).create_topic("t", SCHEMA, partitions=3)
    assert shared_store_spec.connect().end_offsets("t") == {0: 0, 1: 0, 2: 0}
