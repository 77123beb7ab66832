"""Schedules against a new client's look-ahead (arrowlog/partition/ahead.py):
the checkpoint LIST it starts before reading the topic is answered, and then
the store changes under it before the opening uses the answer; and inputs
that must be refused before anything is asked of the store."""

from __future__ import annotations

import functools
import os
import threading
import time
import warnings
from collections.abc import Callable, Iterable, Iterator
from typing import Any

import pyarrow as pa
import pytest

import arrowlog
from arrowlog.config import LogConfig, TopicConfig
from arrowlog.errors import UnknownColumnError, UnknownTopicOrPartitionError
from arrowlog.format.topic import checkpoint_key, segment_key
from arrowlog.log.topics import TopicVersions
from arrowlog.partition import ahead
from arrowlog.storage import ObjectInfo, Store
from arrowlog.storage.url import open_store
from arrowlog.testing.scripted import ScriptedStore

SCHEMA = pa.schema([("x", pa.int64())])


def batch(i: int) -> pa.RecordBatch:
    return pa.record_batch([pa.array([i, i + 1], pa.int64())], schema=SCHEMA)


@pytest.fixture
def s3_store(s3_server: Any) -> Iterator[Store]:
    store = open_store(
        s3_server.url(f"ahead-attack-{os.getpid()}-{time.time_ns()}"),
        dict(s3_server.storage_options),
    )
    yield store
    store.close()


@pytest.mark.s3
@pytest.mark.parametrize(
    ("partition", "message"),
    [(True, "must be an int"), (False, "must be an int"), (10_000, "not 10000")],
)
def test_a_partition_no_topic_can_have_is_refused_without_listing_a_checkpoint_prefix(
    s3_store: Store, partition: int, message: str
) -> None:
    """``partition("t", True)`` is no partition (``check_partition`` refuses
    bools), nor is one past the most a topic may have: a new client on a
    remote store must not list ``t/True/...`` or ``t/10000/...`` for them."""
    arrowlog.connect(s3_store).create_topic("t", SCHEMA)
    scripted = ScriptedStore(s3_store)
    with pytest.raises(UnknownTopicOrPartitionError, match=message):
        arrowlog.connect(scripted).partition("t", partition)
    assert [key for op, key in scripted.history if op == "list"] == []


def test_a_consumer_read_of_a_partition_the_topic_lacks_names_a_bad_column_first_as_before(
    store: Store,
) -> None:
    """Consumer.read checks the columns against the topic before the
    partition (what it did before it took the partition first, for the
    look-ahead): bad input gets the same answer on every store."""
    log = arrowlog.connect(store)
    log.create_topic("t", SCHEMA)
    log.append("t", batch(0))
    for reader in (arrowlog.connect(store), log):
        with pytest.raises(UnknownColumnError, match="nope"):
            reader.consumer().read("t", 7, columns=["nope"])
        with pytest.raises(UnknownColumnError, match="nope"):
            reader.read("t", 7, columns=["nope"])
    with pytest.raises(UnknownTopicOrPartitionError, match="not 7"):
        arrowlog.connect(store).consumer().read("t", 7, columns=["x"])


# --- schedules: the look-ahead answered, then the store changes -----------------

WAIT = 20.0
#: a checkpoint every 4 appends (windows of 8 offsets: 2 rows an append)
INTERVAL = 4
V0 = "_arrowlog/topics/t.json"


def rows_of(values: Iterable[int]) -> list[int]:
    return [v for i in values for v in (i, i + 1)]


@pytest.fixture
def answered(monkeypatch: pytest.MonkeyPatch) -> list[threading.Event]:
    """One event per look-ahead, set once its LIST was answered; answers stay
    fresh for a minute (the schedule decides, not the machine's speed)."""
    events: list[threading.Event] = []
    first_key = ahead._first_key

    def recorded(store: Store, prefix: str) -> list[ObjectInfo]:
        event = threading.Event()
        events.append(event)
        try:
            return first_key(store, prefix)
        finally:
            event.set()

    monkeypatch.setattr(ahead, "_first_key", recorded)
    monkeypatch.setattr(ahead, "FRESH_S", 60.0)
    return events


def wait_for(check: Callable[[], bool], what: str) -> None:
    deadline = time.monotonic() + WAIT
    while not check():
        if time.monotonic() > deadline:
            raise TimeoutError(what)
        time.sleep(0.005)


class Background:
    """``work`` on a thread of its own, its warnings recorded there (the
    suite turns warnings into errors)."""

    def __init__(self, work: Callable[[], Any]) -> None:
        self.out: list[Any] = []
        self.error: list[BaseException] = []
        self.warned: list[str] = []
        self.thread = threading.Thread(target=self._run, args=(work,), daemon=True)
        self.thread.start()

    def _run(self, work: Callable[[], Any]) -> None:
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            try:
                self.out.append(work())
            except BaseException as e:  # noqa: BLE001 (handed to the test)
                self.error.append(e)
        self.warned = [str(w.message) for w in caught]

    def done(self) -> bool:
        return not self.thread.is_alive()

    def result(self, timeout: float = WAIT) -> Any:
        self.thread.join(timeout)
        assert not self.thread.is_alive(), "the work did not end"
        if self.error:
            raise self.error[0]
        return self.out[0]


def write(log: arrowlog.ArrowLog, values: Iterable[int]) -> None:
    for v in values:
        log.append("t", batch(v))


def read_held_while(
    store: Store, answered: list[threading.Event], meanwhile: Callable[[], None]
) -> tuple[pa.Table, ScriptedStore]:
    """A new client's read of partition 0 whose GET of the topic is held
    until the look-ahead has its answer and ``meanwhile`` has run: what it
    read, and the store that saw its requests."""
    scripted = ScriptedStore(store)
    gate = scripted.hold("get", V0)
    reader = arrowlog.connect(scripted)
    run = Background(lambda: reader.read("t", 0))
    try:
        gate.wait_reached()
        wait_for(lambda: bool(answered) and answered[0].is_set(), "the look-ahead's answer")
        meanwhile()
    finally:
        gate.release()
    return run.result(), scripted


def delete_below_30_and_vacuum(writer: arrowlog.ArrowLog) -> set[str]:
    """Records below 30 deleted and, once the delete delay has passed,
    vacuumed: the keys vacuum removed."""
    assert writer.delete_records("t", 0, 30) == 30
    time.sleep(0.1 + 2.1)  # the delay, on the store's clock (whole seconds)
    return {r.key for r in writer.maintenance.vacuum(["t"])}


@pytest.mark.s3
def test_a_look_ahead_whose_checkpoint_vacuum_removed_before_the_opening_reads_from_the_log_start(
    s3_store: Store, answered: list[threading.Event]
) -> None:
    """The look-ahead lists the newest checkpoint (window 8) while the topic's
    GET is held; then the log grows three windows, its records below 30 are
    deleted, vacuum removes their segments, and the windows below 30 go (the
    listed checkpoint too: vacuum's own rule waits retain_ms, an hour at
    least, so the test removes them). Released, the read returns exactly
    offsets 30..39."""
    writer = arrowlog.connect(s3_store)
    writer.create_topic(
        "t", SCHEMA, config=TopicConfig(checkpoint_interval=INTERVAL, delete_delay_ms=100)
    )
    write(writer, (10 * i for i in range(10)))
    listed = checkpoint_key("t", 0, 8)
    assert [o.key for o in s3_store.list("t/0/checkpoints/", limit=1)] == [listed]

    def meanwhile() -> None:
        write(writer, (10 * i for i in range(10, 20)))
        removed = delete_below_30_and_vacuum(writer)
        assert segment_key("t", 0, 8) in removed and segment_key("t", 0, 28) in removed
        for window in (0, 8, 16):  # as vacuum does once the log start is retain_ms old
            s3_store.delete(checkpoint_key("t", 0, window))

    read, scripted = read_held_while(s3_store, answered, meanwhile)
    assert read.column("x").to_pylist() == rows_of(10 * i for i in range(15, 20))
    assert ("get", listed) in scripted.history  # the opening took the look-ahead's answer


@pytest.mark.s3
def test_a_look_ahead_of_a_topic_deleted_and_created_anew_while_its_first_look_waits(
    s3_store: Store, answered: list[threading.Event], monkeypatch: pytest.MonkeyPatch
) -> None:
    """The look-ahead lists incarnation 0's checkpoint and the first look
    finds no version 1; while its GET of version 0 is held, the topic is
    deleted and created anew. The client holds the old topic, opens with the
    old checkpoint's key: it must read the new topic's records alone."""
    writer = arrowlog.connect(s3_store)
    writer.create_topic("t", SCHEMA, config=TopicConfig(checkpoint_interval=INTERVAL))
    write(writer, (10 * i for i in range(10)))
    read_v1 = threading.Event()
    versions_read = TopicVersions.read

    def read(self: TopicVersions, name: str, version: int) -> Any:
        try:
            return versions_read(self, name, version)
        finally:
            if version == 1:
                read_v1.set()

    monkeypatch.setattr(TopicVersions, "read", read)

    def meanwhile() -> None:
        assert read_v1.wait(WAIT)
        admin = arrowlog.connect(s3_store, config=LogConfig(metadata_max_age_ms=50))
        admin.delete_topic("t")
        admin.create_topic("t", SCHEMA, config=TopicConfig(checkpoint_interval=INTERVAL))
        write(admin, (100 * i for i in range(6)))

    found, scripted = read_held_while(s3_store, answered, meanwhile)
    assert found.column("x").to_pylist() == rows_of(100 * i for i in range(6))
    assert ("get", checkpoint_key("t", 0, 8)) in scripted.history  # the old answer, taken


@pytest.mark.s3
def test_an_opening_does_not_wait_for_a_held_look_ahead_it_cannot_use(
    s3_store: Store,
) -> None:
    """The topic was created anew: the look-ahead of the name's prefix is of
    no use, and its LIST hangs. The read ends without it."""
    admin = arrowlog.connect(s3_store, config=LogConfig(metadata_max_age_ms=50))
    admin.create_topic("t", SCHEMA, config=TopicConfig(checkpoint_interval=INTERVAL))
    write(admin, (10 * i for i in range(10)))
    admin.delete_topic("t")
    admin.create_topic("t", SCHEMA, config=TopicConfig(checkpoint_interval=INTERVAL))
    write(admin, (100 * i for i in range(6)))
    scripted = ScriptedStore(s3_store)
    gate = scripted.hold("list", "t/0/checkpoints/")
    reader = arrowlog.connect(scripted)
    run = Background(lambda: reader.read("t", 0))
    try:
        gate.wait_reached()
        wait_for(run.done, "the read, while the look-ahead hangs")
        assert run.result().column("x").to_pylist() == rows_of(100 * i for i in range(6))
    finally:
        gate.release()


@pytest.mark.s3
def test_a_look_ahead_naming_a_corrupt_checkpoint_opens_from_the_one_before(
    s3_store: Store,
) -> None:
    writer = arrowlog.connect(s3_store)
    writer.create_topic("t", SCHEMA, config=TopicConfig(checkpoint_interval=INTERVAL))
    write(writer, (10 * i for i in range(10)))
    newest = checkpoint_key("t", 0, 8)
    s3_store.delete(newest)
    s3_store.put_if_absent(newest, b"{not json")
    scripted = ScriptedStore(s3_store)
    with pytest.warns(RuntimeWarning, match="unusable checkpoint"):
        table = arrowlog.connect(scripted).read("t", 0)
    assert table.column("x").to_pylist() == rows_of(10 * i for i in range(10))
    lists = [key for op, key in scripted.history if op == "list"]
    assert lists[0] == "t/0/checkpoints/"  # the look-ahead's
    assert ("get", newest) in scripted.history


@pytest.mark.s3
@pytest.mark.parametrize("how", ["append", "producer", "transaction"])
def test_a_new_clients_write_opened_from_a_look_ahead_two_windows_behind_lands_at_the_end(
    s3_store: Store, answered: list[threading.Event], how: str
) -> None:
    """The look-ahead lists window 8's checkpoint; while the topic's GET is
    held another writer appends two windows more. Released, the new client's
    write (a plain append, an idempotent producer's send, a transaction's)
    lands at the end, and the log reads back whole, each record once."""
    writer = arrowlog.connect(s3_store)
    writer.create_topic("t", SCHEMA, config=TopicConfig(checkpoint_interval=INTERVAL))
    write(writer, (10 * i for i in range(10)))
    scripted = ScriptedStore(s3_store)
    gate = scripted.hold("get", V0)
    client = arrowlog.connect(scripted)

    def work() -> int:
        if how == "append":
            return client.append("t", batch(1000)).base_offset
        if how == "producer":
            with client.producer() as producer:
                return producer.send("t", batch(1000), partition=0).base_offset
        with client.producer(transactional_id="tx") as producer:
            producer.init_transactions()
            producer.begin_transaction()
            offset = producer.send("t", batch(1000), partition=0).base_offset
            producer.commit_transaction()
            return offset

    run = Background(work)
    try:
        gate.wait_reached()
        wait_for(lambda: bool(answered) and answered[0].is_set(), "the look-ahead's answer")
        write(writer, (10 * i for i in range(10, 18)))
    finally:
        gate.release()
    assert run.result() == 36
    assert ("get", checkpoint_key("t", 0, 8)) in scripted.history  # the old answer, taken
    table = arrowlog.connect(s3_store).read("t", 0)
    assert table.column("x").to_pylist() == rows_of([*(10 * i for i in range(18)), 1000])


@pytest.mark.s3
def test_threads_of_a_new_client_open_every_partition_at_once(s3_store: Store) -> None:
    """Eight threads of one new client read the four partitions, two each,
    all at once: every read is whole."""
    writer = arrowlog.connect(s3_store)
    writer.create_topic("t", SCHEMA, partitions=4, config=TopicConfig(checkpoint_interval=INTERVAL))
    for p in range(4):
        for i in range(6):
            writer.append("t", batch(100 * p + 10 * i), partition=p)
    client = arrowlog.connect(s3_store)
    start = threading.Barrier(8)

    def read(p: int) -> list[Any]:
        start.wait(WAIT)
        return client.read("t", p).column("x").to_pylist()

    runs = [Background(functools.partial(read, n % 4)) for n in range(8)]
    for n, run in enumerate(runs):
        p = n % 4
        assert run.result() == rows_of(100 * p + 10 * i for i in range(6))


@pytest.mark.s3
def test_a_refused_partition_does_not_wait_for_its_hung_look_ahead(s3_store: Store) -> None:
    """Partition 7 of a topic of one: the look-ahead's LIST hangs, and the
    refusal comes at once; the hung LIST is dropped unread when it ends."""
    arrowlog.connect(s3_store).create_topic("t", SCHEMA)
    scripted = ScriptedStore(s3_store)
    gate = scripted.hold("list", "t/7/checkpoints/")
    client = arrowlog.connect(scripted)
    run = Background(lambda: client.partition("t", 7))
    try:
        gate.wait_reached()
        wait_for(run.done, "the refusal, while the look-ahead hangs")
        with pytest.raises(UnknownTopicOrPartitionError, match="not 7"):
            run.result()
    finally:
        gate.release()
    assert client.partition("t", 0).read().num_rows == 0


@pytest.mark.s3
def test_a_look_ahead_that_found_no_checkpoint_then_retention_moved_the_log_start(
    s3_store: Store, answered: list[threading.Event]
) -> None:
    """The look-ahead finds no checkpoint (two appends only); while the
    topic's GET is held the log grows past four windows and vacuum removes
    the segments below 30. The opening, from no checkpoint, finds its chain
    removed and starts over from the newest: offsets 30..39, nothing else."""
    writer = arrowlog.connect(s3_store)
    writer.create_topic(
        "t", SCHEMA, config=TopicConfig(checkpoint_interval=INTERVAL, delete_delay_ms=100)
    )
    write(writer, (10 * i for i in range(2)))

    def meanwhile() -> None:
        write(writer, (10 * i for i in range(2, 20)))
        removed = delete_below_30_and_vacuum(writer)
        assert segment_key("t", 0, 0) in removed and segment_key("t", 0, 28) in removed

    read, scripted = read_held_while(s3_store, answered, meanwhile)
    assert read.column("x").to_pylist() == rows_of(10 * i for i in range(15, 20))
    lists = [k for op, k in scripted.history if op == "list"]
    # the look-ahead's answer taken (no LIST of its own before the tail's),
    # then the opening again from the newest
    assert lists[:3] == ["t/0/checkpoints/", "t/0/segments/", "t/0/checkpoints/"]
