"""Vacuum removes the checkpoints of windows below the log start, once the log
start is older than both the topic's delete_delay_ms and the vacuum's
retain_ms; every client works as before, a killed vacuum is finished by the
next, and a PUT whose late outcome can no longer be checked (the checkpoint
indexing its offset is gone) is reported as unknown, never acknowledged
(docs/protocol.md, "Deleting records", rule 3).

Time is injected (:mod:`tests.support.clocks`): days pass at once. Every test runs on
memory, a local directory and SeaweedFS over HTTP.
"""

from __future__ import annotations

import time

import pytest

import arrowlog
from arrowlog import OffsetOutOfRangeError, TopicConfig
from arrowlog.config import DAY_MS, DEFAULT_RETAIN_MS
from arrowlog.format.topic import checkpoint_key, log_start_key, segment_key
from arrowlog.maintenance.compaction import MIN_TARGET_BYTES
from arrowlog.storage import Store
from arrowlog.testing.scripted import ScriptedStore
from arrowlog.txn.view import CLOCK_PREFIX
from tests.support.clocks import Clocks, ClockStore
from tests.support.schedules import FAST, PLAIN, SCHEMA, Background, rows

DELAY_MS = 15 * 60 * 1000
#: windows [0,2) [2,4) [4,6) [6,8) [8,10) for ten segments
CONFIG = TopicConfig(checkpoint_interval=2, delete_delay_ms=DELAY_MS)
#: past the delay, with the store clock's grain
RIPE_MS = DELAY_MS + 2000


def clocked(store: Store, monkeypatch: pytest.MonkeyPatch) -> tuple[ClockStore, Clocks]:
    """The store on a fake clock that starts now (so a dry run, on this
    machine's clock, agrees with it), and the clocks that move it."""
    clock = ClockStore(store, start_ms=int(time.time() * 1000))
    return clock, Clocks(clock, monkeypatch)


def ten_records(store: Store | ClockStore, config: TopicConfig = CONFIG) -> arrowlog.ArrowLog:
    log = arrowlog.connect(store, config=PLAIN)  # segments only: retention counts their sizes
    log.create_topic("t", SCHEMA, config=config)
    for v in range(10):
        log.append("t", rows(v))
    return log


def checkpoints(store: Store | ClockStore) -> set[int]:
    """The window starts of the checkpoints there."""
    return {s for s in range(0, 40, 2) if checkpoint_key("t", 0, s) in objects(store)}


def objects(store: Store | ClockStore) -> set[str]:
    return {info.key for info in store.list("t/0/")}


def values(log: arrowlog.ArrowLog, start: int | None = None) -> list[int]:
    return [v for v in log.read("t", 0, start=start).column("v").to_pylist() if isinstance(v, int)]


def removed_checkpoints(removals: list[arrowlog.Removal]) -> list[str]:
    return [r.key for r in removals if "/checkpoints/" in r.key]


def test_checkpoints_below_the_log_start_go_after_the_delay_and_retain_ms(
    store: Store, monkeypatch: pytest.MonkeyPatch
) -> None:
    clock, clocks = clocked(store, monkeypatch)
    log = ten_records(clock)
    log.delete_records("t", 0, 7)  # the log start, inside window [6, 8)
    clocks.advance(RIPE_MS)
    assert not removed_checkpoints(
        log.maintenance.vacuum()
    )  # the segments go, the checkpoints stay
    assert segment_key("t", 0, 0) not in objects(clock)
    clocks.advance(DEFAULT_RETAIN_MS - RIPE_MS - DAY_MS)
    assert not removed_checkpoints(log.maintenance.vacuum())  # the log start is 6 days old
    assert checkpoints(clock) == {0, 2, 4, 6, 8}
    clocks.advance(DAY_MS + 2000)
    # a dry run lists them and writes nothing
    writes = list(clock.writes)
    planned = log.maintenance.vacuum(dry_run=True)
    assert clock.writes == writes
    assert checkpoints(clock) == {0, 2, 4, 6, 8}
    gone = [checkpoint_key("t", 0, s) for s in (0, 2, 4)]
    assert removed_checkpoints(planned) == gone
    reasons = [r.reason for r in planned if r.key in gone]
    assert reasons[0] == (
        "checkpoint of offsets [0, 2), below the log start 7 since more than "
        f"retain_ms ({DEFAULT_RETAIN_MS} ms)"
    )
    assert removed_checkpoints(log.maintenance.vacuum()) == gone
    # the window holding the log start, and the newest, stay
    assert checkpoints(clock) == {6, 8}
    assert log.maintenance.vacuum() == []  # idempotent


def test_a_delay_longer_than_retain_ms_is_waited_for_too(
    store: Store, monkeypatch: pytest.MonkeyPatch
) -> None:
    clock, clocks = clocked(store, monkeypatch)
    log = ten_records(clock, TopicConfig(checkpoint_interval=2, delete_delay_ms=2 * DAY_MS))
    log.delete_records("t", 0, 8)
    clocks.advance(DAY_MS)
    assert log.maintenance.vacuum(retain_ms=3600 * 1000) == []
    assert checkpoints(clock) == {0, 2, 4, 6, 8}
    clocks.advance(DAY_MS + 2000)
    removed = log.maintenance.vacuum(retain_ms=3600 * 1000)
    assert removed_checkpoints(removed) == [checkpoint_key("t", 0, s) for s in (0, 2, 4, 6)]
    # after the segments they index
    keys = [r.key for r in removed]
    assert keys.index(segment_key("t", 0, 7)) < keys.index(checkpoint_key("t", 0, 0))
    assert checkpoints(clock) == {8}  # the newest stays: the log start window


def test_the_newest_checkpoint_stays_when_every_record_is_deleted(
    store: Store, monkeypatch: pytest.MonkeyPatch
) -> None:
    clock, clocks = clocked(store, monkeypatch)
    log = ten_records(clock)
    log.delete_records("t", 0, 10)
    clocks.advance(RIPE_MS)
    log.maintenance.vacuum()
    clocks.advance(DEFAULT_RETAIN_MS)
    log.maintenance.vacuum()
    assert checkpoints(clock) == {8}
    fresh = arrowlog.connect(clock, config=FAST)
    assert fresh.start_offsets("t") == {0: 10} == fresh.end_offsets("t")
    assert fresh.append("t", rows(10)).base_offset == 10
    assert values(arrowlog.connect(clock, config=FAST)) == [10]


def test_superseded_log_starts_date_the_cleanup_under_continuous_retention(
    store: Store, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Retention moves the log start at every daily vacuum: the newest log
    start is never a week old, yet the checkpoints below one that is go."""
    clock, clocks = clocked(store, monkeypatch)
    log = ten_records(clock)
    for day in range(10):
        log.append("t", rows(10 + 2 * day))
        log.append("t", rows(11 + 2 * day))
        log.delete_records("t", 0, 2 * day + 2)
        clocks.advance(DAY_MS)
        log.maintenance.vacuum()
    # the log start is 20, a day old; the newest older than 7 days is 6
    assert log.start_offsets("t") == {0: 20}
    assert checkpoints(clock) == set(range(6, 30, 2))
    assert values(arrowlog.connect(clock, config=FAST)) == list(range(20, 30))


def test_every_client_works_after_the_cleanup(
    store: Store, monkeypatch: pytest.MonkeyPatch
) -> None:
    clock, clocks = clocked(store, monkeypatch)
    log = ten_records(clock)
    stale = arrowlog.connect(clock, config=FAST)
    assert values(stale) == list(range(10))  # knows the log from 0, and its windows
    # these two know only the newest checkpoint and the log start 0
    others = [arrowlog.connect(clock, config=FAST) for _ in range(2)]
    assert [o.end_offsets("t") for o in others] == [{0: 10}] * 2
    log.delete_records("t", 0, 7)
    clocks.advance(RIPE_MS)
    log.maintenance.vacuum()
    clocks.advance(DEFAULT_RETAIN_MS + RIPE_MS)
    assert removed_checkpoints(log.maintenance.vacuum())
    # below the log start: out of range (not a missing checkpoint or segment)
    with pytest.raises(OffsetOutOfRangeError, match="below the log start 7"):
        others[0].read("t", 0, start=0, end=4)
    with pytest.raises(OffsetOutOfRangeError, match="below the log start 7"):
        others[1].partition("t", 0).summaries(2, 9)
    with pytest.raises(OffsetOutOfRangeError, match="log start"):
        stale.read("t", 0, start=0, end=4)
    for client in (stale, arrowlog.connect(clock, config=FAST)):
        assert values(client) == [7, 8, 9]
        assert client.start_offsets("t") == {0: 7}
        assert client.end_offsets("t") == {0: 10}
        assert [s.base for s in client.partition("t", 0).summaries()] == [7, 8, 9]
    assert stale.append("t", rows(10)).base_offset == 10
    # compaction plans from the log start's window
    for v in range(11, 16):
        log.append("t", rows(v))
    done = log.maintenance.compact(target_bytes=MIN_TARGET_BYTES)
    assert done and values(arrowlog.connect(clock, config=FAST)) == list(range(7, 16))
    clocks.advance(RIPE_MS)
    log.maintenance.vacuum()
    assert values(arrowlog.connect(clock, config=FAST)) == list(range(7, 16))
    # retention by size, then by time
    newest = log.partition("t", 0).summaries(13, 16)
    log.alter_topic_config("t", retention_bytes=sum(s.size for s in newest))
    log.maintenance.vacuum()
    assert arrowlog.connect(clock, config=FAST).start_offsets("t") == {0: 13}
    assert values(arrowlog.connect(clock, config=FAST)) == [13, 14, 15]
    log.append("t", rows(16))
    log.alter_topic_config("t", retention_bytes=None, retention_ms=DAY_MS)
    clocks.advance(2 * DAY_MS)
    log.maintenance.vacuum()
    assert values(arrowlog.connect(clock, config=FAST)) == [16]
    clocks.advance(DEFAULT_RETAIN_MS + RIPE_MS)
    log.maintenance.vacuum()
    assert values(arrowlog.connect(clock, config=FAST)) == [16]
    assert values(stale) == [16]


#: what the vacuum below removes: segments 0..7, the checkpoints of [0, 8), the
#: superseded log start 7
REMOVALS = 8 + 4 + 1


@pytest.mark.parametrize("n", range(REMOVALS))
def test_a_vacuum_that_fails_at_any_removal_is_finished_by_the_next(
    store: Store, monkeypatch: pytest.MonkeyPatch, n: int
) -> None:
    """The vacuum that removes checkpoints raises just before its ``n``-th
    removal (a crash there): every client reads as before, and a rerun
    finishes: what is left is what an uninterrupted vacuum leaves."""
    clock, clocks = clocked(store, monkeypatch)
    log = ten_records(clock)
    log.delete_records("t", 0, 7)
    clocks.advance(RIPE_MS)
    log.delete_records("t", 0, 8)
    clocks.advance(DEFAULT_RETAIN_MS + 2000)
    planned = log.maintenance.vacuum(dry_run=True)
    assert len(planned) == REMOVALS and len(removed_checkpoints(planned)) == 4
    removals = [0]

    def crash(key: str) -> None:
        if not key.startswith(CLOCK_PREFIX):
            removals[0] += 1
            if removals[0] > n:
                raise _Crash(key)
        ClockStore.delete(clock, key)

    monkeypatch.setattr(clock, "delete", crash)
    with pytest.raises(_Crash):
        log.maintenance.vacuum()
    monkeypatch.delattr(clock, "delete")
    fresh = arrowlog.connect(clock, config=FAST)
    assert fresh.start_offsets("t") == {0: 8}
    assert values(fresh) == [8, 9]
    assert [r.key for r in log.maintenance.vacuum()] == [r.key for r in planned[n:]]
    assert checkpoints(clock) == {8}
    assert {k for k in objects(clock) if "/segments/" in k} == {
        segment_key("t", 0, 8),
        segment_key("t", 0, 9),
        log_start_key("t", 0, 8),
    }
    assert log.maintenance.vacuum() == []
    assert fresh.append("t", rows(10)).base_offset == 10
    assert values(arrowlog.connect(clock, config=FAST)) == [8, 9, 10]


class _Crash(Exception):
    pass


@pytest.mark.parametrize("idempotent", [False, True])
def test_a_put_held_until_its_checkpoint_was_removed_has_an_unknown_outcome(
    store: Store, monkeypatch: pytest.MonkeyPatch, idempotent: bool
) -> None:
    """A's PUT at offset 1 (on a fresh view) is held in the network. B writes
    2..9, deletes the records before 8; vacuum removes segments 0..7 (freeing
    key 1) and, a week later, the checkpoints of [0, 8). Then A's PUT lands at
    key 1. The checkpoint that would say whose segment was the log's there is
    gone: the outcome is unknown, never acknowledged. An idempotent producer
    then resends the batch with its sequence: it lands once, at the log end."""
    clock, clocks = clocked(store, monkeypatch)
    scripted = ScriptedStore(clock)
    a = arrowlog.connect(scripted, config=FAST)
    a.create_topic("t", SCHEMA, config=CONFIG)
    producer = a.producer()
    producer.send("t", rows(0), partition=0)
    gate = scripted.hold("put_if_absent", segment_key("t", 0, 1))
    if idempotent:
        held = Background(lambda: producer.send("t", rows(100), partition=0))
    else:
        held = Background(lambda: a.append("t", rows(100)))
    gate.wait_reached()
    b = arrowlog.connect(clock, config=FAST)
    for v in range(1, 10):
        b.append("t", rows(v))
    b.delete_records("t", 0, 8)
    clocks.advance(RIPE_MS)
    assert segment_key("t", 0, 1) in {r.key for r in b.maintenance.vacuum()}
    clocks.advance(DEFAULT_RETAIN_MS)
    assert checkpoint_key("t", 0, 0) in removed_checkpoints(b.maintenance.vacuum())
    gate.release()
    with pytest.raises(arrowlog.AppendOutcomeUnknownError, match="was removed"):
        held.result()
    assert values(arrowlog.connect(clock, config=FAST)) == [8, 9]  # not written again
    if idempotent:
        producer.flush()
        assert values(arrowlog.connect(clock, config=FAST)) == [8, 9, 100]
        producer.flush()
        assert values(arrowlog.connect(clock, config=FAST)) == [8, 9, 100]
    # the stray at key 1 is below the log start: the next vacuum takes it
    assert segment_key("t", 0, 1) in {r.key for r in b.maintenance.vacuum()}


def test_an_open_transaction_whose_window_is_gone_still_has_a_start_time(
    store: Store, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Its first record (offset 0) is deleted and the checkpoints of its
    window removed: its start time is that of the first segment left."""
    clock, clocks = clocked(store, monkeypatch)
    log = arrowlog.connect(clock, config=FAST)
    log.create_topic("t", SCHEMA, config=CONFIG)
    hanging = log.producer(transactional_id="x")
    hanging.init_transactions()
    hanging.begin_transaction()
    hanging.send("t", rows(0), partition=0)
    for v in range(1, 10):
        log.append("t", rows(v))
    log.delete_records("t", 0, 8)
    clocks.advance(RIPE_MS)
    log.maintenance.vacuum()
    clocks.advance(DEFAULT_RETAIN_MS)
    assert checkpoint_key("t", 0, 0) in removed_checkpoints(log.maintenance.vacuum())
    for client in (log, arrowlog.connect(clock, config=FAST)):
        (txn,) = client.admin.open_transactions()
        assert txn.first_offset == 0 and not txn.registered
        assert txn.started_ms == clock.head(segment_key("t", 0, 8)).modified_ms
    assert [t.transactional_id for t in log.admin.expire_transactions()] == ["x"]
