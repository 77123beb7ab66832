"""Attacks on a read's own listing fetching whole the segments it returns
(arrowlog/partition/prefetch.py): schedules between the listing and the
fetch, reads sharing one partition object, errors mid-read, a tiny budget,
and every result compared with what a stream (which never prefetches)
returns."""

from __future__ import annotations

import functools
import threading
import time
from collections.abc import Callable, Iterator
from typing import Any, Literal

import pyarrow as pa
import pytest

import arrowlog
from arrowlog import TopicConfig
from arrowlog.config import Compression
from arrowlog.format.topic import segment_key
from arrowlog.partition import prefetch
from arrowlog.storage import Blob, Store
from arrowlog.storage.memory import MemoryStore
from arrowlog.testing.scripted import Gate, ScriptedStore
from tests.support.schedules import FAST, SCHEMA, Background, rows
from tests.support.staged import append_staged, staged_writer

Isolation = Literal["read_committed", "read_uncommitted"]
ISOLATIONS: tuple[Isolation, ...] = ("read_committed", "read_uncommitted")


@pytest.fixture(autouse=True)
def _budget_comes_back() -> Iterator[None]:
    assert prefetch.BUDGET.held == 0
    yield
    assert prefetch.BUDGET.held == 0, "a read kept bytes it did not hand back"


def streamed(
    store: Store, isolation: Isolation = "read_committed", partition: int = 0
) -> list[Any]:
    """What a stream (no prefetch) returns, read by a new client."""
    consumer = arrowlog.connect(store, config=FAST).consumer(isolation_level=isolation)
    return [v for b in consumer.iter_batches("t", partition) for v in b.column("v").to_pylist()]


def read_table(
    store: Store, isolation: Isolation = "read_committed", partition: int = 0
) -> list[Any]:
    consumer = arrowlog.connect(store, config=FAST).consumer(isolation_level=isolation)
    return consumer.read("t", partition).column("v").to_pylist()


def test_a_new_clients_read_of_staged_commits_equals_a_stream(store: Store) -> None:
    arrowlog.connect(store).create_topic("t", SCHEMA, config=TopicConfig(checkpoint_interval=100))
    writer = staged_writer(store)
    writer.append(rows(0))
    for i in range(3):
        append_staged(store, writer, 100 + i, 10 + i)
    writer.append(rows(7))
    expected = streamed(store, "read_uncommitted")
    assert len(expected) == 8
    assert read_table(store, "read_uncommitted") == expected
    assert read_table(store) == streamed(store)
    assert arrowlog.connect(store).partition("t", 0).read().column("v").to_pylist() == expected


def test_transactions_read_committed_equal_a_stream(store: Store) -> None:
    config = TopicConfig(checkpoint_interval=100, compression=Compression.NONE)
    log = arrowlog.connect(store, config=FAST)
    log.create_topic("t", SCHEMA, 2, config=config)
    p = log.producer(transactional_id="tx")
    p.init_transactions()
    for round_ in range(3):
        p.begin_transaction()
        p.send("t", rows(round_ * 10), partition=0)
        p.send("t", rows(round_ * 10 + 1), partition=1)
        log.append("t", rows(500 + round_), partition=0)
        if round_ == 1:
            p.abort_transaction()
        else:
            p.commit_transaction()
    p.begin_transaction()  # left open
    p.send("t", rows(999), partition=0)
    p.send("t", rows(998), partition=1)
    p.flush()
    log.append("t", rows(600), partition=0)
    for isolation in ISOLATIONS:
        for part in (0, 1):
            assert read_table(store, isolation, part) == streamed(store, isolation, part), (
                isolation,
                part,
            )
        consumer = arrowlog.connect(store, config=FAST).consumer(isolation_level=isolation)
        whole: list[int] = [v for v in consumer.read("t").column("v").to_pylist() if v is not None]
        both: list[int] = streamed(store, isolation, 0) + streamed(store, isolation, 1)
        assert sorted(whole) == sorted(both)
    assert 999 not in read_table(store) and 20 in read_table(store) and 10 not in read_table(store)


def test_two_threads_reading_one_partition_object_get_their_own_ranges_and_columns(
    store: Store,
) -> None:
    fields: list[tuple[str, pa.DataType]] = [("v", pa.int64()), ("w", pa.string())]
    schema = pa.schema(fields)
    log = arrowlog.connect(store, config=FAST)
    log.create_topic("t", schema, config=TopicConfig(checkpoint_interval=900))
    for i in range(40):
        log.append("t", pa.record_batch({"v": [i], "w": [str(i)]}, schema=schema))
    for _ in range(3):
        part = arrowlog.connect(store, config=FAST).partition("t", 0)
        barrier = threading.Barrier(4)

        def read(
            start: int,
            end: int,
            columns: list[str] | None,
            part: arrowlog.PartitionLog = part,
            barrier: threading.Barrier = barrier,
        ) -> pa.Table:
            barrier.wait()
            return part.read(start, end, columns=columns)

        calls = [(0, 40, ["v"]), (10, 30, None), (5, 35, ["w"]), (20, 40, ["w", "v"])]
        runs = [Background(functools.partial(read, *c)) for c in calls]
        for (start, end, columns), run in zip(calls, runs, strict=True):
            table = run.result()
            assert isinstance(table, pa.Table)
            full = pa.table(
                {"v": list(range(start, end)), "w": [str(i) for i in range(start, end)]},
                schema=schema,
            )
            assert table.equals(full if columns is None else full.select(columns))


class Interrupting(ScriptedStore):
    """Raises a BaseException (as a KeyboardInterrupt would) on the n-th whole
    GET of a segment."""

    def __init__(self, inner: Store, nth: int, error: type[BaseException]) -> None:
        super().__init__(inner)
        self.nth = nth
        self.seen = 0
        self.error = error

    def get(self, key: str) -> Blob:
        if "/segments/" in key:
            self.seen += 1
            if self.seen == self.nth:
                raise self.error("interrupted")
        return super().get(key)


class Stop(BaseException):
    pass


@pytest.mark.parametrize("nth", [1, 5, 12])
def test_an_interrupt_in_the_listings_whole_get_gives_the_budget_back(
    store: Store, nth: int
) -> None:
    log = arrowlog.connect(store, config=FAST)
    log.create_topic("t", SCHEMA, config=TopicConfig(checkpoint_interval=900))
    for i in range(12):
        log.append("t", rows(i))
    interrupting = Interrupting(store, nth, Stop)
    reader = arrowlog.connect(interrupting, config=FAST)
    with pytest.raises(Stop):
        reader.read("t", 0)
    assert prefetch.BUDGET.held == 0
    # the same object reads again, right
    assert reader.read("t", 0).column("v").to_pylist() == list(range(12))


# --- schedules: the reader's listing held at a whole GET while a writer acts ------

DELAY_MS = 100


def wait_out_the_delay() -> None:
    time.sleep(DELAY_MS / 1000 + 2.1)


def held_reader(
    store: Store, key: str, read: Callable[[arrowlog.ArrowLog], object]
) -> tuple[Gate, Background]:
    """A new client's read, held at the first whole GET of ``key`` (its listing's)."""
    scripted = ScriptedStore(store)
    gate = scripted.hold("get", key)
    reader = arrowlog.connect(scripted, config=FAST)
    run = Background(lambda: read(reader))
    gate.wait_reached()
    return gate, run


def stray_bytes(key: str, values: list[int]) -> bytes:
    """A valid segment of topic t at ``key`` (offsets as the log's), written by
    another log: another append id, other records."""
    other = MemoryStore()
    log = arrowlog.connect(other)
    log.create_topic("t", SCHEMA, config=TopicConfig(checkpoint_interval=900))
    for v in values:
        log.append("t", rows(v))
    return bytes(other.get(key))


@pytest.mark.parametrize("isolation", ["read_uncommitted", "read_committed"])
def test_a_vacuum_and_a_stray_between_the_listing_and_the_fetch(
    store: Store, isolation: Isolation
) -> None:
    """The reader opens from the checkpoint of [0, 8) and lists 8, 9, 10; held
    at 10's GET, a writer appends to 30 (checkpoints past 20), deletes the
    records below 20, vacuum removes 0..19 and a stray lands at freed key 9."""
    config = TopicConfig(checkpoint_interval=8, delete_delay_ms=DELAY_MS)
    log = arrowlog.connect(store, config=FAST)
    log.create_topic("t", SCHEMA, config=config)
    for v in range(11):
        log.append("t", rows(v))
    held = segment_key("t", 0, 10)

    def read(reader: arrowlog.ArrowLog) -> object:
        return reader.consumer(isolation_level=isolation).read("t", 0).column("v").to_pylist()

    gate, run = held_reader(store, held, read)
    try:
        for v in range(11, 30):
            log.append("t", rows(v))
        log.delete_records("t", 0, 20)
        wait_out_the_delay()
        removed = {r.key for r in log.maintenance.vacuum()}
        assert segment_key("t", 0, 9) in removed
        stray = stray_bytes(segment_key("t", 0, 9), [700 + v for v in range(12)])
        store.put_if_absent(segment_key("t", 0, 9), stray)
    finally:
        gate.release()
    try:
        got = run.result()
    except arrowlog.OffsetOutOfRangeError:
        return
    assert isinstance(got, list)
    assert not any(v >= 700 for v in got), got
    assert got in (list(range(11)), list(range(20, 30))), got


def test_compaction_between_the_listing_and_the_fetch(store: Store) -> None:
    config = TopicConfig(checkpoint_interval=8, delete_delay_ms=DELAY_MS)
    log = arrowlog.connect(store, config=FAST)
    log.create_topic("t", SCHEMA, config=config)
    for v in range(11):
        log.append("t", rows(v))  # newest checkpoint: window [0, 8); the tail 8..10
    held = segment_key("t", 0, 10)

    def read(reader: arrowlog.ArrowLog) -> object:
        c = reader.consumer(isolation_level="read_uncommitted")
        return c.read("t", 0).column("v").to_pylist()

    gate, run = held_reader(store, held, read)
    try:
        for v in range(11, 40):
            log.append("t", rows(v))
        assert log.maintenance.compact()
        # no vacuum: a held listing outlasting the delay is outside rule 1
    finally:
        gate.release()
    got = run.result()
    assert got == list(range(11)) or got == list(range(40)), got


@pytest.mark.parametrize("read", ["log", "partition", "every partition"])
def test_a_read_whose_listing_races_the_topics_deletion_is_told_it_is_gone(
    store: Store, read: str
) -> None:
    """The reader's listing has fetched segments 0..5 whole and is held at 6's
    GET; the topic is deleted; 6 is gone, so the chain
    ends at 6. A read without the prefetch then fetches 0..5, finds them
    gone too, and reads the topic's chain: UnknownTopicOrPartitionError. The
    read holding 0..5 must not return them as the whole log of a topic that
    is half deleted ("Readers never see a half-deleted topic as alive")."""
    config = TopicConfig(checkpoint_interval=900)
    log = arrowlog.connect(store, config=FAST)
    log.create_topic("t", SCHEMA, config=config)
    for v in range(10):
        log.append("t", rows(v))
    held = segment_key("t", 0, 6)

    def reading(reader: arrowlog.ArrowLog) -> object:
        if read == "log":
            table = reader.read("t", 0)
        elif read == "partition":
            table = reader.partition("t", 0).read()
        else:
            table = reader.read("t")
        return table.column("v").to_pylist()

    gate, run = held_reader(store, held, reading)
    try:
        log.delete_topic("t")
    finally:
        gate.release()
    with pytest.raises(arrowlog.UnknownTopicOrPartitionError):
        run.result()


@pytest.mark.parametrize("outcome", ["commit", "abort"])
def test_a_transaction_decided_between_the_listing_and_the_fetch(
    store: Store, outcome: str
) -> None:
    log = arrowlog.connect(store, config=FAST)
    log.create_topic("t", SCHEMA, config=TopicConfig(checkpoint_interval=900))
    log.append("t", rows(0))
    p = log.producer(transactional_id="tx")
    p.init_transactions()
    p.begin_transaction()
    p.send("t", rows(1), partition=0)
    p.flush()
    log.append("t", rows(2))
    log.append("t", rows(3))
    held = segment_key("t", 0, 3)

    def read(reader: arrowlog.ArrowLog) -> object:
        return reader.read("t", 0).column("v").to_pylist()

    gate, run = held_reader(store, held, read)
    try:
        if outcome == "commit":
            p.commit_transaction()
        else:
            p.abort_transaction()
    finally:
        gate.release()
    got = run.result()
    # open when listed: the LSO holds the read at 1; decided: all, or all but 1
    allowed = [[0], [0, 1, 2, 3] if outcome == "commit" else [0, 2, 3]]
    assert got in allowed, got
    assert read_table(store) == streamed(store)


def test_many_partitions_read_at_once_past_a_small_budget_are_right(
    store: Store, monkeypatch: pytest.MonkeyPatch
) -> None:
    log = arrowlog.connect(store, config=FAST)
    log.create_topic("t", SCHEMA, 6, config=TopicConfig(checkpoint_interval=900))
    for p in range(6):
        for v in range(8):
            log.append("t", rows(100 * p + v), partition=p)
    size = max(o.size for o in store.list("t/0/segments/"))
    budget = prefetch.Budget(5 * size)
    monkeypatch.setattr(prefetch, "BUDGET", budget)
    reader = arrowlog.connect(store, config=FAST)
    runs = [
        Background(functools.partial(lambda p: reader.read("t", p).column("v").to_pylist(), p))
        for p in range(6)
    ]
    for p, run in enumerate(runs):
        assert run.result() == [100 * p + v for v in range(8)]
    assert budget.held == 0
    table = arrowlog.connect(store, config=FAST).read("t")
    every: list[int] = [v for v in table.column("v").to_pylist() if v is not None]
    assert sorted(every) == sorted(100 * p + v for p in range(6) for v in range(8))
    assert budget.held == 0


def test_a_read_that_ends_while_another_on_the_same_object_goes_on_gives_its_bytes_back(
    store: Store,
) -> None:
    """Each read under way on one partition object has its own prefetch, and
    drops what it did not take when it ends, whatever the others do. A
    read_committed read never takes the aborted segments of its range (its
    listing fetched them whole). Here one thread reads every partition (held
    while it lists partition 1, partition 0 planned) while another reads
    partition 0 of the same client, three times: nothing a finished read
    kept stays held (were it held until the last read ended, a service whose
    threads always have one read under way would spend the process-wide
    budget, and every read would fall back to heads)."""
    log = arrowlog.connect(store, config=FAST)
    log.create_topic("t", SCHEMA, 2, config=TopicConfig(checkpoint_interval=900))
    log.append("t", rows(0), partition=1)
    scripted = ScriptedStore(store)
    reader = arrowlog.connect(scripted, config=FAST)
    gate = scripted.hold("get", segment_key("t", 1, 0))
    every = Background(lambda: reader.read("t"))
    gate.wait_reached()
    own = prefetch.BUDGET.held  # what the held read reserved (partition 1's segment)
    p = log.producer(transactional_id="tx")
    p.init_transactions()
    try:
        for round_ in range(3):
            p.begin_transaction()
            for v in range(4):
                p.send("t", rows(10 * round_ + v), partition=0)
            p.abort_transaction()
            log.append("t", rows(1000 + round_), partition=0)
            table = reader.read("t", 0)  # read_committed: the aborted ones hidden
            assert table.column("v").to_pylist() == [1000 + r for r in range(round_ + 1)]
            kept = prefetch.BUDGET.held - own
            assert kept == 0, f"round {round_}: finished reads still hold {kept} bytes"
    finally:
        gate.release()
        every.result()
