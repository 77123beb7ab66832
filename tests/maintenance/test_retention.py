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
from arrowlog.format.topic import checkpoint_key, segment_key
from arrowlog.storage import Store
from arrowlog.testing.scripted import Gate, ScriptedStore
from tests.support.schedules import FAST, SCHEMA, Background, rows

#: short enough for a test to wait it out; the store's clock (S3's
#: LastModified is to the second) adds up to a second more
DELAY_MS = 100
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
    time.sleep(DELAY_MS / 1000 + 2.1)


def a_knows_the_log_ends_at_1(
    store: Store, a_store: Store
) -> tuple[arrowlog.ArrowLog, arrowlog.ArrowLog]:
    """Writer A (through ``a_store``) wrote offset 0 and knows the log ends at
    1; B wrote 1..9 and deleted the records before 8, a delay ago."""
    a = arrowlog.connect(a_store, config=FAST)
    a.create_topic("t", SCHEMA, config=CONFIG)
    a.append("t", rows(0))
    b = arrowlog.connect(store, config=FAST)
    for v in range(1, 10):
        b.append("t", rows(v))
    b.delete_records("t", 0, 8)
    wait_out_the_delay()
    return a, b


def a_put_at_1_held(
    scripted: ScriptedStore, value: int
) -> tuple[arrowlog.ArrowLog, Gate, Background]:
    """Writer A wrote offset 0; its append of ``value`` at 1, on a fresh view,
    is held in the network (release the gate to let it land)."""
    a = arrowlog.connect(scripted, config=FAST)
    a.create_topic("t", SCHEMA, config=CONFIG)
    a.append("t", rows(0))
    gate = scripted.hold("put_if_absent", segment_key("t", 0, 1))
    held = Background(lambda: a.append("t", rows(value)))
    gate.wait_reached()
    return a, gate, held


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
    assert log.maintenance.vacuum() == []  # the delay has not passed
    assert log.maintenance.vacuum(dry_run=True) == []
    wait_out_the_delay()
    planned = log.maintenance.vacuum(dry_run=True)
    # 0..5 end at or before the log start (7); 6 holds offset 6 and ends at 7,
    # but the newest checkpoint's chain (window [8, 10)) starts at 8: 6 and 7 stay
    # only if they are past the newest checkpoint's last segment (9): they are not
    gone = {segment_key("t", 0, b) for b in range(7)}
    assert {r.key for r in planned} == gone
    assert all("below the log start 7" in r.reason for r in planned)
    assert objects(store) >= gone  # a dry run removes nothing
    assert {r.key for r in log.maintenance.vacuum()} == gone
    assert not objects(store) & gone
    # nothing at or above the log start changed, for any client
    fresh = arrowlog.connect(store, config=FAST)
    assert values(fresh) == [7, 8, 9]
    assert values(log) == [7, 8, 9]
    assert fresh.append("t", rows(10)).base_offset == 10
    assert values(log) == [7, 8, 9, 10]
    assert log.maintenance.vacuum() == []  # idempotent
    # the next delete supersedes the first marker; the newest always stays
    log.delete_records("t", 0, 9)
    wait_out_the_delay()
    removed = {r.key for r in log.maintenance.vacuum()}
    assert segment_key("t", 0, 7) in removed and segment_key("t", 0, 8) in removed
    assert any("superseded" in r.reason for r in log.maintenance.vacuum(dry_run=True)) is False
    assert values(arrowlog.connect(store, config=FAST)) == [9, 10]


def test_the_segment_that_holds_the_log_start_and_the_newest_chain_stay(store: Store) -> None:
    log = ten_records(store)
    log.delete_records("t", 0, 10)  # every record
    wait_out_the_delay()
    log.maintenance.vacuum()
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
    assert segment_key("t", 0, 0) in {r.key for r in log.maintenance.vacuum()}
    assert values(stale) == [8, 9]
    with pytest.raises(OffsetOutOfRangeError):
        stale.read("t", 0, start=0)


def test_an_idle_writer_lists_before_it_writes_at_a_key_a_removed_segment_freed(
    store: Store,
) -> None:
    """Writer A knows the log ends at 1. B appends 1..9, deletes records before
    8, and the delay over, vacuum removes segments 0..7: key 1 is free again. A,
    idle for longer than half the delay, lists before it writes: it lands at 10."""
    a, b = a_knows_the_log_ends_at_1(store, store)
    assert segment_key("t", 0, 1) in {r.key for r in b.maintenance.vacuum()}
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
    a, gate, held = a_put_at_1_held(scripted, 100)
    b = arrowlog.connect(store, config=FAST)
    for v in range(1, 10):
        b.append("t", rows(v))
    b.delete_records("t", 0, 8)
    wait_out_the_delay()
    assert segment_key("t", 0, 1) in {r.key for r in b.maintenance.vacuum()}
    gate.release()
    result = held.result()
    assert isinstance(result, arrowlog.AppendResult) and result.base_offset == 10
    assert a.partition("t", 0).stats["below_log_start"] == 1
    assert values(arrowlog.connect(store, config=FAST)) == [8, 9, 100]
    # A's stray object at key 1 is below the log start: the next vacuum takes it
    assert segment_key("t", 0, 1) in objects(store)
    wait_out_the_delay()
    assert segment_key("t", 0, 1) in {r.key for r in b.maintenance.vacuum()}
    assert values(arrowlog.connect(store, config=FAST)) == [8, 9, 100]


def test_a_slow_reply_for_a_segment_that_is_the_logs_own_is_acknowledged(
    store: Store, scripted: ScriptedStore
) -> None:
    """The same slow reply, but nothing freed the key: A's segment is the log's
    (the log start is past it, yet the checkpoint there names A's segment). It
    is acknowledged once, not written again."""
    _, gate, held = a_put_at_1_held(scripted, 1)
    gate.release()
    time.sleep(DELAY_MS / 1000)  # the reply is late: past half the delay
    result = held.result()
    assert isinstance(result, arrowlog.AppendResult) and result.base_offset == 1
    assert values(arrowlog.connect(store, config=FAST)) == [0, 1]


def test_opening_from_an_older_checkpoint_past_removed_segments_fails_instead_of_forking(
    store: Store,
) -> None:
    """Records before 9 deleted and their segments removed (0..8: key 8 is
    free); the newest checkpoint [8, 10) corrupt. The one before, [6, 8),
    ends at 8, below the log start: its chain may go on through a freed key,
    so the writer raises and writes nothing."""
    log = ten_records(store)
    log.delete_records("t", 0, 9)
    wait_out_the_delay()
    log.maintenance.vacuum()
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


def test_opening_from_an_older_checkpoint_whose_chain_ends_at_the_log_start(
    store: Store,
) -> None:
    """Records before 8 deleted and their segments removed (0..7); the newest
    checkpoint [8, 10) corrupt. The one before, [6, 8), ends at the log start
    8: segment 7 is gone, but only segments wholly below the log start go, so
    the one at 8 is still there and its key was never freed. The writer opens
    from it and appends at 10 (before, it refused: the partition could not be
    written at all)."""
    log = ten_records(store)
    log.delete_records("t", 0, 8)
    wait_out_the_delay()
    log.maintenance.vacuum()
    newest = checkpoint_key("t", 0, 8)
    store.delete(newest)
    store.put_if_absent(newest, b"{not json")
    fresh = arrowlog.connect(store, config=FAST)
    with pytest.warns(RuntimeWarning, match="unusable checkpoint"):
        assert fresh.append("t", rows(100)).base_offset == 10
    assert segment_key("t", 0, 7) not in objects(store)
    with pytest.warns(RuntimeWarning, match="unusable checkpoint"):
        assert values(arrowlog.connect(store, config=FAST)) == [8, 9, 100]


# --- schedules from the adversarial review of this change ------------------------------


def test_a_sync_that_races_vacuum_never_leaves_a_writer_below_the_log_start(
    store: Store, scripted: ScriptedStore
) -> None:
    """A knows the log ends at 1 and, idle past half the delay, lists before it
    writes: the LIST shows segments 0..9 and the log start 8, but before A reads
    segment 1's header, vacuum removes 0..7. A's chain stops at 1, below the
    log start it just listed: it opens again from the newest checkpoint and
    writes at 10, never at the freed key 1."""
    a, b = a_knows_the_log_ends_at_1(store, scripted)
    gate = scripted.hold("get_range", segment_key("t", 0, 1))
    held = Background(lambda: a.append("t", rows(100)))
    gate.wait_reached()
    assert segment_key("t", 0, 1) in {r.key for r in b.maintenance.vacuum()}
    gate.release()
    result = held.result()
    assert isinstance(result, arrowlog.AppendResult) and result.base_offset == 10
    assert values(arrowlog.connect(store, config=FAST)) == [8, 9, 100]


def test_a_stale_expected_offset_is_refused_with_the_real_end(
    store: Store, scripted: ScriptedStore
) -> None:
    """The same race for a KIP-27 loader resuming at its own (stale) end."""
    a, b = a_knows_the_log_ends_at_1(store, scripted)
    gate = scripted.hold("get_range", segment_key("t", 0, 1))
    held = Background(lambda: a.append("t", rows(100), expected_offset=1))
    gate.wait_reached()
    b.maintenance.vacuum()
    gate.release()
    with pytest.raises(arrowlog.OffsetMismatchError) as e:
        held.result()
    assert e.value.log_end_offset == 10
    assert values(arrowlog.connect(store, config=FAST)) == [8, 9]


def test_opening_while_vacuum_removes_the_chain_being_opened_opens_again(
    store: Store, scripted: ScriptedStore
) -> None:
    """C reads the newest checkpoint (last segment 9), then lists the tail. In
    between, B appends 10 and 11 (a newer checkpoint) and vacuum removes 9: C's
    opening finds its chain gone below the log start and starts over."""
    b = ten_records(store)
    b.delete_records("t", 0, 10)
    wait_out_the_delay()
    c = arrowlog.connect(scripted, config=FAST)
    gate = scripted.hold("list", "t/0/segments/")
    held = Background(lambda: values(c))
    gate.wait_reached()
    b.append("t", rows(10))
    b.append("t", rows(11))
    assert segment_key("t", 0, 9) in {r.key for r in b.maintenance.vacuum()}
    gate.release()
    assert held.result() == [10, 11]


def test_a_reader_that_planned_before_the_vacuum_is_told_the_records_were_deleted(
    store: Store,
) -> None:
    log = ten_records(store)
    reader = arrowlog.connect(store, config=FAST)
    assert values(reader) == list(range(10))
    log.delete_records("t", 0, 4)
    wait_out_the_delay()
    assert log.maintenance.vacuum()
    with pytest.raises(OffsetOutOfRangeError, match="were deleted"):
        reader.read("t", 0, start=0, end=4, isolation_level="read_uncommitted")
    # read_committed looks at the log start first
    with pytest.raises(OffsetOutOfRangeError, match="below the log start 4"):
        reader.read("t", 0, start=0, end=4)
    # from "the log start": the new one
    consumer = reader.consumer(isolation_level="read_uncommitted")
    assert consumer.read("t", 0, end=10).column("v").to_pylist() == [4, 5, 6, 7, 8, 9]


def test_an_open_transaction_whose_start_was_deleted_holds_nothing_below_the_log_start(
    store: Store,
) -> None:
    log = ten_records(store)
    t = log.producer(transactional_id="x")
    t.init_transactions()
    t.begin_transaction()
    t.send("t", rows(100), partition=0)  # offset 10, undecided
    log.append("t", rows(11))
    log.append("t", rows(12))
    assert log.delete_records("t", 0, 12) == 12
    fresh = arrowlog.connect(store, config=FAST)
    assert fresh.stable_offsets("t") == {0: 12} == fresh.start_offsets("t")
    c = fresh.consumer(isolation_level="read_committed")
    assert c.read("t", 0).num_rows == 0
    snapshot = c.read_snapshot({("t", 0): (None, None)})
    assert snapshot.tables[("t", 0)].num_rows == 0
    t.commit_transaction()
    assert c.read("t", 0).column("v").to_pylist() == [12]


def test_a_corrupt_checkpoint_of_the_window_holding_the_log_start_is_rebuilt_from_what_is_left(
    store: Store,
) -> None:
    log = arrowlog.connect(store, config=FAST)
    log.create_topic(
        "t", SCHEMA, config=TopicConfig(checkpoint_interval=4, delete_delay_ms=DELAY_MS)
    )
    for v in range(12):  # windows [0,4) [4,8) [8,12)
        log.append("t", rows(v))
    log.delete_records("t", 0, 6)
    wait_out_the_delay()
    assert len(log.maintenance.vacuum()) == 6  # segments 0..5; 6 and 7 (in window [4,8)) stay
    key = checkpoint_key("t", 0, 4)
    store.delete(key)
    store.put_if_absent(key, b"{not json")
    fresh = arrowlog.connect(store, config=FAST)
    with pytest.warns(RuntimeWarning, match="unusable checkpoint"):
        assert values(fresh, start=6) == list(range(6, 12))


def test_vacuum_of_every_topic_passes_over_one_deleted_meanwhile(
    store: Store, scripted: ScriptedStore
) -> None:
    admin = arrowlog.connect(store, config=FAST)
    for name in ("t", "u"):
        admin.create_topic(name, SCHEMA, config=CONFIG)
        for v in range(6):
            admin.append(name, rows(v))
    admin.delete_records("t", 0, 4)
    wait_out_the_delay()
    other = arrowlog.connect(scripted, config=FAST)
    other.list_topics()
    gate = scripted.hold("list", "t/0/segments/", nth=2)  # the listing of t that vacuum plans from
    held = Background(other.maintenance.vacuum)
    gate.wait_reached()
    admin.delete_topic("u")
    gate.release()
    removed = held.result()
    assert isinstance(removed, list) and len(removed) == 4


#: vacuum's arguments that are refused: each must raise before anything is removed
BAD_VACUUM_CALLS: list[dict[str, object]] = [
    {"topics": "t"},
    {"topics": 5},
    {"topics": ["../x"]},
    {"dry_run": None},
    {"dry_run": 0},
    {"dry_run": "yes"},
]


def test_bad_vacuum_arguments_are_refused_and_remove_nothing(store: Store) -> None:
    """Each refused call past the delay, when a good one would remove segments
    (one wait for them all: the refusal comes before any request)."""
    log = ten_records(store)
    log.delete_records("t", 0, 6)
    wait_out_the_delay()
    before = objects(store, "")
    for call in BAD_VACUUM_CALLS:
        with pytest.raises(arrowlog.ArrowLogError):
            log.maintenance.vacuum(**call)  # type: ignore[arg-type]
        assert objects(store, "") == before, call
    assert log.maintenance.vacuum(dry_run=True)  # a good call would have removed some


# --- retention by time and by size ------------------------------------------------------


def test_retention_by_time_moves_the_log_start_past_old_segments(store: Store) -> None:
    """retention_ms counts on the store's clock (each segment's modification
    time): the segments older than it go, never the newest; the next vacuum
    past the delay removes them."""
    log = arrowlog.connect(store, config=FAST)
    log.create_topic("t", SCHEMA, config=CONFIG)
    for v in range(4):
        log.append("t", rows(v))
    assert log.maintenance.vacuum() == []  # no retention set: nothing moves
    log.alter_topic_config("t", retention_ms=500)
    assert log.maintenance.vacuum() == []  # 0..3 are younger than 500 ms (and the clock's grain)
    time.sleep(2.6)
    for v in range(4, 6):
        log.append("t", rows(v))
    planned = log.maintenance.vacuum(dry_run=True)
    assert [r.reason for r in planned] == ["retention (retention_ms=500): the log start moves to 4"]
    assert log.start_offsets("t") == {0: 0}  # a dry run moves nothing
    moved = log.maintenance.vacuum()
    assert any("the log start moves to 4" in r.reason for r in moved)
    assert arrowlog.connect(store, config=FAST).start_offsets("t") == {0: 4}
    assert values(log) == [4, 5]
    wait_out_the_delay()
    removed = {r.key for r in log.maintenance.vacuum()}
    assert {segment_key("t", 0, b) for b in range(3)} <= removed


def test_retention_never_deletes_the_newest_segment(store: Store) -> None:
    log = arrowlog.connect(store, config=FAST)
    log.create_topic("t", SCHEMA, config=TopicConfig(delete_delay_ms=DELAY_MS, retention_ms=1))
    for v in range(3):
        log.append("t", rows(v))
    time.sleep(2.2)  # the store's clock: to the second on S3, and a second of grain
    log.maintenance.vacuum()
    assert log.start_offsets("t") == {0: 2} and values(log) == [2]


def test_retention_by_size_keeps_the_newest_bytes(store: Store) -> None:
    log = arrowlog.connect(store, config=FAST)
    log.create_topic("t", SCHEMA, config=CONFIG)
    for v in range(6):
        log.append("t", rows(v))
    size = log.partition("t", 0).segments()[0].size
    log.alter_topic_config("t", retention_bytes=3 * size)
    moved = log.maintenance.vacuum()
    assert [r.reason for r in moved] == [
        f"retention (retention_bytes={3 * size}): the log start moves to 3"
    ]
    assert values(arrowlog.connect(store, config=FAST)) == [3, 4, 5]


@pytest.mark.parametrize(
    "changes",
    [
        {},
        {"delete_delay_ms": 1000},
        {"compression": "none"},
        {"retention_ms": 0},
        {"retention_ms": "5"},
        {"retention_bytes": -1},
        {"retention_bytes": True},
    ],
)
def test_only_retention_can_be_altered_and_bad_values_write_nothing(
    store: Store, changes: dict[str, object]
) -> None:
    log = ten_records(store)
    before = objects(store, "")
    with pytest.raises(arrowlog.InvalidConfigError):
        log.alter_topic_config("t", **changes)  # type: ignore[arg-type]
    assert objects(store, "") == before
    assert arrowlog.connect(store).topic("t").config == CONFIG


def test_an_altered_retention_is_seen_by_every_client(store: Store) -> None:
    log = ten_records(store)
    other = arrowlog.connect(store, config=FAST)
    assert other.topic("t").config.retention_bytes is None
    log.alter_topic_config("t", retention_bytes=10**9, retention_ms=3_600_000)
    fresh = other.topic("t", refresh=True).config
    assert (fresh.retention_bytes, fresh.retention_ms) == (10**9, 3_600_000)
    log.alter_topic_config("t", retention_ms=None)  # back to forever
    assert arrowlog.connect(store).topic("t").config.retention_ms is None
    assert values(other) == list(range(10))  # the records are untouched


def test_clients_holding_the_removed_windows_refuse_a_read_below_the_new_log_start(
    store: Store,
) -> None:
    """The writer holds the checkpoints it wrote, a reader those it read: a
    walk from a window a client holds lists no window. After another client
    deleted records and vacuum removed their windows and segments, a read
    from below the new log start is refused, and one from it returns what
    is left."""
    writer = arrowlog.connect(store, config=FAST)
    writer.create_topic("t", SCHEMA, config=CONFIG)
    for v in range(30):
        writer.append("t", rows(v))
    reader = arrowlog.connect(store, config=FAST)
    assert values(reader) == list(range(30))
    parts = [writer.partition("t", 0), reader.partition("t", 0)]
    other = arrowlog.connect(store, config=FAST)
    other.delete_records("t", 0, 20)
    wait_out_the_delay()
    assert other.maintenance.vacuum()
    for part in parts:
        for start, end in ((0, 10), (10, 25)):
            with pytest.raises(OffsetOutOfRangeError):
                part.read(start, end)
        assert part.read(20, 25).column("v").to_pylist() == list(range(20, 25))
    for log in (writer, reader):
        with pytest.raises(OffsetOutOfRangeError):
            log.read("t", 0, start=10)
        assert values(log) == list(range(20, 30))


def test_the_writer_vacuums_by_the_newest_checkpoint_the_store_holds_not_the_one_it_wrote(
    store: Store,
) -> None:
    """The writer keeps each checkpoint it writes. The newest, [8, 10), is
    then found corrupt in the store, and the writer deletes the records
    before 9 and vacuums: every other client opens from [6, 8), the newest
    that reads back, so the chain from 8 must stay (as it does when any
    other client vacuums). The writer's own copy of [8, 10) is no evidence
    that the store's reads back: else vacuum removes 7 and 8, and no
    client can open the partition."""
    log = ten_records(store)
    newest = checkpoint_key("t", 0, 8)
    store.delete(newest)
    store.put_if_absent(newest, b"{not json")
    log.delete_records("t", 0, 9)
    wait_out_the_delay()
    with pytest.warns(RuntimeWarning, match="unusable checkpoint"):
        log.maintenance.vacuum()
    assert segment_key("t", 0, 8) in objects(store)
    with pytest.warns(RuntimeWarning, match="unusable checkpoint"):
        assert values(arrowlog.connect(store, config=FAST)) == [9]
