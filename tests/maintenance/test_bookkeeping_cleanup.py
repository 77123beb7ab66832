"""Cleanup of bookkeeping by a vacuum of every topic (issue 11, part 3): claims
of producer ids, coordinator and group entries, expired transactional ids,
staged files. Days pass at once through the injected clocks of
:mod:`tests.support.clocks`; every test checks that what readers, producers and groups
see is unchanged, and that what must stay stays."""

from __future__ import annotations

import time
from collections.abc import Callable

import pyarrow as pa
import pytest

import arrowlog
from arrowlog import TopicConfig
from arrowlog.config import DEFAULT_RETAIN_MS, MIN_RETAIN_MS
from arrowlog.errors import InvalidConfigError, ProducerFencedError
from arrowlog.maintenance.cleanup import STAGING_PREFIX
from arrowlog.maintenance.compaction import MIN_TARGET_BYTES
from arrowlog.storage import Blob, Store
from arrowlog.txn.coordinator import (
    COORDINATOR_PREFIX,
    EXPIRE_ID,
    PRODUCER_IDS_PREFIX,
    TXN_IDS_PREFIX,
    CoordinatorLog,
    entry_key,
)
from arrowlog.txn.groups import GROUPS_PREFIX
from tests.support.clocks import Clocks, ClockStore
from tests.support.schedules import FAST

DAY_MS = 24 * 3600 * 1000
WEEK_MS = 7 * DAY_MS
SCHEMA = pa.schema([pa.field("id", pa.int64())])
DELAY_MS = TopicConfig().delete_delay_ms


def rows(first: int, n: int = 3) -> pa.RecordBatch:
    return pa.record_batch([pa.array(range(first, first + n), pa.int64())], schema=SCHEMA)


def keys(store: Store, prefix: str) -> list[str]:
    """The objects under ``prefix``, without the start objects of entry logs."""
    return [info.key for info in store.list(prefix) if "/start-" not in info.key]


def ids(log: arrowlog.ArrowLog, partitions: int = 2) -> list[int]:
    """The ids a new client reads, filler left out."""
    fresh = arrowlog.connect(log.store, config=FAST)
    out: list[int] = []
    for p in range(partitions):
        out += [i for i in fresh.consumer().read("t", p).column("id").to_pylist() if i is not None]
    return sorted(i for i in out if i < FILLER)


FILLER = 1_000_000


def fill(log: arrowlog.ArrowLog) -> None:
    """Plain appends enough to close and checkpoint the windows before them
    (compaction takes whole windows up to the newest checkpoint's)."""
    for p in range(2):
        for n in range(8):
            log.append("t", rows(FILLER + 10 * n), partition=p)


@pytest.fixture
def setup(
    store: Store, monkeypatch: pytest.MonkeyPatch
) -> tuple[arrowlog.ArrowLog, Clocks, ClockStore]:
    # the store's clock starts at this machine's: a dry run ages by the latter
    clock = ClockStore(store, start_ms=int(time.time() * 1000))
    clocks = Clocks(clock, monkeypatch)
    log = arrowlog.connect(clock, config=FAST)
    log.create_topic("t", SCHEMA, partitions=2, config=TopicConfig(checkpoint_interval=4))
    return log, clocks, clock


def entry_removals(removed: list[arrowlog.Removal], prefix: str) -> list[str]:
    """The keys of the entries (not start objects) removed under ``prefix``."""
    return [r.key for r in removed if r.key.startswith(prefix) and "/start-" not in r.key]


def compact_and_vacuum(log: arrowlog.ArrowLog, clocks: Clocks) -> list[arrowlog.Removal]:
    """What a daily job does: compact, let the delay pass, vacuum."""
    log.maintenance.compact(target_bytes=MIN_TARGET_BYTES)
    clocks.advance(DELAY_MS + 2000)
    return log.maintenance.vacuum()


def test_bad_retain_is_refused_and_nothing_is_written(setup: tuple) -> None:  # type: ignore[type-arg]
    log, _, clock = setup
    before = list(clock.writes)
    for bad in (0, MIN_RETAIN_MS - 1, -5, 1.5, "7d", True):
        with pytest.raises(InvalidConfigError, match="retain_ms"):
            log.maintenance.vacuum(retain_ms=bad)
    assert clock.writes == before


def test_claims_of_producer_ids_go_only_when_old_and_held_by_nothing(setup: tuple) -> None:  # type: ignore[type-arg]
    log, clocks, clock = setup
    idle = log.producer()  # claims an id at its first send; never sends again
    idle.send("t", rows(0), partition=0)
    busy = log.producer()
    busy.send("t", rows(10), partition=1)
    app = log.producer(transactional_id="app")
    app.init_transactions()
    for p in (idle, busy):
        p.flush()
    claims = set(keys(clock, PRODUCER_IDS_PREFIX))
    assert len(claims) == 3

    clocks.advance(DEFAULT_RETAIN_MS + DAY_MS)
    busy.send("t", rows(20), partition=1)  # old claim, recent in a producer state
    busy.flush()
    app.begin_transaction()  # the transactional id stays in use
    app.send("t", rows(30), partition=1)
    app.commit_transaction()
    app.flush()
    young = log.producer()
    young.send("t", rows(40), partition=0)  # a claim younger than the horizon
    young.flush()
    idle_claim = f"{PRODUCER_IDS_PREFIX}{idle.producer_id:020d}"
    everything = set(keys(clock, PRODUCER_IDS_PREFIX))
    assert len(everything) == 4

    dry = [
        r.key for r in log.maintenance.vacuum(dry_run=True) if r.key.startswith(PRODUCER_IDS_PREFIX)
    ]
    assert dry == [idle_claim]
    assert set(keys(clock, PRODUCER_IDS_PREFIX)) == everything  # a dry run removes nothing
    removed = [r for r in log.maintenance.vacuum() if r.key.startswith(PRODUCER_IDS_PREFIX)]
    assert [r.key for r in removed] == [idle_claim]
    assert "no producer state" in removed[0].reason
    assert set(keys(clock, PRODUCER_IDS_PREFIX)) == everything - {idle_claim}
    # a week on, with nothing sent meanwhile, the idle ids of those producers go too
    clocks.advance(DEFAULT_RETAIN_MS + DAY_MS)
    app.begin_transaction()
    app.send("t", rows(50), partition=1)
    app.commit_transaction()
    app.flush()
    removed = [r.key for r in log.maintenance.vacuum() if r.key.startswith(PRODUCER_IDS_PREFIX)]
    gone = {f"{PRODUCER_IDS_PREFIX}{p.producer_id:020d}" for p in (busy, young)}
    assert set(removed) == gone
    assert keys(clock, PRODUCER_IDS_PREFIX) == [f"{PRODUCER_IDS_PREFIX}{app.producer_id:020d}"]
    assert ids(log) == [0, 1, 2, 10, 11, 12, 20, 21, 22, 30, 31, 32, 40, 41, 42, 50, 51, 52]


def test_a_vacuum_of_named_topics_leaves_shared_bookkeeping_alone(setup: tuple) -> None:  # type: ignore[type-arg]
    log, clocks, clock = setup
    p = log.producer()
    p.send("t", rows(0))
    p.flush()
    clock.put_if_absent(f"{STAGING_PREFIX}q/x.arrow", b"staged")
    clocks.advance(3 * DEFAULT_RETAIN_MS)
    assert not [r for r in log.maintenance.vacuum(["t"]) if r.key.startswith("_arrowlog/staging/")]
    assert keys(clock, STAGING_PREFIX) == [f"{STAGING_PREFIX}q/x.arrow"]
    removed = [r for r in log.maintenance.vacuum() if r.key.startswith(STAGING_PREFIX)]
    assert [r.key for r in removed] == [f"{STAGING_PREFIX}q/x.arrow"]
    assert keys(clock, STAGING_PREFIX) == []


def test_staged_files_go_only_after_the_horizon(setup: tuple) -> None:  # type: ignore[type-arg]
    log, clocks, clock = setup
    clock.put_if_absent(f"{STAGING_PREFIX}q/old.arrow", b"old")
    clocks.advance(DAY_MS)
    clock.put_if_absent(f"{STAGING_PREFIX}q/young.arrow", b"young")
    assert not [
        r for r in log.maintenance.vacuum(retain_ms=2 * DAY_MS) if r.key.startswith(STAGING_PREFIX)
    ]
    clocks.advance(DAY_MS + 2000)
    removed = [
        r.key
        for r in log.maintenance.vacuum(retain_ms=2 * DAY_MS)
        if r.key.startswith(STAGING_PREFIX)
    ]
    assert removed == [f"{STAGING_PREFIX}q/old.arrow"]
    assert keys(clock, STAGING_PREFIX) == [f"{STAGING_PREFIX}q/young.arrow"]


def test_coordinator_entries_go_once_no_stored_record_needs_them(setup: tuple) -> None:  # type: ignore[type-arg]
    log, clocks, clock = setup
    app = log.producer(transactional_id="app")
    app.init_transactions()
    expected: list[int] = []
    for n in range(6):
        app.begin_transaction()
        app.send("t", rows(10 * n), partition=n % 2)
        if n % 3 == 2:
            app.abort_transaction()
        else:
            app.commit_transaction()
            expected += range(10 * n, 10 * n + 3)
    app.flush()
    fill(log)
    prefix = f"{COORDINATOR_PREFIX}app/"
    entries = len(keys(clock, prefix))
    clocks.advance(DEFAULT_RETAIN_MS + DAY_MS)
    # the records are still in plain segments: a reader may ask about any of
    # them; only the init entry (no transaction) may go
    # (the init entry, and the first PREPARE: the COMPLETE after it answers)
    first = entry_removals(log.maintenance.vacuum(), prefix)
    assert set(first) <= {entry_key("app", 0), entry_key("app", 1)}
    assert ids(log) == sorted(expected)
    app.begin_transaction()  # the id stays in use
    app.send("t", rows(900), partition=1)
    app.commit_transaction()
    app.flush()
    expected += [900, 901, 902]

    removed = entry_removals(compact_and_vacuum(log, clocks), prefix)
    # every entry of the compacted transactions but the newest of them (the
    # entry after it is young); the new transaction's stay
    assert len(first) + len(removed) == entries - 1
    assert len(keys(clock, prefix)) == 3
    assert ids(log) == sorted(expected)
    # the producer goes on: its next transactions commit and read back
    app.begin_transaction()
    app.send("t", rows(1000), partition=0)
    app.commit_transaction()
    app.flush()
    assert ids(log) == sorted([*expected, 1000, 1001, 1002])


def test_a_read_that_stops_before_a_marker_still_finds_its_transaction_committed(
    setup: tuple,  # type: ignore[type-arg]
) -> None:
    log, clocks, clock = setup
    app = log.producer(transactional_id="app")
    app.init_transactions()
    app.begin_transaction()
    app.send("t", rows(0), partition=0)
    app.send("t", rows(3), partition=0)
    app.commit_transaction()  # its marker lands at offset 6
    app.flush()
    clocks.advance(DEFAULT_RETAIN_MS + DAY_MS)
    for n in range(2):  # the id stays in use; its first entries get old
        app.begin_transaction()
        app.send("t", rows(100 + 10 * n), partition=1)
        app.commit_transaction()
    app.flush()
    clocks.advance(DEFAULT_RETAIN_MS + DAY_MS)
    app.begin_transaction()
    app.send("t", rows(200), partition=1)
    app.commit_transaction()
    app.flush()
    log.maintenance.vacuum()
    # [0, 3) holds no marker: the reader asks the coordinator about the
    # transaction, whose records are still stored, so its entries stayed
    fresh = arrowlog.connect(clock, config=FAST)
    assert fresh.consumer().read("t", 0, 0, 3).column("id").to_pylist() == [0, 1, 2]
    assert ids(log) == [0, 1, 2, 3, 4, 5, 100, 101, 102, 110, 111, 112, 200, 201, 202]


def test_an_idle_transactional_id_expires_and_its_old_producer_is_fenced(setup: tuple) -> None:  # type: ignore[type-arg]
    log, clocks, clock = setup
    app = log.producer(transactional_id="app")
    app.init_transactions()
    app.begin_transaction()
    app.send("t", rows(0), partition=0)
    app.commit_transaction()
    app.flush()
    fill(log)
    clocks.advance(DEFAULT_RETAIN_MS + DAY_MS)
    removed = compact_and_vacuum(log, clocks)
    prefix = f"{COORDINATOR_PREFIX}app/"
    tomb = [r for r in removed if r.key.startswith(prefix) and "expired" in r.reason]
    assert len(tomb) == 1
    latest = CoordinatorLog(clock, "app", FAST.retry).latest()
    assert latest is not None and latest.reason == EXPIRE_ID
    assert keys(clock, TXN_IDS_PREFIX) == [f"{TXN_IDS_PREFIX}app"]  # still listed
    clocks.advance(DEFAULT_RETAIN_MS + DAY_MS)
    log.maintenance.vacuum()
    assert keys(clock, prefix) == [latest_key(clock, prefix)]  # one entry: the fence

    # the old producer comes back: fenced, and what it sent is never visible
    app.begin_transaction()
    app.send("t", rows(50), partition=1)
    with pytest.raises(ProducerFencedError, match="expired"):
        app.commit_transaction()
    assert ids(log) == [0, 1, 2]
    # a new instance starts afresh on the same id
    again = log.producer(transactional_id="app")
    again.init_transactions()
    again.begin_transaction()
    again.send("t", rows(70), partition=1)
    again.commit_transaction()
    again.flush()
    assert ids(log) == [0, 1, 2, 70, 71, 72]


def latest_key(store: Store, prefix: str) -> str:
    return keys(store, prefix)[0]  # inverted numbers: the newest first


def test_group_entries_below_the_newest_go_and_the_position_stays(setup: tuple) -> None:  # type: ignore[type-arg]
    log, clocks, clock = setup
    consumer = log.consumer(group_id="g")
    for n in range(5):
        consumer.commit({("t", 0): n, ("t", 1): 2 * n})
    prefix = f"{GROUPS_PREFIX}g/"
    assert len(keys(clock, prefix)) == 5
    clocks.advance(DAY_MS)
    consumer.commit({("t", 0): 7})
    clocks.advance(DEFAULT_RETAIN_MS)
    # the first four were superseded more than retain_ms ago; the fifth only by
    # the entry written a day later, which is not that old: it stays
    removed = [r for r in log.maintenance.vacuum() if r.key.startswith(prefix)]
    assert len(removed) == 4
    assert len(keys(clock, prefix)) == 2
    # the log starts at entry 4 from now on: a late write below it is a stray
    assert [i.key for i in clock.list(prefix) if "/start-" in i.key] == [
        f"{prefix}start-{4:020d}.json"
    ]
    fresh = arrowlog.connect(clock, config=FAST).consumer(group_id="g")
    assert (fresh.committed("t", 0), fresh.committed("t", 1)) == (7, 8)
    consumer.commit({("t", 1): 9})
    assert (fresh.committed("t", 0), fresh.committed("t", 1)) == (7, 9)


class LatePut:
    """Holds the first PUT to a key whose name contains ``marker``: ``meanwhile``
    runs first (other clients, days passing, a vacuum), then the PUT lands."""

    def __init__(self, clock: ClockStore, marker: str, meanwhile: Callable[[], None]) -> None:
        self.clock = clock
        self.marker = marker
        self.meanwhile: Callable[[], None] | None = meanwhile
        self.held: list[str] = []

    def __getattr__(self, name: str) -> object:
        return getattr(self.clock, name)

    def put_if_absent(self, key: str, data: Blob) -> None:
        if self.meanwhile is not None and self.marker in key:
            run, self.meanwhile = self.meanwhile, None
            self.held.append(key)
            run()
        self.clock.put_if_absent(key, data)


def test_a_group_commit_landing_in_a_freed_key_is_not_lost(setup: tuple) -> None:  # type: ignore[type-arg]
    log, clocks, clock = setup
    consumer = log.consumer(group_id="g")
    consumer.commit({("t", 0): 1})
    prefix = f"{GROUPS_PREFIX}g/"

    def meanwhile() -> None:
        other = arrowlog.connect(clock, config=FAST).consumer(group_id="g")
        for n in range(3):
            other.commit({("t", 1): 10 + n})
        clocks.advance(DEFAULT_RETAIN_MS + DAY_MS)
        arrowlog.connect(clock, config=FAST).maintenance.vacuum()
        assert len(keys(clock, prefix)) == 1  # entries 0..2 removed: their keys are free

    late = LatePut(clock, prefix, meanwhile)
    slow = arrowlog.connect(late, config=FAST).consumer(group_id="g")  # type: ignore[arg-type]
    slow.commit({("t", 0): 4})  # read entry 0 as the latest; its PUT of entry 1 lands late
    assert late.held
    fresh = arrowlog.connect(clock, config=FAST).consumer(group_id="g")
    assert (fresh.committed("t", 0), fresh.committed("t", 1)) == (4, 12)
    # no stray was left below the log
    assert len(keys(clock, prefix)) == 2


def test_a_zombie_prepare_landing_in_a_freed_key_never_commits(setup: tuple) -> None:  # type: ignore[type-arg]
    log, clocks, clock = setup
    zombie = log.producer(transactional_id="app")
    zombie.init_transactions()
    zombie.begin_transaction()
    zombie.send("t", rows(0), partition=0)
    zombie.commit_transaction()
    zombie.flush()
    own = zombie._transactions.last_entry
    assert own is not None
    freed = entry_key("app", own.n + 1)
    # a new instance fences it and commits; then both stay idle past the horizon
    successor = arrowlog.connect(clock, config=FAST).producer(transactional_id="app")
    successor.init_transactions()
    successor.begin_transaction()
    successor.send("t", rows(10), partition=0)
    successor.commit_transaction()
    successor.flush()
    fill(log)
    clocks.advance(DEFAULT_RETAIN_MS + DAY_MS)
    compact_and_vacuum(log, clocks)
    prefix = f"{COORDINATOR_PREFIX}app/"
    kept = keys(clock, prefix)
    assert freed not in kept  # the zombie's next key is free again
    # the zombie wakes: its state in the partitions was forgotten, so its
    # records land; its PREPARE takes the freed key of the entry after its own
    zombie.begin_transaction()
    zombie.send("t", rows(20), partition=1)
    with pytest.raises(ProducerFencedError):
        zombie.commit_transaction()
    assert ids(log) == [0, 1, 2, 10, 11, 12]
    assert keys(clock, prefix) == kept  # its stray entry was removed
