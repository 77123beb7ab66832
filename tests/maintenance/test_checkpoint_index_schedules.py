"""Adversarial schedules against the compacted objects' index (docs/protocol.md,
"A corrupt checkpoint after compaction", "Compacting small segments",
"Deleting records": "A checkpoint only saves work").

The promises attacked: a checkpoint found corrupt after compaction and vacuum
removed its segments is rebuilt from the index of a compacted object (reads
return exactly the rows they did, read_committed decides the same); opening
goes on past corrupt checkpoints through the indexes, with the producer state
the lost checkpoints held; vacuum never removes the only readable copy (it
reads an object back before removing its segments); where records are truly
gone, a typed error, never wrong rows, never an offset claimed twice.

Time is never waited for (:class:`ClockStore`, :class:`Clocks`); orderings
are ScriptedStore gates. The log helpers come from the compaction attack
(tests/maintenance/test_compaction_schedules.py): values are offsets unless a test
says otherwise, windows of 4 segments, a delay of 15 minutes.

Written by an independent attack (it did not build what it attacks). Its
findings were strict xfails until fixed; each docstring gives the schedule,
the guarantee and what was observed before the fix.

Origin: an attack on compacted indexes (was tests/attack/test_checkpoint_index_schedules.py).
"""

from __future__ import annotations

import contextlib
import dataclasses
import itertools
import warnings
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pyarrow as pa
import pytest

import arrowlog
from arrowlog import Compression
from arrowlog.errors import AppendOutcomeUnknownError, CorruptSegmentError, SegmentNotFoundError
from arrowlog.format.compacted_index import CompactedIndex, index_metadata
from arrowlog.format.segment import WriterIdentity, encode, head_length
from arrowlog.format.topic import checkpoint_key, checkpoint_prefix, compacted_prefix, segment_key
from arrowlog.maintenance.compaction import MIN_TARGET_BYTES
from arrowlog.storage import Store
from arrowlog.testing.scripted import ScriptedStore
from tests.support.clocks import Clocks, ClockStore
from tests.support.compaction import (
    CONFIG,
    DELAY,
    MIN,
    SCHEMA,
    connect,
    flip_bit,
    forge_compacted,
    honest_compacted,
    keys,
    mixed_log,
    replace_object,
    rows,
    scanned,
    segs,
    vals,
)
from tests.support.schedules import FOREVER, Background
from tests.support.stores import StoreSpec, spec_for

DAY = 24 * 60 * MIN

#: the stores a test runs on unless it says otherwise: the schedules are
#: about protocol logic; the few that matter on a real S3 server say so
MEMORY_AND_LOCAL = [pytest.param("memory", id="memory"), pytest.param("local", id="local")]
EVERY_STORE = [*MEMORY_AND_LOCAL, pytest.param("s3", id="s3", marks=pytest.mark.s3)]


@pytest.fixture(params=MEMORY_AND_LOCAL)
def store_spec(request: pytest.FixtureRequest, tmp_path: Path) -> StoreSpec:
    return spec_for(request.param, tmp_path, request)


@pytest.fixture
def clock(store: Store) -> ClockStore:
    return ClockStore(store)


@pytest.fixture
def clocks(clock: ClockStore, monkeypatch: pytest.MonkeyPatch) -> Clocks:
    return Clocks(clock, monkeypatch)


def base_of(key: str) -> int:
    return int(key.rsplit("/", 1)[1][:20])


def window_starts(store: Store, partition: int = 0) -> list[int]:
    """The starts of the partition's checkpoint windows, in offset order."""
    inverted = [base_of(k) for k in keys(store, checkpoint_prefix("t", partition))]
    return sorted(10**20 - 1 - k for k in inverted)


def skipping() -> Any:
    """Expect the warnings of checkpoints (or indexes) passed over."""
    return pytest.warns(RuntimeWarning, match="unusable")


@contextlib.contextmanager
def passing_over() -> Iterator[None]:
    """Allow (not expect) the warnings of checkpoints or objects passed over:
    a read that fails may fail before it meets the corrupt checkpoint."""
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        yield
    others = [str(w.message) for w in caught if "unusable" not in str(w.message)]
    assert not others, others


def compacted_and_vacuumed(clock: ClockStore, clocks: Clocks, count: int = 22) -> arrowlog.ArrowLog:
    """``count`` plain records (values = offsets), windows of 4; [0, 16)
    compacted into one object; 15 min pass; vacuum removes segments 0..15."""
    log = connect(clock)
    log.create_topic("t", SCHEMA, config=CONFIG)
    for v in range(count):
        log.append("t", rows(v))
    (done,) = log.maintenance.compact(target_bytes=MIN_TARGET_BYTES)
    assert (done.start, done.end) == (0, 16)
    clocks.advance(DELAY + MIN)
    connect(clock).maintenance.vacuum()
    assert min(base_of(k) for k in segs(clock)) == 16
    return log


def forge_index(
    clock: ClockStore, log: arrowlog.ArrowLog, key: str | None, lie: Callable[[Any], Any],
    windows: tuple[tuple[int, int], ...] | None = None,
) -> None:  # fmt: skip
    """Replace the compacted object at ``key`` by one with the same records
    and table (every checksum valid) whose index holds ``lie(summary)`` for
    each segment, and ``windows`` if given: an index a buggy or foreign
    writer put there."""
    header, batch, table = honest_compacted(log, key)
    summaries = log.partition("t", 0).summaries(table.start, table.end)
    segments = tuple(lie(dataclasses.replace(s, stats=None)) for s in summaries)
    if windows is None:
        windows = tuple((w, w + 4) for w in range(table.start, table.end, 4))
    index = CompactedIndex(start=table.start, end=table.end, windows=windows, segments=segments)
    forged = encode(
        batch.replace_schema_metadata(index_metadata(index)),
        dataclasses.replace(header, append_id="forged"),
        log.topic("t").config.compression,
        stats=True,
    )[0]
    replace_object(clock, key, bytes(forged))


# --- indexes that lie with valid checksums ----------------------------------------------


def test_an_index_that_makes_a_held_run_transactional_is_not_believed_over_the_object(
    clock: ClockStore, clocks: Clocks
) -> None:
    """Schedule: 20 plain records; [0, 16) compacted; 15 min; vacuum removes
    segments 0..15. The object is then replaced by one with the same records
    and table (every checksum valid) whose index says the segment at 5 was
    written by a transactional producer (id 12345, transactional id
    "ghost") that no coordinator knows; the index still agrees with the
    table as ``check_runs`` checks it (a transactional segment may have a
    run: committed). The checkpoint of [4, 8) is then found corrupt.

    Guarantee (protocol.md: compacted objects hold "what a read_committed
    reader sees" of their range, so a run the table holds is committed; "A
    read_uncommitted reader of a compacted range sees what a read_committed
    one does"; "If the records are truly gone, reads raise, never return
    other rows"): the index is not believed over the object: read_committed
    returns 0..19 as before, or raises CorruptSegmentError naming the
    object; never a log without record 5 while read_uncommitted has it.

    Observed: read_committed (consumer and scan) returns 0..4, 6..19: the
    rebuilt window says 5 is an undecided or aborted transaction's, and the
    record the object holds is silently dropped; read_uncommitted returns
    0..19; the LSO stays 20 (nothing hangs that would tell)."""
    log = compacted_and_vacuumed(clock, clocks, count=20)
    (obj,) = keys(clock, compacted_prefix("t", 0))

    def ghost(s: Any) -> Any:
        if s.base != 5:
            return s
        return dataclasses.replace(
            s, producer_id=12345, producer_epoch=0, transactional=True, transactional_id="ghost"
        )

    forge_index(clock, log, obj, ghost)
    flip_bit(clock, checkpoint_key("t", 0, 4))
    fresh = connect(clock)
    uncommitted = fresh.consumer(isolation_level="read_uncommitted")
    outcomes: dict[str, object] = {}
    reads: dict[str, Callable[[], object]] = {
        "consumer": lambda: vals(fresh.consumer().read("t", 0)),
        "scan": lambda: vals(scanned(fresh)),
        "uncommitted": lambda: vals(uncommitted.read("t", 0)),
    }
    for name, read in reads.items():
        try:
            with skipping():
                outcomes[name] = read()
        except CorruptSegmentError as e:
            assert obj in str(e)
            outcomes[name] = "raised"
    assert all(got in ("raised", list(range(20))) for got in outcomes.values()), outcomes


def test_an_index_whose_windows_are_not_the_checkpoints_still_gives_the_right_rows(
    clock: ClockStore, clocks: Clocks
) -> None:
    """Schedule: 20 plain records; [0, 16) compacted; vacuum removes 0..15;
    the object is replaced by one whose index (valid checksum, agreeing with
    the table) puts windows at (0, 4), (4, 9), (9, 16) where the checkpoints
    have (0, 4), (4, 8), (8, 12), (12, 16); the checkpoint of [4, 8) is
    found corrupt. Guarantee: every read returns 0..19 in offset order (the
    windows only say where the next checkpoint is looked for; a window that
    has none, 9, is rebuilt from the same index), or raises a typed error;
    a writer appends at 20."""
    log = compacted_and_vacuumed(clock, clocks, count=20)
    (obj,) = keys(clock, compacted_prefix("t", 0))
    forge_index(clock, log, obj, lambda s: s, windows=((0, 4), (4, 9), (9, 16)))
    flip_bit(clock, checkpoint_key("t", 0, 4))
    fresh = connect(clock)
    with skipping():
        assert vals(fresh.consumer().read("t", 0)) == list(range(20))
        assert vals(fresh.partition("t", 0).read(3, 11)) == list(range(3, 11))
        assert vals(scanned(connect(clock))) == list(range(20))
    assert fresh.append("t", rows(20)).base_offset == 20


# --- overlapping objects, and objects found corrupt after vacuum ----------------------


#: records in each segment of the overlapping-objects schedule (about 350 KiB
#: uncompressed: a window of 4 segments is over 1 MiB)
ROWS = 6000


def big(v: int, n: int = ROWS) -> pa.RecordBatch:
    return pa.record_batch(
        {"v": [v] * n, "s": [f"{v}-{i}-" + "x" * 40 for i in range(n)]}, schema=SCHEMA
    )


def test_an_overlapping_object_found_corrupt_after_vacuum_never_gives_wrong_rows(
    clock: ClockStore, clocks: Clocks
) -> None:
    """Schedule: 24 segments of 6,000 records, about 350 KiB each (values =
    segment numbers), windows of 4 segments. Compactor BIG (4 MiB target)
    plans from mark 0 and is held at its first PUT; compactor SMALL (1 MiB)
    compacts one object per window (segments 0-3, 4-7, ..., 16-19) and
    writes its mark; BIG goes on and writes segments 0-11 as one object (its
    second range, 12-19, ends where SMALL's marks do: put-if-absent keeps
    SMALL's key or BIG's, whichever came first). 15 min pass; vacuum reads
    back the objects a reader would use and removes segments 0..19. Then a
    bit flips in the records of SMALL's object of segments 4-7, which BIG's
    also holds, and the checkpoint of that window is found corrupt.

    Guarantee: a read of the partition never returns other rows: it returns
    every record, or raises CorruptSegmentError naming the rotten object
    (readers take, at each offset, the first listed object that holds it);
    a writer appends at the end; a further vacuum removes no object."""
    log = connect(clock)
    cfg = dataclasses.replace(CONFIG, compression=Compression.NONE)
    log.create_topic("t", SCHEMA, config=cfg)
    for v in range(24):
        log.append("t", big(v))
    want = [v for v in range(24) for _ in range(ROWS)]
    scripted = ScriptedStore(clock)
    gate = scripted.hold("put_if_absent", lambda k: k.startswith(compacted_prefix("t", 0)))
    big_compactor = Background(
        lambda: connect(scripted).maintenance.compact(target_bytes=4 * MIN_TARGET_BYTES)
    )
    gate.wait_reached()
    small = connect(clock).maintenance.compact(target_bytes=MIN_TARGET_BYTES)
    window = 4 * ROWS
    assert [(c.start, c.end) for c in small] == [
        (w, w + window) for w in range(0, 20 * ROWS, window)
    ]
    gate.release()
    done = big_compactor.result()
    assert [(c.start, c.end) for c in done] == [(0, 12 * ROWS), (12 * ROWS, 20 * ROWS)]  # type: ignore[attr-defined]
    objects = keys(clock, compacted_prefix("t", 0))
    assert len(objects) == 7
    clocks.advance(DELAY + MIN)
    connect(clock).maintenance.vacuum()
    assert min(base_of(k) for k in segs(clock)) == 20 * ROWS
    rotten = next(k for k in objects if k.endswith(f"{2 * window:020d}-{window:020d}.arrow"))
    data = bytes(clock.get(rotten))
    footer = len(data) - 10 - int.from_bytes(data[-10:-6], "little")
    flip_bit(clock, rotten, (head_length(data, rotten) + footer) // 2)
    flip_bit(clock, checkpoint_key("t", 0, window))
    fresh = connect(clock)
    outcomes = []
    reads: list[Callable[[], list[Any]]] = [
        lambda: vals(fresh.consumer().read("t", 0)),
        lambda: vals(fresh.partition("t", 0).read(0, 24 * ROWS)),
        lambda: vals(scanned(connect(clock))),
    ]
    for read in reads:
        try:
            with passing_over():
                assert read() == want
            outcomes.append("rows")
        except CorruptSegmentError as e:
            assert rotten in str(e)
            outcomes.append("raised")
    # each read returned every record or named the rotten object (today all
    # raise: BIG's object, which holds the same records, is not read instead)
    assert len(outcomes) == 3
    assert fresh.append("t", big(24, 1)).base_offset == 24 * ROWS
    assert keys(clock, compacted_prefix("t", 0)) == objects
    connect(clock).maintenance.vacuum()
    assert keys(clock, compacted_prefix("t", 0)) == objects


def test_vacuum_held_after_reading_an_object_back_while_it_rots(
    clock: ClockStore, clocks: Clocks
) -> None:
    """Schedule: 22 records; [0, 16) compacted; 15 min pass. Vacuum reads the
    object back (whole, with its index) and is held at its first segment
    removal; meanwhile a bit of the object's records flips; vacuum goes on
    and removes segments 0..15. Then the checkpoint of [4, 8) is found
    corrupt. The records of [0, 16) are truly gone now (their segments
    removed, their only copy rotten). Guarantee: every read that touches
    them raises a typed error naming the object or the window, never rows;
    [16, 22) reads; writers append at 22, never below; a later vacuum
    removes nothing of [0, 16) (no segment there is left, the object stays)."""
    log = connect(clock)
    log.create_topic("t", SCHEMA, config=CONFIG)
    for v in range(22):
        log.append("t", rows(v))
    (done,) = log.maintenance.compact(target_bytes=MIN_TARGET_BYTES)
    assert done.key is not None
    clocks.advance(DELAY + MIN)
    scripted = ScriptedStore(clock)
    gate = scripted.hold("delete", segment_key("t", 0, 0))
    vacuuming = Background(lambda: connect(scripted).maintenance.vacuum())
    gate.wait_reached()
    assert ("get", done.key) in scripted.history  # read back before removing
    data = bytes(clock.get(done.key))
    footer = len(data) - 10 - int.from_bytes(data[-10:-6], "little")
    flip_bit(clock, done.key, (head_length(data, done.key) + footer) // 2)
    gate.release()
    vacuuming.result()
    assert min(base_of(k) for k in segs(clock)) == 16
    flip_bit(clock, checkpoint_key("t", 0, 4))
    fresh = connect(clock)
    reads: list[Callable[[], pa.Table]] = [
        lambda: fresh.consumer().read("t", 0),
        lambda: fresh.partition("t", 0).read(5, 6),
        lambda: fresh.partition("t", 0).read(0, 2),
        lambda: scanned(fresh),
    ]
    for read in reads:
        with pytest.raises((CorruptSegmentError, SegmentNotFoundError)) as e, passing_over():
            read()
        assert done.key in str(e.value) or "window at 4" in str(e.value)
    assert vals(fresh.partition("t", 0).read(16, 22)) == list(range(16, 22))
    assert fresh.append("t", rows(22)).base_offset == 22
    assert connect(clock).append("t", rows(23)).base_offset == 23
    assert not [r for r in connect(clock).maintenance.vacuum() if "/compacted/" in r.key]


def test_vacuum_keeps_the_segments_of_a_corrupt_window_an_object_without_index_holds(
    clock: ClockStore, clocks: Clocks
) -> None:
    """Schedule: 22 records; [0, 16) compacted; the object is as a client
    older than the index wrote it (its records and compaction table, no
    index: protocol.md, "Objects written before the index still read as they
    did"). The checkpoint of [4, 8) is found corrupt: reads still return
    0..21 (the window is rebuilt from its segments). 15 min pass; vacuum.

    Guarantee (protocol.md, "Vacuum never removes the only readable copy";
    ``keep_unreadable_copies``: segments stay while they are "the only
    readable copy of their records and of what their windows hold (a corrupt
    checkpoint of a window is rebuilt from them)"): the segments of [4, 8)
    stay (or at least every read returns 0..21 after the vacuum as before).

    Observed: vacuum reads the object back (it has no index: nothing more to
    check) and removes segments 0..15; it never looks at the checkpoints of
    the windows it strips. Every read across [4, 8) now raises
    SegmentNotFoundError ("no compacted object holding it has a readable
    index"): records that were readable, and whose only copy of their window
    vacuum held in its hands, became unreadable by vacuum."""
    log = connect(clock)
    log.create_topic("t", SCHEMA, config=CONFIG)
    for v in range(22):
        log.append("t", rows(v))
    (done,) = log.maintenance.compact(target_bytes=MIN_TARGET_BYTES)
    _, batch, table = honest_compacted(log, done.key)
    replace_object(
        clock, done.key, forge_compacted(log, table.start, table.end, batch, list(table.runs))
    )
    flip_bit(clock, checkpoint_key("t", 0, 4))
    with skipping():
        assert vals(connect(clock).consumer().read("t", 0)) == list(range(22))
    clocks.advance(DELAY + MIN)
    with pytest.warns(RuntimeWarning, match="window at 4 unreadable"):
        connect(clock).maintenance.vacuum()
    with passing_over():
        assert vals(connect(clock).consumer().read("t", 0)) == list(range(22))


def test_a_put_held_until_its_key_was_freed_is_decided_through_the_index(
    clock: ClockStore, clocks: Clocks
) -> None:
    """Schedule: writer W appends 0; its next PUT (key 1) is held. B appends
    1..21; [0, 16) compacted; 15 min; vacuum removes 0..15 (key 1 is free).
    The checkpoint of [0, 4) is found corrupt. W's PUT lands at key 1 (a
    stray: the log's segment there was B's) and W gets its reply, late.

    Guarantee (protocol.md rule 3: "the checkpoint indexing that offset
    names the segment that was the log's there ... if it is not ours, our
    PUT took a freed key: not acknowledged: the writer reopens ... and
    writes at the real end"; "A checkpoint only saves work, also once
    compaction's vacuum removed the segments it summarised: ... what it held
    is taken from elsewhere", the object's index): W's record lands at 22
    and is acknowledged there, as it is with the checkpoint intact
    (tests/maintenance/test_compaction.py,
    test_a_put_held_until_compaction_freed_its_key_is_not_acknowledged_there).

    Observed: ``Appends._in_log`` loads the checkpoint with
    ``_load_checkpoint`` (no fallback), which raises, and W's append raises
    AppendOutcomeUnknownError "cannot tell whether this append is in the
    log": a plain append's caller is told its record may have landed when
    the index says it did not (it is in no one's log)."""
    scripted = ScriptedStore(clock)
    w = connect(scripted)
    w.create_topic("t", SCHEMA, config=CONFIG)
    w.append("t", rows(0))
    gate = scripted.hold("put_if_absent", segment_key("t", 0, 1))
    held = Background(lambda: w.append("t", rows(100)))
    gate.wait_reached()
    b = connect(clock)
    for v in range(1, 22):
        b.append("t", rows(v))
    connect(clock).maintenance.compact(target_bytes=MIN_TARGET_BYTES)
    clocks.advance(DELAY + MIN)
    connect(clock).maintenance.vacuum()
    assert segment_key("t", 0, 1) not in segs(clock)
    flip_bit(clock, checkpoint_key("t", 0, 0))
    gate.release()
    with passing_over():
        result = held.result()
    assert isinstance(result, arrowlog.AppendResult) and result.base_offset == 22
    with passing_over():
        assert vals(connect(clock).consumer().read("t", 0)) == [*range(22), 100]


# --- what a compactor compacts ------------------------------------------------------------


def test_a_long_lived_client_compacts_as_far_as_a_fresh_one(clock: ClockStore) -> None:
    """Schedule: writer W appends 0..21 (windows of 4); compactor C (one
    client, kept, as a maintenance thread would) compacts: [0, 16). W
    appends 22..41 (checkpoints up to [36, 40)). C compacts again; then C
    once more.

    Guarantee (protocol.md, "What is compacted": whole checkpoint windows
    from the compaction mark up to the newest checkpoint's window, which
    stays; compact() is idempotent and "a rerun writes what is missing"):
    C's second run compacts [16, 36), as a fresh client's does.

    Found by an attack (a strict xfail until fixed): C's second run
    compacted only [16, 20) and its third nothing:
    ``plan_compaction`` took the horizon from the newest checkpoint in the
    store (36) but walked windows with ``_checkpoints_from``, which stops at
    the partition object's own ``_window_start``; an object that only lists
    (never appends) kept the one it opened with (20). A fresh client
    compacts [20, 36) at once. (The same stale window start kept every
    segment C listed since it opened in C's memory, and ``state()`` advanced
    through all of them: see tests/partition/test_partition_log.py.)"""
    w = connect(clock)
    w.create_topic("t", SCHEMA, config=CONFIG)
    for v in range(22):
        w.append("t", rows(v))
    c = connect(clock)
    assert [(x.start, x.end) for x in c.maintenance.compact(target_bytes=MIN_TARGET_BYTES)] == [
        (0, 16)
    ]
    for v in range(22, 42):
        w.append("t", rows(v))
    second = [(x.start, x.end) for x in c.maintenance.compact(target_bytes=MIN_TARGET_BYTES)]
    third = [(x.start, x.end) for x in c.maintenance.compact(target_bytes=MIN_TARGET_BYTES)]
    assert (second, third) == ([(16, 36)], []), (second, third)


# --- opening through the indexes --------------------------------------------------------


def state_of(log: arrowlog.ArrowLog) -> tuple[int, Any, Any, dict[int, int]]:
    end, state = log.partition("t", 0).state()
    return end, state.producers, state.open_txns, log.stable_offsets("t")


def test_every_checkpoint_corrupt_after_compaction_opens_with_the_lost_partition_state(
    clock: ClockStore, clocks: Clocks
) -> None:
    """Schedule: a mixed log (plain, an idempotent producer's six batches,
    committed and aborted transactions with their markers, plain); its end,
    producer state, open transactions and LSO recorded; compact; 15 min;
    vacuum; then every checkpoint is found corrupt. Guarantee (protocol.md:
    "The partition state ... is advanced through the same summaries, so it
    is what the lost checkpoints held"): a fresh client opens from offset 0
    through the compacted objects' indexes to the same end, producer state,
    open transactions and LSO; the idempotent producer's retry of its last
    batch is recognised at its offset and writes nothing; its next batch
    lands at the end."""
    log = mixed_log(clock)
    before = state_of(connect(clock))
    log.maintenance.compact(target_bytes=MIN_TARGET_BYTES)
    clocks.advance(DELAY + MIN)
    connect(clock).maintenance.vacuum()
    assert len(segs(clock)) < 20
    for start in window_starts(clock):
        flip_bit(clock, checkpoint_key("t", 0, start))
    fresh = connect(clock)
    with skipping():
        after = state_of(fresh)
    assert after == before
    end, producers = before[0], before[1]
    (idem,) = [e for e in producers.values() if e.base_sequence == 5]
    last = WriterIdentity(producer_id=idem.producer_id, producer_epoch=0, base_sequence=5)
    written = set(segs(clock))
    again = fresh.partition("t", 0).append(rows(11), identity=last)
    assert again.base_offset == idem.base_offset and set(segs(clock)) == written
    following = dataclasses.replace(last, base_sequence=6)
    assert fresh.partition("t", 0).append(rows(12), identity=following).base_offset == end


def test_an_in_doubt_resend_through_the_indexes_with_a_writer_8_days_ahead(
    clock: ClockStore, clocks: Clocks
) -> None:
    """Schedule: plain 0..2; an idempotent producer P's batch (value 100) is
    put at 3, but every reply is lost and the write lands only after P gave
    up (AppendOutcomeUnknownError). Q, whose clock runs 8 days ahead, writes
    4..21 and their checkpoints. [0, 16) compacted; 15 min; vacuum removes
    0..15; records before 9 deleted; the checkpoints of [12, 16) and
    [16, 20) are found corrupt. P flushes (resends its batch).

    Guarantee (invariant 3; protocol.md, "Producer state expires": on the
    store's clock, never a writer's; "A corrupt checkpoint after
    compaction": the state through the indexes is what the checkpoints
    held): P reopens (its chain ends below the log start) from [8, 12),
    through the index to 16; the state still holds P (Q's clock forgot
    nothing); the resend is recognised at 3 and writes nothing; P's next
    batch lands at 22; 100 is read once."""
    log = connect(clock)
    log.create_topic("t", SCHEMA, config=CONFIG)
    for v in range(3):
        log.append("t", rows(v))
    scripted = ScriptedStore(clock)
    late = scripted.late_put(segment_key("t", 0, 3), times=FOREVER)
    p = connect(scripted).producer()
    with pytest.raises(AppendOutcomeUnknownError):
        p.send("t", rows(100), partition=0)
    assert late.land()
    clocks.skew = 8 * DAY / 1000
    q = connect(clock)
    for v in range(4, 22):
        q.append("t", rows(v))
    clocks.skew = 0
    assert vals(connect(clock).consumer().read("t", 0)) == [0, 1, 2, 100, *range(4, 22)]
    connect(clock).maintenance.compact(target_bytes=MIN_TARGET_BYTES)
    clocks.advance(DELAY + MIN)
    connect(clock).maintenance.vacuum()
    assert min(base_of(k) for k in segs(clock)) == 16
    log.delete_records("t", 0, 9)
    for start in (12, 16):
        flip_bit(clock, checkpoint_key("t", 0, start))
    written = set(segs(clock))
    with skipping():
        p.flush()
    assert set(segs(clock)) == written
    with skipping():
        assert p.send("t", rows(101), partition=0).base_offset == 22
        assert vals(connect(clock).consumer().read("t", 0)) == [*range(9, 22), 101]


def test_an_opening_held_at_its_index_read_while_compaction_and_vacuum_move_the_mark(
    clock: ClockStore, clocks: Clocks
) -> None:
    """Schedule: 22 records; [0, 16) compacted; 15 min; vacuum removes 0..15;
    the checkpoints of [12, 16) and [16, 20) are found corrupt. Writer W
    starts to append: it opens from [8, 12), sees the mark 16 past its
    chain's end, and is held at its read of the compacted object's index.
    Meanwhile B appends 22..29 (through the index too; it writes the
    checkpoints of [20, 24) and [24, 28)); a compaction compacts [16, 24)
    (mark 24); 15 min; vacuum removes 16..23 (keys 16..23 free). W goes on.

    Guarantee: W bridges to 16, finds its chain ending below the new mark,
    bridges on through the new object's index to 24, lists on, and appends
    at 30: never at a freed key, never an offset claimed twice; every
    reader sees 0..29 and W's record."""
    compacted_and_vacuumed(clock, clocks)
    for start in (12, 16):
        flip_bit(clock, checkpoint_key("t", 0, start))
    scripted = ScriptedStore(clock)
    (obj,) = keys(clock, compacted_prefix("t", 0))
    gate = scripted.hold("get_range", obj)
    w = connect(scripted)
    with skipping():
        held = Background(lambda: w.append("t", rows(100)))
        gate.wait_reached()
    b = connect(clock)
    with skipping():
        for v in range(22, 30):
            assert b.append("t", rows(v)).base_offset == v
        done = connect(clock).maintenance.compact(target_bytes=MIN_TARGET_BYTES)
    assert [(c.start, c.end) for c in done] == [(16, 24)]
    clocks.advance(DELAY + MIN)
    connect(clock).maintenance.vacuum()
    assert min(base_of(k) for k in segs(clock)) == 24
    before = set(segs(clock))
    gate.release()
    result = held.result()
    assert isinstance(result, arrowlog.AppendResult) and result.base_offset == 30
    assert set(segs(clock)) - before == {segment_key("t", 0, 30)}
    with skipping():
        assert vals(connect(clock).consumer().read("t", 0)) == [*range(30), 100]


@pytest.mark.parametrize("store_spec", EVERY_STORE, indirect=True)
def test_two_writers_opening_through_the_index_claim_each_offset_once(
    clock: ClockStore, clocks: Clocks
) -> None:
    """Schedule: 22 records; [0, 16) compacted; vacuum removes 0..15; the
    checkpoints of [12, 16) and [16, 20) are found corrupt. Writer W1 is
    held at its read of the compacted object's index while opening; writer
    W2 opens through the index and appends 22..25. W1 goes on; then W1 and
    W2 append in turns, each also resending its first batch as an
    idempotent producer would. Guarantee: every offset is claimed once
    (W1's first record lands at 26, after W2's), the producers' resends are
    recognised, and a fresh reader sees each record once, in the order the
    appends were acknowledged."""
    compacted_and_vacuumed(clock, clocks)
    for start in (12, 16):
        flip_bit(clock, checkpoint_key("t", 0, start))
    scripted = ScriptedStore(clock)
    (obj,) = keys(clock, compacted_prefix("t", 0))
    gate = scripted.hold("get_range", obj)
    w1 = connect(scripted).producer()
    w2 = connect(clock).producer()
    with skipping():
        held = Background(lambda: w1.send("t", rows(100), partition=0))
        gate.wait_reached()
        for v in range(22, 26):
            assert w2.send("t", rows(v), partition=0).base_offset == v
    gate.release()
    first = held.result()
    assert first.base_offset == 26  # type: ignore[attr-defined]
    acked = [*range(22), *range(22, 26), 100]
    with skipping():
        for i in range(3):
            for producer, v in ((w1, 101 + i), (w2, 201 + i)):
                md = producer.send("t", rows(v), partition=0)
                assert md.base_offset == len(acked)
                acked.append(v)
        w1.flush()
        w2.flush()
        assert vals(connect(clock).consumer().read("t", 0)) == acked
    assert sorted(base_of(k) for k in segs(clock)) == list(range(16, len(acked)))


# --- transactions whose records or markers are in a window rebuilt from an index ------


def every_view(log: arrowlog.ArrowLog) -> dict[str, Any]:
    c = log.consumer()
    return {
        "committed": c.read("t", 0).to_pylist(),
        "records": [(r.offset, r.batch.to_pylist()) for r in c.iter_records("t", 0)],
        "cut": vals(c.read("t", 0, start=3, end=9)),
        "scan": scanned(log).to_pylist(),
        "stable": log.stable_offsets("t"),
        "end": log.end_offsets("t"),
        "uncommitted": vals(log.consumer(isolation_level="read_uncommitted").read("t", 0)),
    }


@pytest.mark.parametrize("corrupt", [[0], [4], [0, 4]], ids=["records", "markers", "both"])
def test_transactions_split_across_a_window_rebuilt_from_the_index(
    clock: ClockStore, clocks: Clocks, corrupt: list[int]
) -> None:
    """Schedule: window [0, 4): plain 0, 1; transaction A's record (200) at
    2; transaction B's record (300) at 3. Window [4, 8): A's COMMIT marker
    at 4, B's ABORT marker at 5, plain 6, 7. Plain 8..21. compact; 15 min;
    vacuum removes 0..15; every view recorded (read_committed reads, records
    with offsets, a cut read, a scan, LSO, ends, read_uncommitted). Then the
    checkpoint of the records' window, of the markers' window, or both, is
    found corrupt. Guarantee: every view unchanged: the rebuilt windows say
    which segments were transactional and which were markers, as the
    checkpoints did."""
    log = connect(clock)
    log.create_topic("t", SCHEMA, config=CONFIG)
    log.append("t", rows(0))
    log.append("t", rows(1))
    a = connect(clock).producer(transactional_id="a")
    b = connect(clock).producer(transactional_id="b")
    for tx, v in ((a, 200), (b, 300)):
        tx.init_transactions()
        tx.begin_transaction()
        tx.send("t", rows(v), partition=0)
        tx.flush()
    a.commit_transaction()
    a.flush()  # the COMMIT marker at 4 (markers follow in the background)
    b.abort_transaction()
    b.flush()  # the ABORT marker at 5
    for v in range(6, 22):
        log.append("t", rows(v))
    assert vals(log.consumer().read("t", 0)) == [0, 1, 200, *range(6, 22)]
    log.maintenance.compact(target_bytes=MIN_TARGET_BYTES)
    clocks.advance(DELAY + MIN)
    connect(clock).maintenance.vacuum()
    before = every_view(connect(clock))
    assert before["committed"] == connect(clock).consumer().read("t", 0).to_pylist()
    for start in corrupt:
        flip_bit(clock, checkpoint_key("t", 0, start))
    with skipping():
        assert every_view(connect(clock)) == before


def test_forgotten_epochs_read_through_windows_rebuilt_from_the_index(
    clock: ClockStore, clocks: Clocks
) -> None:
    """Schedule (t has 2 partitions, windows of 4): instance A of "y" sends
    -1 to t/0 (offset 0) and dies; a new instance of "y" fences it. "x"
    sends 1 (offset 1); plain 2..8; "x" commits (its marker at 9); plain
    10..21; "x" commits 101 and 102 to t/1. An hour later [0, 16) of t/0 is
    compacted; a day later vacuum removes its segments; eight days later
    both ids initialise again and a vacuum of everything prunes the
    coordinator entries no stored segment needs: the epoch of 1 is FORGOTTEN
    (decided by the compacted object read in its place), the fenced one of
    -1 answered ABORTED. Every view recorded. Then the checkpoints of [0, 4) (both batches) and
    [8, 12) (the marker) are found corrupt.

    Guarantee: every view (read_committed reads, records with offsets, a
    cut read, a scan, LSO, ends, read_uncommitted) unchanged: 1 visible, -1
    never, with no checkpoint and no coordinator entry left to say so."""
    from arrowlog.format.checkpoint import Decision
    from arrowlog.txn.coordinator import CoordinatorLog

    def instance(tid: str) -> arrowlog.Producer:
        p = connect(clock).producer(transactional_id=tid)
        p.init_transactions()
        return p

    log = connect(clock)
    log.create_topic("t", SCHEMA, partitions=2, config=CONFIG)
    a = instance("y")
    a.begin_transaction()
    a.send("t", rows(-1), partition=0)
    a.flush()
    instance("y")
    x = instance("x")
    x.begin_transaction()
    x.send("t", rows(1), partition=0)
    x.flush()
    for v in range(2, 9):
        log.append("t", rows(v))
    x.commit_transaction()
    x.flush()
    for v in range(10, 22):
        log.append("t", rows(v))
    for v in (101, 102):
        x.begin_transaction()
        x.send("t", rows(v), partition=1)
        x.commit_transaction()
        x.flush()
    clocks.advance(60 * MIN)
    done = connect(clock).maintenance.compact(target_bytes=MIN_TARGET_BYTES)
    assert [(c.start, c.end) for c in done if c.partition == 0] == [(0, 16)]
    clocks.advance(DAY)
    connect(clock).maintenance.vacuum()
    clocks.advance(8 * DAY)
    instance("x")
    instance("y")
    connect(clock).maintenance.vacuum()
    assert CoordinatorLog(clock, "x", log.config.retry).outcome(0)[0] is Decision.FORGOTTEN
    assert CoordinatorLog(clock, "y", log.config.retry).outcome(0)[0] is Decision.ABORTED
    before = every_view(connect(clock))
    assert vals(connect(clock).consumer().read("t", 0)) == [1, *range(2, 9), *range(10, 22)]
    for start in (0, 8):
        flip_bit(clock, checkpoint_key("t", 0, start))
    with skipping():
        assert every_view(connect(clock)) == before


def test_a_fenced_zombie_in_a_window_rebuilt_from_the_index(
    clock: ClockStore, clocks: Clocks
) -> None:
    """Schedule: zombie Z ("z") sends -1 (offset 0); a new instance Z2 of "z"
    initialises (fencing Z, aborting its transaction); Z, not knowing, sends
    -2; Z2 sends 700 and commits; plain records to 21; compact; 15 min;
    vacuum removes [0, 16); every view recorded; then every checkpoint of a
    window holding a batch of "z" is found corrupt. Guarantee (invariant 5):
    every view unchanged; -1 and -2 never visible, 700 is."""
    log = connect(clock)
    log.create_topic("t", SCHEMA, config=CONFIG)
    z = connect(clock).producer(transactional_id="z")
    z.init_transactions()
    z.begin_transaction()
    z.send("t", rows(-1), partition=0)
    z.flush()
    z2 = connect(clock).producer(transactional_id="z")
    z2.init_transactions()
    with contextlib.suppress(arrowlog.ArrowLogError):
        z.send("t", rows(-2), partition=0)
        z.flush()
    z2.begin_transaction()
    z2.send("t", rows(700), partition=0)
    z2.commit_transaction()
    z2.flush()  # its marker lands before the plain records (and the views recorded)
    while connect(clock).partition("t", 0).end_offset() < 22:
        log.append("t", rows(connect(clock).partition("t", 0).end_offset()))
    connect(clock).maintenance.compact(target_bytes=MIN_TARGET_BYTES)
    clocks.advance(DELAY + MIN)
    connect(clock).maintenance.vacuum()
    before = every_view(connect(clock))
    committed = vals(connect(clock).consumer().read("t", 0))
    assert -1 not in committed and -2 not in committed and 700 in committed
    part = connect(clock).partition("t", 0)
    starts = window_starts(clock)
    zs = [a for a, b in itertools.pairwise(starts)
          if any(s.transactional_id == "z" for s in part.summaries(a, b))]  # fmt: skip
    assert zs
    for start in zs:
        flip_bit(clock, checkpoint_key("t", 0, start))
    with skipping():
        assert every_view(connect(clock)) == before


def test_the_window_holding_the_log_start_rebuilt_after_the_log_start_moved_into_the_object(
    clock: ClockStore, clocks: Clocks
) -> None:
    """Schedule: 14 segments of two records (offsets 0..27), windows of 4
    segments ([0, 8), [8, 16), [16, 24)); records before 11 deleted (inside
    segment [10, 12)); compaction starts at 12 and compacts [12, 16) (its
    index's first window is [8, 16), starting before it); 15 min; vacuum.
    Then records before 13 are deleted (inside segment [12, 14), which only
    the object holds now); 15 min; vacuum (it keeps [10, 12): it dates a
    segment's end by the next key listed, 16). The checkpoint of [8, 16) is
    found corrupt. Guarantee: a read from the log start
    returns 13..27; a read of [14, 16) returns 14, 15; a writer appends at
    28; a read below 13 raises OffsetOutOfRangeError."""
    log = connect(clock)
    log.create_topic("t", SCHEMA, config=CONFIG)
    for v in range(0, 28, 2):
        log.append("t", rows(v, v + 1))
    log.delete_records("t", 0, 11)
    (done,) = connect(clock).maintenance.compact(target_bytes=MIN_TARGET_BYTES)
    assert (done.start, done.end) == (12, 16)
    clocks.advance(DELAY + MIN)
    connect(clock).maintenance.vacuum()
    log.delete_records("t", 0, 13)
    clocks.advance(DELAY + MIN)
    connect(clock).maintenance.vacuum()
    assert {base_of(k) for k in segs(clock)} & {12, 14} == set()
    flip_bit(clock, checkpoint_key("t", 0, 8))
    fresh = connect(clock)
    with skipping():
        assert vals(fresh.consumer().read("t", 0)) == list(range(13, 28))
        assert vals(fresh.partition("t", 0).read(14, 16)) == [14, 15]
        assert vals(scanned(connect(clock))) == list(range(13, 28))
    assert fresh.append("t", rows(28)).base_offset == 28
    with pytest.raises(arrowlog.OffsetOutOfRangeError):
        fresh.partition("t", 0).read(12, 14)


def test_an_index_past_the_first_head_read_rebuilds_a_window_and_bridges_an_opening(
    clock: ClockStore, clocks: Clocks
) -> None:
    """Schedule: 404 plain records in segments of one, windows of 4; one
    compacted object holds [0, 400) (its index, about 100 bytes a segment,
    runs far past the 16 KiB a first ranged read fetches); 15 min; vacuum
    removes its segments. The checkpoints of [200, 204), [392, 396) and
    [396, 400) are found corrupt. Guarantee: reads across [200, 204) return
    its records (the index read in two requests); a fresh writer opens from
    [388, 392) through the index to 400 and appends at 404; vacuum, reading
    the object back, keeps it."""
    log = connect(clock)
    log.create_topic("t", SCHEMA, config=CONFIG)
    for v in range(404):
        log.append("t", rows(v))
    (done,) = connect(clock).maintenance.compact(target_bytes=MIN_TARGET_BYTES)
    assert (done.start, done.end) == (0, 400) and done.key is not None
    assert head_length(bytes(clock.get(done.key)), done.key) > 16 * 1024
    clocks.advance(DELAY + MIN)
    connect(clock).maintenance.vacuum()
    assert min(base_of(k) for k in segs(clock)) == 400
    for start in (200, 392, 396):
        flip_bit(clock, checkpoint_key("t", 0, start))
    fresh = connect(clock)
    with skipping():
        assert vals(fresh.partition("t", 0).read(199, 205)) == list(range(199, 205))
        assert vals(fresh.consumer().read("t", 0)) == list(range(404))
        assert connect(clock).append("t", rows(404)).base_offset == 404
    assert done.key in keys(clock, compacted_prefix("t", 0))
