"""Deleting records (Kafka's DeleteRecords) and removing their segments after
the topic's delete_delay_ms: every client sees the new log start, nothing at
or above it changes, and a writer as stale as can be never claims a key that a
removed segment freed (docs/protocol.md, "Deleting records").

Every test runs on memory, a local directory and SeaweedFS over HTTP.
"""

from __future__ import annotations

import time
from collections.abc import Iterator

import pytest

import arrowlog
from arrowlog import OffsetOutOfRangeError, TopicConfig
from arrowlog.errors import SegmentNotFoundError
from arrowlog.storage import Store
from arrowlog.storage.scripted import ScriptedStore
from arrowlog.topic import checkpoint_key, segment_key
from tests.attack._util import FAST, SCHEMA, Background, rows

#: short enough for a test to wait it out; the store's clock (S3's
#: LastModified is to the second) adds up to a second more
DELAY_MS = 1000
CONFIG = TopicConfig(checkpoint_interval=2, delete_delay_ms=DELAY_MS)


@pytest.fixture
def scripted(store: Store) -> Iterator[ScriptedStore]:
    yield ScriptedStore(store)


def objects(store: Store, prefix: str = "t/0/") -> set[str]:
    return {info.key for info in store.list(prefix)}


def values(log: arrowlog.ArrowLog, start: int | None = None) -> list[int]:
    return [v for v in log.read("t", 0, start=start).column("v").to_pylist() if isinstance(v, int)]


def ten_records(store: Store) -> arrowlog.ArrowLog:
    """Topic t (one partition, a checkpoint every 2 segments) holding 0..9, a
    segment each."""
    log = arrowlog.connect(store, config=FAST)
    log.create_topic("t", SCHEMA, config=CONFIG)
    for v in range(10):
        log.append("t", rows(v))
    return log


def wait_out_the_delay() -> None:
    time.sleep(DELAY_MS / 1000 + 1.2)


def test_the_log_start_moves_for_every_client_and_never_back(store: Store) -> None:
    log = ten_records(store)
    opened_before = arrowlog.connect(store, config=FAST)
    assert values(opened_before) == list(range(10))
    assert log.delete_records("t", 0, 4) == 4
    fresh = arrowlog.connect(store, config=FAST)
    assert fresh.start_offsets("t") == {0: 4}
    assert values(fresh) == [4, 5, 6, 7, 8, 9]
    # a client that knew the log before: its next listing shows the new start
    assert opened_before.partition("t", 0).end_offset() == 10
    assert opened_before.partition("t", 0).start_offset() == 4
    assert values(opened_before) == [4, 5, 6, 7, 8, 9]
    for client in (fresh, opened_before):
        with pytest.raises(OffsetOutOfRangeError, match="below the log start 4"):
            client.read("t", 0, start=3)
    assert log.delete_records("t", 0, 2) == 4  # never back
    assert log.delete_records("t", 0, 4) == 4
    # appends go on at the end
    assert log.append("t", rows(10)).base_offset == 10
    assert values(fresh) == [4, 5, 6, 7, 8, 9, 10]


@pytest.mark.parametrize("bad", [-1, 12, "5", 5.0, True, None])
def test_a_bad_offset_is_refused_and_writes_nothing(store: Store, bad: object) -> None:
    log = ten_records(store)
    log.append("t", rows(10))
    before = objects(store)
    with pytest.raises(OffsetOutOfRangeError):
        log.delete_records("t", 0, bad)  # type: ignore[arg-type]
    assert objects(store) == before
    assert log.start_offsets("t") == {0: 0}


def test_vacuum_removes_segments_below_the_log_start_only_after_the_delay(store: Store) -> None:
    log = ten_records(store)
    log.delete_records("t", 0, 7)
    assert log.vacuum() == []  # the delay has not passed
    assert log.vacuum(dry_run=True) == []
    wait_out_the_delay()
    planned = log.vacuum(dry_run=True)
    # 0..5 end at or before the log start (7); 6 holds offset 6 and ends at 7,
    # but the newest checkpoint's chain (window [8, 10)) starts at 8: 6 and 7 stay
    # only if they are past the newest checkpoint's last segment (9): they are not
    gone = {segment_key("t", 0, b) for b in range(7)}
    assert {r.key for r in planned} == gone
    assert all("below the log start 7" in r.reason for r in planned)
    assert objects(store) >= gone  # a dry run removes nothing
    assert {r.key for r in log.vacuum()} == gone
    assert not objects(store) & gone
    # nothing at or above the log start changed, for any client
    fresh = arrowlog.connect(store, config=FAST)
    assert values(fresh) == [7, 8, 9]
    assert values(log) == [7, 8, 9]
    assert fresh.append("t", rows(10)).base_offset == 10
    assert values(log) == [7, 8, 9, 10]
    assert log.vacuum() == []  # idempotent
    # the next delete supersedes the first marker; the newest always stays
    log.delete_records("t", 0, 9)
    wait_out_the_delay()
    removed = {r.key for r in log.vacuum()}
    assert segment_key("t", 0, 7) in removed and segment_key("t", 0, 8) in removed
    assert any("superseded" in r.reason for r in log.vacuum(dry_run=True)) is False
    assert values(arrowlog.connect(store, config=FAST)) == [9, 10]


def test_the_segment_that_holds_the_log_start_and_the_newest_chain_stay(store: Store) -> None:
    log = ten_records(store)
    log.delete_records("t", 0, 10)  # every record
    wait_out_the_delay()
    log.vacuum()
    # the newest checkpoint's last segment stays: a client opens from it (and
    # every later segment: the claim on the log end)
    assert segment_key("t", 0, 9) in objects(store)
    assert segment_key("t", 0, 8) not in objects(store)
    fresh = arrowlog.connect(store, config=FAST)
    assert fresh.end_offsets("t") == {0: 10} and fresh.start_offsets("t") == {0: 10}
    assert values(fresh) == []
    assert fresh.append("t", rows(10)).base_offset == 10  # not 0, not 8


def test_a_reader_that_knew_only_removed_segments_reopens_from_the_newest_checkpoint(
    store: Store,
) -> None:
    log = arrowlog.connect(store, config=FAST)
    log.create_topic("t", SCHEMA, config=CONFIG)
    log.append("t", rows(0))
    stale = arrowlog.connect(store, config=FAST)
    assert values(stale) == [0]  # it knows segment 0, the log end 1
    for v in range(1, 10):
        log.append("t", rows(v))
    log.delete_records("t", 0, 8)
    wait_out_the_delay()
    assert segment_key("t", 0, 0) in {r.key for r in log.vacuum()}
    assert values(stale) == [8, 9]
    with pytest.raises(OffsetOutOfRangeError):
        stale.read("t", 0, start=0)


def test_an_idle_writer_lists_before_it_writes_at_a_key_a_removed_segment_freed(
    store: Store,
) -> None:
    """Writer A knows the log ends at 1. B appends 1..9, deletes records before
    8, and the delay over, vacuum removes segments 0..7: key 1 is free again. A,
    idle for longer than half the delay, lists before it writes: it lands at 10."""
    a = arrowlog.connect(store, config=FAST)
    a.create_topic("t", SCHEMA, config=CONFIG)
    a.append("t", rows(0))
    b = arrowlog.connect(store, config=FAST)
    for v in range(1, 10):
        b.append("t", rows(v))
    b.delete_records("t", 0, 8)
    wait_out_the_delay()
    assert segment_key("t", 0, 1) in {r.key for r in b.vacuum()}
    assert a.append("t", rows(100)).base_offset == 10
    assert segment_key("t", 0, 1) not in objects(store)
    assert values(arrowlog.connect(store, config=FAST)) == [8, 9, 100]


def test_a_put_held_until_its_key_was_freed_is_not_acknowledged_there(
    store: Store, scripted: ScriptedStore
) -> None:
    """A's PUT at offset 1 (its view fresh: it just wrote 0) is held in the
    network. B writes 1..9, deletes records before 8, and once the delay has
    passed vacuum removes segments 0..7, freeing key 1. Then A's PUT lands there:
    put-if-absent succeeds. Acknowledged, A's record would sit below the log
    start, in no one's log. A sees that its view was older than half the delay
    when the reply came, finds the log start past its offset and another
    segment indexed there, and writes at the real end instead."""
    a = arrowlog.connect(scripted, config=FAST)
    a.create_topic("t", SCHEMA, config=CONFIG)
    a.append("t", rows(0))
    gate = scripted.hold("put_if_absent", segment_key("t", 0, 1))
    held = Background(lambda: a.append("t", rows(100)))
    gate.wait_reached()
    b = arrowlog.connect(store, config=FAST)
    for v in range(1, 10):
        b.append("t", rows(v))
    b.delete_records("t", 0, 8)
    wait_out_the_delay()
    assert segment_key("t", 0, 1) in {r.key for r in b.vacuum()}
    gate.release()
    result = held.result()
    assert isinstance(result, arrowlog.AppendResult) and result.base_offset == 10
    assert a.partition("t", 0).stats["below_log_start"] == 1
    assert values(arrowlog.connect(store, config=FAST)) == [8, 9, 100]
    # A's stray object at key 1 is below the log start: the next vacuum takes it
    assert segment_key("t", 0, 1) in objects(store)
    wait_out_the_delay()
    assert segment_key("t", 0, 1) in {r.key for r in b.vacuum()}
    assert values(arrowlog.connect(store, config=FAST)) == [8, 9, 100]


def test_a_slow_reply_for_a_segment_that_is_the_logs_own_is_acknowledged(
    store: Store, scripted: ScriptedStore
) -> None:
    """The same slow reply, but nothing freed the key: A's segment is the log's
    (the log start is past it, yet the checkpoint there names A's segment). It
    is acknowledged once, not written again."""
    a = arrowlog.connect(scripted, config=FAST)
    a.create_topic("t", SCHEMA, config=CONFIG)
    a.append("t", rows(0))
    gate = scripted.hold("put_if_absent", segment_key("t", 0, 1))
    held = Background(lambda: a.append("t", rows(1)))
    gate.wait_reached()
    gate.release()
    time.sleep(DELAY_MS / 1000)  # the reply is late: past half the delay
    result = held.result()
    assert isinstance(result, arrowlog.AppendResult) and result.base_offset == 1
    assert values(arrowlog.connect(store, config=FAST)) == [0, 1]


def test_opening_from_an_older_checkpoint_past_removed_segments_fails_instead_of_forking(
    store: Store,
) -> None:
    log = ten_records(store)
    log.delete_records("t", 0, 8)
    wait_out_the_delay()
    log.vacuum()
    newest = checkpoint_key("t", 0, 8)
    store.delete(newest)
    store.put_if_absent(newest, b"{not json")
    fresh = arrowlog.connect(store, config=FAST)
    before = objects(store)
    with (
        pytest.warns(RuntimeWarning, match="unusable checkpoint"),
        pytest.raises(SegmentNotFoundError),
    ):
        fresh.append("t", rows(100))
    assert objects(store) == before
