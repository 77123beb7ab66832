"""Staged appends under schedules that attack the argument in
docs/protocol.md, "Staged appends": each test here is a deterministic
schedule whose expected outcome is what the protocol claims. Each was a
break found by an adversary; the docstrings say which step of the
argument did not hold."""

from __future__ import annotations

import dataclasses
import os
import time
from pathlib import Path
from typing import Any

import pyarrow as pa
import pytest

import arrowlog
from arrowlog import LogConfig
from arrowlog.config import Compression
from arrowlog.errors import CorruptSegmentError
from arrowlog.format.segment import (
    SegmentHeader,
    WriterIdentity,
    empty_batch,
    encode,
    read_header,
)
from arrowlog.partition.fetch import COLUMN_READ_MIN_BYTES
from arrowlog.partition.heads import HEADS
from arrowlog.storage.local import LocalStore
from arrowlog.storage.memory import MemoryStore
from arrowlog.storage.wrappers import CountingStore
from tests.support.clocks import ClockStore
from tests.support.schedules import FAST, PLAIN, SCHEMA, rows
from tests.support.staged import put_staged

STAGED = LogConfig(retry=FAST.retry, staged_appends=True)
WRITER_MS = 1_800_000_000_000


def connect(store: Any) -> arrowlog.ArrowLog:
    return arrowlog.connect(store, config=STAGED)


def plain(store: Any) -> arrowlog.PartitionLog:
    """Partition 0 through a client that never stages: another writer whose
    appends only move the end."""
    return arrowlog.connect(store, config=PLAIN).partition("t", 0)


def values(store: Any) -> list[int]:
    """Every record of partition 0, read by a new client, in offset order."""
    column = arrowlog.connect(store).partition("t", 0).read().column("v")
    return [v for v in column.to_pylist() if isinstance(v, int)]


@pytest.fixture
def frozen(monkeypatch: pytest.MonkeyPatch) -> None:
    """Every writer's wall clock stands still: what a helper lists as "staged
    in the last second" does not depend on how fast the test runs."""
    monkeypatch.setattr(time, "time", lambda: WRITER_MS / 1000)


@pytest.mark.parametrize("step_back_ms", [3, 3_000], ids=["3ms-across-a-second", "3s"])
def test_a_store_clock_that_steps_back_does_not_let_a_committed_batch_be_committed_again(
    frozen: None, step_back_ms: int
) -> None:
    """A writer stages a batch and commits it itself, just after a second
    starts on the store's clock; the objects written after that are stamped
    ``step_back_ms`` earlier (an NTP step, or another node of the store whose
    clock is a few ms behind: S3 is many hosts). A helper that opened from a
    checkpoint past that commit still lists the staged object among the
    recent ones. No clock decides whether it may commit it: its producer's
    sequence in the chain does, and that batch is its producer's latest
    already. (It broke when a horizon on the store's clock decided.)"""
    store = ClockStore(MemoryStore(), start_ms=WRITER_MS)
    arrowlog.connect(store).create_topic(
        "t", SCHEMA, config=arrowlog.TopicConfig(checkpoint_interval=2)
    )
    x = connect(store).partition("t", 0)
    x.end_offset()
    x.end_offset()
    plain(store).append(rows(10))
    x.append(rows(11))  # staged: the first batch of x's producer id for plain appends
    store.now_ms = WRITER_MS + 2_001  # one ms into a second
    plain(store).append(rows(1))
    x.append(rows(2))  # staged (the next of that producer: helpable), committed by x itself
    assert x.stats["staged"] == 2 and x.stats["commits"] == 2
    store.now_ms -= step_back_ms  # the store's clock steps back
    for v in (3, 4, 5):
        plain(store).append(rows(v))  # the commit is checkpointed
    h = connect(store).partition("t", 0)
    h.end_offset()
    h.end_offset()
    plain(store).append(rows(6))
    h.append(rows(7))
    assert h.stats["staged"] == 1 and h.stats["helped"] == 0
    assert sorted(values(store)) == [1, 2, 3, 4, 5, 6, 7, 10, 11]


def ready(clock: ClockStore, *parts: arrowlog.PartitionLog) -> None:
    """Each writer has followed the chain and dated it (two syncs), and the
    store's clock has moved on: what is staged from now on is helpable."""
    for part in parts:
        part.end_offset()
        part.end_offset()
    clock.advance(2_000)


def test_a_batch_that_fits_when_it_wins_the_race_is_not_refused_when_it_loses_it(
    frozen: None,
) -> None:
    """max_batch_bytes counts the encoded object. A staged data object's
    header says ``"staged": true`` besides its offsets, so it encodes a few
    bytes larger than the same batch's segment at a small offset: a batch
    within the limit as a segment, appended while another writer wins the
    race, is refused as too large once it is staged (and appended as any
    other when it wins). Whether a valid batch is accepted then depends on a
    race the caller cannot see."""
    store = ClockStore(MemoryStore(), start_ms=WRITER_MS)
    arrowlog.connect(store).create_topic(
        "t", SCHEMA, config=arrowlog.TopicConfig(max_batch_bytes=1600, compression=Compression.NONE)
    )
    plain(store).append(rows(0))
    uncontended = plain(store).append(rows(1, 2))
    assert uncontended.base_offset == 1  # the batch fits as a segment
    x = connect(store).partition("t", 0)
    ready(store, x)
    plain(store).append(rows(3))

    result = x.append(rows(4, 5))  # loses the race for offset 4: staged

    assert result.base_offset == 4
    assert values(store) == [0, 1, 2, 3, 4, 5]


def test_a_commit_object_naming_one_staged_object_twice_is_refused() -> None:
    """A commit object is the claim on the offsets of the batches it names;
    one that names the same staged object twice (forged, or written by a
    broken writer) would give the same records two ranges of offsets.
    Readers take its refs as they are and read the batch twice."""
    store = ClockStore(MemoryStore())
    arrowlog.connect(store).create_topic("t", SCHEMA)
    plain(store).append(rows(0))
    x = connect(store).partition("t", 0)
    ready(store, x)
    plain(store).append(rows(1))
    x.append(rows(2))  # staged, committed at 2 by x
    commit = read_header(store.get("t/0/segments/00000000000000000002.arrow"), key="c")
    assert not isinstance(commit, int) and commit.refs is not None
    (ref,) = commit.refs
    forged = SegmentHeader(
        base_offset=3,
        record_count=2,
        timestamp_ms=commit.timestamp_ms,
        append_id="f" * 32,
        refs=(ref, ref),
    )
    data, _ = encode(empty_batch(SCHEMA), forged, Compression.NONE)
    store.put_if_absent("t/0/segments/00000000000000000003.arrow", data)

    with pytest.raises(CorruptSegmentError):
        values(store)


def producer(sequence: int) -> WriterIdentity:
    return WriterIdentity(producer_id=9, producer_epoch=0, base_sequence=sequence)


def test_retention_by_time_passes_a_commit_object_that_carries_several_batches(
    frozen: None,
) -> None:
    """Retention removes the records of segments written more than
    ``retention_ms`` ago (store clock), up to the newest segment. A commit
    object carrying two batches is one object with one LastModified; the
    log start must be able to pass it."""
    store = ClockStore(MemoryStore(), start_ms=WRITER_MS)
    log = arrowlog.connect(store)
    log.create_topic("t", SCHEMA, config=arrowlog.TopicConfig(retention_ms=60_000))
    log.partition("t", 0).append(rows(0), identity=producer(0))
    x = connect(store).partition("t", 0)
    ready(store, x)
    put_staged(
        store, rows(3), producer(1), writer_ms=WRITER_MS
    )  # the producer's next batch: helpable
    plain(store).append(rows(1))
    x.append(rows(2))  # loses the race: one commit at 2 carries [2, 4)
    assert (x.stats["commits"], x.stats["helped"]) == (1, 1)
    for v in (4, 5):
        plain(store).append(rows(v))
    store.advance(120_000)  # every segment is older than retention_ms

    arrowlog.connect(store).maintenance.vacuum()

    assert arrowlog.connect(store).partition("t", 0).start_offset() == 5


def test_a_forked_child_and_its_parent_never_stage_plain_batches_under_one_identity(
    tmp_path: Path,
) -> None:
    """A plain append is staged under a producer id its client claimed once,
    with the next sequence of that id, "never given twice". A process that
    forks after its client staged once (a multiprocessing pool on Linux, a
    local directory as the store) leaves the child a copy of that id and of
    the next sequence: the child and the parent both stage a batch as (id,
    sequence 1). The parent then takes the child's committed batch for its
    own (the same producer, sequence and count): its append is
    acknowledged at the child's offset, and its record is in no log."""
    store = LocalStore(tmp_path / "store", fsync=False)
    arrowlog.connect(store).create_topic("t", SCHEMA)
    plain(store).append(rows(0))
    w = connect(store).partition("t", 0)
    ready_local(w)
    plain(store).append(rows(1))
    w.append(rows(2))  # staged: its client's plain id claimed, sequence 0 used
    assert w.stats["staged"] == 1
    child = os.fork()
    if child == 0:  # pragma: no cover - the child's exit code says it all
        code = 1
        try:
            plain(store).append(rows(3))
            w.append(rows(7))  # staged again (its view is stale): sequence 1
            code = 0 if w.stats["staged"] == 2 else 2
        finally:
            os._exit(code)
    _, status = os.waitpid(child, 0)
    assert os.waitstatus_to_exitcode(status) == 0

    result = w.append(rows(8))  # stale too: staged, as sequence 1 again

    log = values(store)
    assert sorted(log) == [0, 1, 2, 3, 7, 8]
    assert log[result.base_offset] == 8


def ready_local(*parts: arrowlog.PartitionLog) -> None:
    for part in parts:
        part.end_offset()
        part.end_offset()


@pytest.mark.parametrize("ahead_ms", [100, 1_000], ids=["100ms", "1s"])
def test_a_writer_whose_clock_is_ahead_does_not_hide_fresh_batches_from_the_combiner(
    monkeypatch: pytest.MonkeyPatch, ahead_ms: int
) -> None:
    """A combiner's LIST starts 50 ms before the newest object its last LIST
    showed, if all were committed: the docs say an object it misses so is
    one stamped earlier that landed late, which its own writer commits. The
    newest object is stamped by its writer's clock: one writer whose clock
    is ``ahead_ms`` ahead puts the combiner's next LIST start in the
    combiner's own future. A batch another writer, its clock right, uploads
    15 ms after that LIST (after the combiner's commit, as followers do) is
    not listed, however long the combiner gathers: combining stops for
    every writer whose clock is right, and each commits its own batch
    again, racing for the end."""
    now = [WRITER_MS]
    monkeypatch.setattr(time, "time", lambda: now[0] / 1000)
    store = ClockStore(MemoryStore(), start_ms=WRITER_MS)
    log = arrowlog.connect(store)
    log.create_topic("t", SCHEMA)
    ahead, right = producer(0), WriterIdentity(producer_id=8, producer_epoch=0, base_sequence=0)
    log.partition("t", 0).append(rows(0), identity=ahead)
    log.partition("t", 0).append(rows(10), identity=right)
    c = connect(store).partition("t", 0)
    ready(store, c)
    put_staged(store, rows(1), producer(1), writer_ms=now[0] + ahead_ms)
    plain(store).append(rows(2))
    c.append(rows(3))  # loses the race: staged; its commit carries the ahead writer's batch
    assert (c.stats["staged"], c.stats["helped"]) == (1, 1)

    now[0] += 20
    put_staged(store, rows(11), dataclasses.replace(right, base_sequence=1), writer_ms=now[0] - 5)
    c.append(rows(4))  # staged at once (it helped a moment ago): the combiner gathers

    assert c.stats["staged"] == 2
    assert c.stats["helped"] == 2, "the combiner did not list a batch uploaded after its LIST"
    assert sorted(values(store)) == [0, 1, 2, 3, 4, 10, 11]


def test_a_large_segment_found_by_following_the_log_end_is_read_by_columns_in_one_request(
    tmp_path: Path,
) -> None:
    """A writer follows the log end with one ranged read of the next key
    (``read_start``); the heads it reads so are offered to the process's
    kept frames, as a listing's header reads are ("a process that has seen
    a segment's frame once (a column read, or the header read that put the
    segment in the tail) ... one round trip per segment instead of two";
    docs/testing.md: "1 once the segment's frame is kept"). ``read_start``
    gives no entity tag, so the frame is kept untagged on a store that has
    tags, and a column read of that segment fetches the frame again: two
    requests, as if it had never been seen."""
    from tests.partition.test_column_reads import wide

    store = LocalStore(tmp_path / "store", fsync=False)
    log = arrowlog.connect(store)
    log.create_topic("w", wide().schema, config=arrowlog.TopicConfig(compression=Compression.NONE))
    HEADS.clear()
    counting = CountingStore(store)
    follower = arrowlog.connect(counting).partition("w", 0)
    assert follower.end_offset() == 0
    log.partition("w", 0).append(wide())
    assert follower.end_offset(refresh=False, complete=True) > 0  # the end followed by key
    (segment,) = follower.segments()
    assert segment.size is not None and segment.size >= COLUMN_READ_MIN_BYTES

    counting.reset()
    got = follower.read(columns=["f"])

    assert got.column("f").equals(pa.chunked_array([wide().column("f")]))
    assert counting.counts["get_range"] == 1, "the kept frame was fetched again"
