"""Adversarial schedules against topic versions and producer-state expiry
(docs/protocol.md, "Changing a topic": versions, announcements, old
announcements going; "Producer state expires"; invariant 7, "opening a
partition costs O(one checkpoint + the tail)").

The promises attacked:

- a writer with an old view of a topic learns of a newer version (a config
  change, more partitions, a delete, the name created anew) before it
  appends; never acknowledged, once the name lives again, for a record in the
  old incarnation;
- opening a partition costs the same whatever the topic's alter and
  compaction history; vacuum leaves one announcement;
- producer state expires on the store's clock, never a writer's: a resend of
  an in-doubt batch after retention and vacuum is recognised whatever the
  writers' clocks say, the store's clock jumping back, or checkpoints written
  by a client older than the dating.

Time is never waited for: :class:`ClockStore` dates objects on a fake store
clock; :class:`Machines` below gives each client machine its own clocks, so
that one of them can be suspended (its ``time.monotonic`` stops, as Linux's
CLOCK_MONOTONIC does; CLOCK_BOOTTIME, ``arrowlog._clock.elapsed``, and the
wall clock go on). Orderings are ScriptedStore gates.

Written by an independent attack (it did not build what it attacks). Its
findings were strict xfails until fixed; each docstring gives the schedule,
the guarantee and what was observed before the fix.

Origin: the attack on topic versions (was tests/attack/test_version_schedules.py).
"""

from __future__ import annotations

import time
from typing import Any

import pyarrow as pa
import pytest

import arrowlog
from arrowlog import (
    AppendOutcomeUnknownError,
    LogConfig,
    TopicConfig,
    UnknownTopicOrPartitionError,
    _clock,
)
from arrowlog.format.checkpoint import Checkpoint, ProducerEntry
from arrowlog.format.topic import (
    checkpoint_key,
    log_start_key,
    parse_announcement_key,
    segment_key,
)
from arrowlog.maintenance.compaction import MIN_TARGET_BYTES
from arrowlog.storage import Store
from arrowlog.storage.url import open_store
from arrowlog.storage.wrappers import CountingStore
from arrowlog.testing.scripted import ScriptedStore
from tests.support.clocks import ClockStore
from tests.support.schedules import FAST, FOREVER, SCHEMA, Background, rows

MIN = 60_000
DAY = 24 * 60 * MIN
#: delete_delay_ms of the topics here: the default, 15 minutes of fake time
DELAY = 15 * MIN
#: metadata_max_age_ms of every client here: the default
MAX_AGE = LogConfig().metadata_max_age_ms


class Machines:
    """The clocks of several client machines in one process, and the store's.

    Every machine's wall clock and CLOCK_BOOTTIME move with the store's clock
    (:meth:`advance`); each machine's ``time.monotonic`` does too, except
    while it is suspended (:meth:`suspend`), as Linux's CLOCK_MONOTONIC
    stops in suspend. ``on(name)`` makes ``name`` the machine whose clocks
    the calls that follow read (the schedule runs one party at a time);
    ``skew`` sets off the wall clock of the machine acting (a writer whose
    clock is wrong dates its headers with it)."""

    def __init__(self, store: ClockStore, monkeypatch: pytest.MonkeyPatch) -> None:
        self.store = store
        self.passed = 0.0  # seconds since the test began, for every clock but suspended ones
        self.missed: dict[str, float] = {}  # machine -> seconds its monotonic clock missed
        self.current = ""
        self.skew = 0.0  # seconds the wall clock of the machine acting now is off by
        real_time, real_mono, real_elapsed = time.time, time.monotonic, _clock.elapsed
        monkeypatch.setattr(time, "time", lambda: real_time() + self.passed + self.skew)
        monkeypatch.setattr(
            time, "monotonic", lambda: real_mono() + self.passed - self.missed.get(self.current, 0)
        )
        monkeypatch.setattr(_clock, "elapsed", lambda: real_elapsed() + self.passed)

    def on(self, machine: str) -> None:
        self.current = machine

    def advance(self, ms: int) -> None:
        self.passed += ms / 1000
        self.store.advance(ms)

    def suspend(self, machine: str, ms: int) -> None:
        """``machine`` sleeps for ``ms`` while the world goes on."""
        self.missed[machine] = self.missed.get(machine, 0.0) + ms / 1000
        self.advance(ms)


@pytest.fixture
def clock(store: Store) -> ClockStore:
    return ClockStore(store)


@pytest.fixture
def machines(clock: ClockStore, monkeypatch: pytest.MonkeyPatch) -> Machines:
    return Machines(clock, monkeypatch)


def connect(store: Any, **kw: Any) -> arrowlog.ArrowLog:
    return arrowlog.connect(store, config=LogConfig(retry=FAST.retry, **kw))


def keys(store: Store, prefix: str = "") -> list[str]:
    return sorted(i.key for i in store.list(prefix))


def values(log: arrowlog.ArrowLog, topic: str = "t", start: int | None = None) -> list[int]:
    return [v for v in log.read(topic, 0, start=start).column("v").to_pylist() if v is not None]


# --- a writer with an old view across a delete and the name created anew ---------------


def test_a_writer_suspended_across_a_delete_and_re_creation_is_never_acknowledged(
    clock: ClockStore, machines: Machines
) -> None:
    """Schedule: writer W (machine "w") appends 0 to t/0. W's machine is
    suspended for 3 minutes; meanwhile admin (machine "admin", same
    metadata_max_age_ms, the default 30 s) deletes t, and 31 s later creates
    t anew (its wait is over: it learnt of the delete 31 s before) and
    appends to it. W wakes and appends.

    Guarantee (protocol.md, "Creating the name again": "it must never
    acknowledge, after the name lives again, a send that went to the old
    incarnation"; "A writer that has not learnt of the delete yet may still be
    acknowledged, for at most its metadata_max_age_ms"; rule 2 measures a
    writer's trust on a clock that counts suspended time, because
    ``time.monotonic`` stops there): W's append raises
    UnknownTopicOrPartitionError ("created anew") and writes nothing, or
    lands in the new topic.

    Observed: W trusts its topic version by ``time.monotonic``
    (``ArrowLog._lookup``), which its suspension did not advance: 3 minutes
    after the delete its version is "fresh"; its view of the log end is 3
    minutes old (under half the delay, so rule 2 does not list either). Its
    one PUT lands at t/0/segments/1 in the deleted incarnation (the
    re-creation's purge ran before it) and is acknowledged: no reader of t
    will ever see it, and nothing will remove it until the name is deleted
    and created again."""
    machines.on("admin")
    admin = connect(clock)
    admin.create_topic("t", SCHEMA)
    machines.on("w")
    w = connect(clock)
    assert w.append("t", rows(0)).base_offset == 0
    machines.on("admin")
    admin.delete_topic("t")
    machines.suspend("w", MAX_AGE + 1_000)
    created = admin.create_topic("t", SCHEMA)
    assert created.incarnation > 0
    admin.append("t", rows(100))
    machines.suspend("w", 3 * MIN - MAX_AGE - 1_000)

    machines.on("w")
    old_keys = set(keys(clock, "t/"))
    outcome: object
    try:
        outcome = w.append("t", rows(1))
    except UnknownTopicOrPartitionError as e:
        outcome = e
    written = set(keys(clock, "t/")) - old_keys
    assert not written, f"acknowledged {outcome!r} in the deleted incarnation: {written}"
    assert values(connect(clock)) in ([100], [100, 1])


def test_control_a_writer_awake_across_the_same_delete_and_re_creation(
    clock: ClockStore, machines: Machines
) -> None:
    """Control for the test above: the same schedule, W's machine awake (its
    monotonic clock goes on). W reads the chain again before its append (its
    version is older than metadata_max_age_ms), finds the topic created
    anew, and appends there; nothing lands in the old incarnation."""
    machines.on("admin")
    admin = connect(clock)
    admin.create_topic("t", SCHEMA)
    machines.on("w")
    w = connect(clock)
    w.append("t", rows(0))
    machines.on("admin")
    admin.delete_topic("t")
    machines.advance(MAX_AGE + 1_000)
    admin.create_topic("t", SCHEMA)
    admin.append("t", rows(100))
    machines.advance(3 * MIN - MAX_AGE - 1_000)
    machines.on("w")
    before = set(keys(clock, "t/"))
    assert w.append("t", rows(1)).base_offset == 1
    assert set(keys(clock, "t/")) == before
    assert values(connect(clock)) == [100, 1]


def test_a_put_held_across_a_delete_and_re_creation_is_not_acknowledged(
    clock: ClockStore, machines: Machines
) -> None:
    """Schedule: writer W appends 0 to t/0; its next PUT (key 1) is held in
    the network. Admin deletes t; 31 s later creates it anew and appends;
    10 minutes pass (more than half the delay: W's outcome is late, rule 3).
    The PUT lands (in the old incarnation: the purge ran before it) and W
    gets its reply.

    Guarantee (protocol.md: "it must never acknowledge, after the name lives
    again, a send that went to the old incarnation"; rule 3, "A late outcome
    is checked", lists the partition's markers, where the tombstone's
    announcement, the grave, stays): W's append is not acknowledged: it
    raises UnknownTopicOrPartitionError (or the outcome is unknown).

    Observed: W checks its late outcome (``Appends._in_log``): it lists the
    keys after the segments, which show the grave, but ``_list_marks`` reads
    only log starts and compaction marks from them; with none there, the
    floor is 0 and the append is acknowledged at offset 1 of the deleted
    incarnation, 10 minutes after the name was created again. (The protocol
    does say "a send that started before and lands later is concurrent with
    the delete and goes with the topic"; but the writer is told its record is
    stored, after the grave was in its own listing.)"""
    machines.on("w")
    scripted = ScriptedStore(clock)
    w = connect(scripted)
    admin = connect(clock)
    admin.create_topic("t", SCHEMA)
    w.append("t", rows(0))
    gate = scripted.hold("put_if_absent", segment_key("t", 0, 1))
    held = Background(lambda: w.append("t", rows(1)))
    gate.wait_reached()
    admin.delete_topic("t")
    machines.advance(MAX_AGE + 1_000)
    assert admin.create_topic("t", SCHEMA).incarnation > 0
    admin.append("t", rows(100))
    machines.advance(10 * MIN)
    gate.release()
    with pytest.raises((UnknownTopicOrPartitionError, AppendOutcomeUnknownError)):
        held.result()
    assert values(connect(clock)) == [100]


def test_a_writer_whose_view_predates_alters_more_partitions_and_a_re_creation(
    clock: ClockStore, machines: Machines
) -> None:
    """Schedule: writer W (metadata trusted for a day, so it learns only from
    listings) appends 0 and 1 to t/0 and is idle. 50 retention alters, then
    the partition count goes to 3; the delay passes and vacuum prunes the
    announcements (one left per partition); t is deleted; the delay passes
    again (W's view of the log end is stale: it lists before it writes);
    admin creates t anew (a new schema) and appends. W appends to partition 0,
    then to partition 2 (which its version does not have).

    Guarantees: the vacuum leaves one announcement per partition; W's first
    append raises UnknownTopicOrPartitionError ("created anew") and writes
    nothing in either incarnation; looked up again, W's client sees the new
    topic (one partition, its schema) and its send to partition 2 raises
    UnknownTopicOrPartitionError, writing nothing."""
    patient = 24 * 3600 * 1000
    admin = connect(clock)
    admin.create_topic("t", SCHEMA, config=TopicConfig(checkpoint_interval=4))
    w = connect(clock, metadata_max_age_ms=patient)
    w.append("t", rows(0))
    w.append("t", rows(1))
    for i in range(50):
        admin.alter_topic_config("t", retention_ms=3_600_000 + i)
    admin.create_partitions("t", 3)
    machines.advance(DELAY + 2_000)
    admin.maintenance.vacuum()
    for p in range(3):
        listed = [parse_announcement_key(k) for k in keys(clock, f"t/{p}/segments/")]
        expected = [51] if p == 0 else []  # partitions 1 and 2 came with version 51
        assert [v for v in listed if v is not None] == expected, (p, listed)
    admin.delete_topic("t")
    machines.advance(DELAY + 2_000)
    other = pa.schema([("w", pa.int32())])
    admin.create_topic("t", other)
    admin.append("t", pa.record_batch({"w": [7]}, schema=other))
    before = keys(clock)
    with pytest.raises(UnknownTopicOrPartitionError, match="created anew"):
        w.append("t", rows(2))
    assert keys(clock) == before
    assert w.topic("t").partitions == 1 and w.topic("t").schema.equals(other)
    with pytest.raises(UnknownTopicOrPartitionError):
        w.append("t", pa.record_batch({"w": [8]}, schema=other), partition=2)
    assert keys(clock) == before


def test_a_listing_that_misses_the_newest_announcement_shows_the_one_before_after_pruning(
    clock: ClockStore, machines: Machines
) -> None:
    """Schedule: 30 alters; the delay passes; vacuum leaves announcement 30
    only. Reader R (version 0 held, metadata trusted for a day) is opened.
    Then alter 31 is announced and claimed while R's next listing runs, and
    that listing misses announcement 31 (a listing is not a snapshot for
    writes racing it; it shows everything written before it began). A vacuum
    right after removes nothing (31 is younger than the delay).

    Guarantees: R learns version 30 (never acts on version 0), with two GETs
    (version 30, then 31: found, and 32: none; never a walk from 0); its next
    listing shows 31 and it learns it; vacuum keeps 30 until 31 is older
    than the delay."""
    admin = connect(clock)
    admin.create_topic("t", SCHEMA)
    admin.append("t", rows(0))
    for i in range(30):
        admin.alter_topic_config("t", retention_ms=3_600_000 + i)
    machines.advance(DELAY + 2_000)
    admin.maintenance.vacuum()
    scripted = ScriptedStore(clock)
    counting = CountingStore(scripted)
    r = connect(counting, metadata_max_age_ms=24 * 3600 * 1000).partition("t", 0)
    assert r.end_offset() == 1
    assert (r.topic.version, r.topic.config.retention_ms) == (30, 3_600_029)
    admin.alter_topic_config("t", retention_ms=1)
    scripted.hide(lambda k: parse_announcement_key(k) == 31)
    counting.reset()
    assert r.end_offset() == 1
    assert r.topic.version == 30 and counting.counts["get"] == 0
    assert not [x for x in admin.maintenance.vacuum() if parse_announcement_key(x.key) is not None]
    counting.reset()
    assert r.end_offset() == 1
    assert (r.topic.version, r.topic.config.retention_ms) == (31, 1)
    assert counting.counts["get"] == 2  # version 31, no version 32


# --- what opening costs --------------------------------------------------------------------


def _history(clock: ClockStore, machines: Machines, rounds: int) -> None:
    """``rounds`` times: 8 appends, an alter, a compaction; then the delay
    passes and a vacuum runs; then 3 appends (so the tail is the same
    whatever ``rounds`` is)."""
    admin = connect(clock)
    admin.create_topic("t", SCHEMA, config=TopicConfig(checkpoint_interval=4))
    v = 0
    for i in range(rounds):
        for _ in range(8):
            admin.append("t", rows(v))
            v += 1
        admin.alter_topic_config("t", retention_ms=3_600_000 + i)
        admin.maintenance.compact(target_bytes=MIN_TARGET_BYTES)
    machines.advance(DELAY + 2_000)
    admin.maintenance.vacuum()
    for _ in range(3):
        admin.append("t", rows(v))
        v += 1


def _opening_costs(clock: ClockStore) -> dict[str, Any]:
    counting = CountingStore(clock)
    fresh = connect(counting)
    fresh.append("t", rows(-1))  # open, learn the topic from the listing, append
    costs: dict[str, Any] = dict(counting.counts)
    costs["objects listed"] = counting.objects_listed
    counting.reset()
    fresh.partition("t", 0).end_offset()  # a sync
    costs["sync"] = dict(counting.counts)
    return costs


def test_opening_costs_the_same_after_2_or_40_rounds_of_alters_and_compactions(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Schedule: a topic with 2 rounds of (8 appends, an alter of its
    retention, a compaction), then the delay and a vacuum, then 3 appends;
    another with 40 rounds. A fresh client appends to each (opening the
    partition, learning the topic's version from its listing), then syncs.

    Guarantee (invariant 7; protocol.md: "opening a partition costs what it
    did, two GETs more on a changed topic however many changes it had"):
    the same requests of every kind, and as many objects listed, for both
    histories."""
    costs = []
    for rounds in (2, 40):
        clock = ClockStore(open_store("memory://", {}))
        with monkeypatch.context() as m:
            _history(clock, Machines(clock, m), rounds)
            costs.append(_opening_costs(clock))
    assert costs[0] == costs[1], costs


# --- producer state expires on the store's clock -------------------------------------


def _in_doubt_at_3(clock: ClockStore) -> tuple[arrowlog.ArrowLog, arrowlog.Producer]:
    """Topic t (windows of 2, retention none yet): 0..2 plain; an idempotent
    producer's batch (value 100) is put at 3 but every reply is lost and the
    write lands only after the producer gave up (AppendOutcomeUnknownError)."""
    log = connect(clock)
    log.create_topic("t", SCHEMA, config=TopicConfig(checkpoint_interval=2, delete_delay_ms=DELAY))
    for v in range(3):
        log.append("t", rows(v))
    scripted = ScriptedStore(clock)
    late = scripted.late_put(segment_key("t", 0, 3), times=FOREVER)
    p = connect(scripted).producer()
    with pytest.raises(AppendOutcomeUnknownError):
        p.send("t", rows(100), partition=0)
    assert late.land()
    return log, p


def _retention_frees_3(log: arrowlog.ArrowLog, clock: ClockStore, machines: Machines) -> None:
    """The log start moves to 9 (retention by size); the delay passes; vacuum
    removes the segments below it (3 among them)."""
    log.alter_topic_config("t", retention_bytes=1)
    log.maintenance.vacuum()
    assert log_start_key("t", 0, 9) in keys(clock, "t/0/segments/")
    machines.advance(DELAY + 5 * MIN)
    assert segment_key("t", 0, 3) in {r.key for r in connect(clock).maintenance.vacuum()}


def test_an_in_doubt_resend_is_recognised_after_the_store_clock_jumped_back_8_days(
    clock: ClockStore, machines: Machines
) -> None:
    """Schedule: P's batch lands at 3 (outcome unknown to P) at store time T;
    the store's clock jumps back 8 days; Q writes 4..9 (their segments dated
    T - 8 days, older than P's) and the checkpoints of [2, 4) .. [8, 10);
    retention moves the log start to 9, the delay passes, vacuum removes
    0..7; P flushes. Guarantee (protocol.md, "A store whose clock jumps.
    Back: ... state is kept longer (harmless)"): every checkpoint after the
    jump still holds P; its resend is recognised at 3, nothing written
    again; its next batch lands at 10."""
    log, p = _in_doubt_at_3(clock)
    clock.advance(-8 * DAY)
    q = connect(clock)
    for v in range(4, 10):
        q.append("t", rows(v))
    for start in (4, 6, 8):
        assert p.producer_id in _producers_at(clock, start)
    _retention_frees_3(log, clock, machines)
    p.flush()
    assert p.send("t", rows(101), partition=0).base_offset == 10
    assert values(connect(clock), start=9) == [9, 101]


def test_an_in_doubt_resend_across_checkpoints_of_an_old_client_and_a_writer_8_days_ahead(
    clock: ClockStore, machines: Machines
) -> None:
    """Schedule (windows of 2): P's batch lands at 3 (outcome unknown to P);
    Q, whose clock runs 8 days ahead, writes 4..7; the checkpoints of
    [2, 4), [4, 6) and [6, 8) are then as a client older than the dating
    writes them (no ``producers_stored_ms``; its producers as the new client
    had them); a fresh client R writes 8 and 9 (it opens from the undated
    [6, 8) and writes [8, 10)); retention moves the log start to 9, the
    delay passes, vacuum removes 0..7; P flushes. Guarantee (protocol.md,
    "Best effort. ... Checkpoints written before this dating have no
    producers_stored_ms: their producers are dated by the next checkpoint";
    "Writers' clocks decide nothing here"): P is never forgotten (not by
    Q's clock, not by R's checkpoint after undated ones); its resend is
    recognised at 3; its next batch lands at 10."""
    from arrowlog import _checked_json

    log, p = _in_doubt_at_3(clock)
    machines.skew = 8 * DAY / 1000  # Q's wall clock: it dates Q's headers
    q = connect(clock)
    for v in range(4, 8):
        q.append("t", rows(v))
    machines.skew = 0
    for start in (2, 4, 6):
        key = checkpoint_key("t", 0, start)
        fields = _checked_json.load(clock.get(key), key=key, error=arrowlog.CorruptObjectError)
        assert fields.pop("producers_stored_ms")
        clock.delete(key)
        clock.put_if_absent(key, _checked_json.dump(fields))
    r = connect(clock)
    for v in (8, 9):
        r.append("t", rows(v))
    assert p.producer_id in _producers_at(clock, 8)
    _retention_frees_3(log, clock, machines)
    p.flush()
    assert p.send("t", rows(101), partition=0).base_offset == 10
    assert values(connect(clock), start=9) == [9, 101]


def _producers_at(clock: ClockStore, start: int) -> dict[int, ProducerEntry]:
    """The producer state the checkpoint of the window at ``start`` holds."""
    key = checkpoint_key("t", 0, start)
    return Checkpoint.from_json(clock.get(key), key=key, start=start).state.producers
