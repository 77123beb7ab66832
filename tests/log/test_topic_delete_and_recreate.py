"""A topic deleted and created again under its name: acknowledged sends,
group offsets, recovery markers and transactions stay in the incarnation they
were made in; a killed deleter's leftovers go; topic lookups; CLI commands that
fail leave no root behind.

Origin: the attack on issue 8, versioned topic metadata (was tests/attack/test_issue8.py)."""

from __future__ import annotations

import dataclasses
import threading
import time
from pathlib import Path
from typing import Any, cast

import pytest

import arrowlog
from arrowlog.cli import main
from arrowlog.errors import TransientStoreError, UnknownTopicOrPartitionError
from arrowlog.format.topic import topic_version_key
from arrowlog.storage import Store
from arrowlog.storage.memory import MemoryStore
from arrowlog.testing.scripted import ScriptedStore
from tests.support.schedules import FAST, FOREVER, SCHEMA, Background, everything, rows


def _two_clients() -> tuple[arrowlog.ArrowLog, arrowlog.ArrowLog]:
    """Two clients (as two processes would be) on one memory store."""
    first = arrowlog.connect("memory://", config=FAST)
    return first, arrowlog.ArrowLog(first.store, config=FAST)


def _two_clients_sharing(max_age_ms: int) -> tuple[arrowlog.ArrowLog, arrowlog.ArrowLog]:
    """Two clients of one ``metadata_max_age_ms``, as the docs require of
    clients that share a bucket."""
    config = dataclasses.replace(FAST, metadata_max_age_ms=max_age_ms)
    first = arrowlog.connect("memory://", config=config)
    return first, arrowlog.ArrowLog(first.store, config=config)


def test_a_send_acknowledged_after_the_delete_goes_with_the_topic() -> None:
    """A producer that knew the topic appends at its known end without listing,
    so for up to metadata_max_age_ms after a delete (Kafka's window between a
    delete and every broker applying it) a send is still acknowledged. Its
    segment must go with the topic: never readable, removed by a rerun."""
    mine, other = _two_clients()
    mine.create_topic("t", SCHEMA, 1)
    producer = mine.producer()
    producer.send("t", rows(1), partition=0)  # the producer knows the topic now
    other.delete_topic("t")
    producer.send("t", rows(2), partition=0)  # within the window: acknowledged
    with pytest.raises(UnknownTopicOrPartitionError):
        arrowlog.ArrowLog(mine.store, config=FAST).read("t", 0)
    rerun = other.delete_topic("t")
    assert rerun.already_deleted and rerun.objects_deleted == 1
    assert [o.key for o in mine.store.list("t/") if o.key.endswith(".arrow")] == []


def test_acknowledged_send_after_recreate_is_in_the_topic_of_that_name() -> None:
    """Re-creating the name waits metadata_max_age_ms after the delete, so a
    producer that knew the old topic has read the chain again by then: what it
    is acknowledged after the re-creation is in the new topic."""
    mine, other = _two_clients_sharing(300)
    mine.create_topic("t", SCHEMA, 1)
    producer = mine.producer()
    producer.send("t", rows(1), partition=0)
    other.delete_topic("t")
    other.create_topic("t", SCHEMA, 1)
    acked = []
    for value in (2, 3):
        try:
            producer.send("t", rows(value), partition=0)
            acked.append(value)
        except UnknownTopicOrPartitionError:
            pass  # refused: fine, the caller knows
    fresh = arrowlog.ArrowLog(mine.store, config=FAST)
    assert everything(fresh) == acked == [2, 3]


def test_group_offset_of_deleted_topic_is_not_the_recreated_topics() -> None:
    mine, other = _two_clients_sharing(50)
    mine.create_topic("t", SCHEMA, 1)
    for value in range(5):
        mine.append("t", rows(value))
    mine.consumer(group_id="g").commit({("t", 0): 5})
    other.delete_topic("t")
    other.create_topic("t", SCHEMA, 1)
    for value in range(10, 18):
        other.append("t", rows(value))
    assert other.consumer(group_id="g").committed("t", 0) is None
    fresh = arrowlog.ArrowLog(mine.store, config=FAST)  # never saw the old topic
    assert fresh.consumer(group_id="g").committed("t", 0) is None
    fresh.consumer(group_id="g").commit({("t", 0): 3})  # the new topic's offset
    assert other.consumer(group_id="g").committed("t", 0) == 3
    # and in a transaction, by a client that knew only the old topic
    producer = mine.producer(transactional_id="x")
    producer.init_transactions()
    with producer.transaction():
        producer.send_offsets_to_transaction({("t", 0): 6}, "g")
    assert arrowlog.ArrowLog(mine.store, config=FAST).consumer(group_id="g").committed("t", 0) == 6


@pytest.mark.parametrize(
    "argv",
    [
        ["topics", "delete", "t"],
        ["topics", "alter", "t", "--partitions", "3"],
        ["transactions", "abort", "x"],
        ["groups", "delete", "g"],
        ["groups", "reset-offsets", "g", "--topic", "t", "--to-earliest", "--execute"],
        ["load", "t", "in.parquet"],
    ],
)
def test_failing_write_command_leaves_no_root_behind(
    argv: list[str], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """A mistyped --root for a write command that can only fail on it (nothing
    to delete, alter or abort there) was created as an empty directory tree."""
    missing = tmp_path / "typo"
    assert main([*argv, "--root", str(missing)]) == 3
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "no such directory" in err, err
    assert not missing.exists()


def test_topics_create_still_creates_a_new_local_root(tmp_path: Path) -> None:
    fresh = tmp_path / "new"
    argv = ["topics", "create", "t", "--schema", "v: int64", "--root", str(fresh)]
    assert main(argv) == 0
    assert arrowlog.connect(str(fresh)).list_topics() == ["t"]


@pytest.mark.parametrize("recoverer", ["creator", "fresh"])
def test_recovery_writes_no_marker_into_the_recreated_topic(recoverer: str) -> None:
    mine, other = _two_clients_sharing(50)
    mine.create_topic("t", SCHEMA, 1)
    zombie = mine.producer(transactional_id="x")
    zombie.init_transactions()
    zombie.begin_transaction()
    zombie.send("t", rows(1), partition=0)  # then the process dies
    other.delete_topic("t")
    other.create_topic("t", SCHEMA, 1)
    other.append("t", rows(7))
    successor = other if recoverer == "creator" else arrowlog.ArrowLog(mine.store, config=FAST)
    successor.producer(transactional_id="x").init_transactions()  # rolls the old one back
    fresh = arrowlog.ArrowLog(mine.store, config=FAST)
    assert fresh.end_offsets("t") == {0: 1}


def test_a_transaction_cannot_go_on_in_a_topic_created_anew() -> None:
    """Its markers would go to the old topic only, and what it sent to the new
    one would never be decided (an LSO held until expiry)."""
    mine, other = _two_clients_sharing(50)
    mine.create_topic("t", SCHEMA, 1)
    producer = mine.producer(transactional_id="x")
    producer.init_transactions()
    producer.begin_transaction()
    producer.send("t", rows(1), partition=0)
    other.delete_topic("t")
    other.create_topic("t", SCHEMA, 1)
    other.append("t", rows(7))
    with pytest.raises(UnknownTopicOrPartitionError, match="created anew"):
        producer.send("t", rows(2), partition=0)
    producer.abort_transaction()
    fresh = arrowlog.ArrowLog(mine.store, config=FAST)
    assert fresh.end_offsets("t") == fresh.stable_offsets("t") == {0: 1}
    producer.begin_transaction()  # the next transaction writes to the new topic
    producer.send("t", rows(3), partition=0)
    producer.commit_transaction()
    assert everything(fresh) == [7, 3]


def test_killed_deleters_leftovers_are_removed_after_the_name_is_recreated() -> None:
    store = ScriptedStore(MemoryStore())
    log = arrowlog.ArrowLog(store, config=dataclasses.replace(FAST, metadata_max_age_ms=50))
    log.create_topic("t", SCHEMA, 1)
    for value in range(3):
        log.append("t", rows(value))
    dying = store.fail("delete", "t/0/segments/*", times=FOREVER)
    with pytest.raises(TransientStoreError):
        log.delete_topic("t")  # the deleter dies after its tombstone, before removal
    dying.stop()
    log.create_topic("t", SCHEMA, 1)
    log.delete_topic("t")  # the user removes the name again, rerunning as documented
    left = [o.key for o in store.list("t/") if o.key.endswith(".arrow")]
    assert left == []


class _LateReply:
    """A store whose next GET of ``key`` is served at once but whose reply
    reaches the client only when the test says so (a slow network, a paused
    process)."""

    def __init__(self, inner: MemoryStore) -> None:
        self.inner = inner
        self.key: str | None = None
        self.served = threading.Event()
        self.deliver = threading.Event()

    def __getattr__(self, name: str) -> Any:
        return getattr(self.inner, name)

    def get(self, key: str) -> Any:
        try:
            return self.inner.get(key)
        finally:
            if key == self.key:
                self.key = None
                self.served.set()
                assert self.deliver.wait(10)


def test_a_lookup_whose_reply_comes_late_is_trusted_from_when_it_began() -> None:
    """A client trusts what it read for metadata_max_age_ms from when the read
    began: counted from when the reply arrived, a late reply ("no version 1")
    would be trusted past the wait of a re-creation, and a send after it would
    be acknowledged into the deleted topic."""
    config = dataclasses.replace(FAST, metadata_max_age_ms=200)
    slow = _LateReply(MemoryStore())
    mine = arrowlog.ArrowLog(cast(Store, slow), config=config)
    other = arrowlog.ArrowLog(slow.inner, config=config)
    mine.create_topic("t", SCHEMA, 1)
    producer = mine.producer()
    producer.send("t", rows(1), partition=0)
    time.sleep(0.25)  # what mine knows is now too old: its next send reads the chain
    slow.key = topic_version_key("t", 1)
    sending = Background(lambda: producer.send("t", rows(2), partition=0))
    assert slow.served.wait(10)  # the chain said: no version 1, yet
    other.delete_topic("t")
    other.create_topic("t", SCHEMA, 1)  # waits 200 ms
    slow.deliver.set()
    sending.result()  # concurrent with the delete: it may go with the old topic
    acked = []
    try:
        producer.send("t", rows(3), partition=0)
        acked.append(3)
    except UnknownTopicOrPartitionError:
        pass
    assert everything(arrowlog.ArrowLog(slow.inner, config=FAST)) == acked
