"""Compacting small segments (docs/protocol.md, "Compacting small segments"):
the committed records of decided ranges are rewritten into compacted objects;
readers (the log's, the consumer's, the Spark planner's tasks) read them instead
of the segments, with every offset and timestamp as before; vacuum removes the
segments after the topic's delay; a writer as stale as can be never claims a key
a removed segment freed.

Every test runs on memory, a local directory and SeaweedFS over HTTP.
"""

from __future__ import annotations

import dataclasses
import itertools
import json
import signal
import subprocess
import sys
import time
import warnings
from collections.abc import Iterator
from pathlib import Path

import pyarrow as pa
import pyarrow.compute
import pytest

import arrowlog
import arrowlog.format.segment
from arrowlog import InvalidConfigError, TopicConfig
from arrowlog.errors import CorruptSegmentError, SegmentNotFoundError
from arrowlog.format.checkpoint import SegmentSummary
from arrowlog.format.compacted_index import INDEX_KEY, CompactedIndex
from arrowlog.format.segment import encode
from arrowlog.format.topic import (
    checkpoint_key,
    checkpoint_prefix,
    compacted_prefix,
    segment_key,
    segment_prefix,
)
from arrowlog.maintenance.compaction import MIN_TARGET_BYTES
from arrowlog.partition import fetch_compacted
from arrowlog.read.scan import output_schema, plan_scan, read_task
from arrowlog.storage import Store
from arrowlog.storage.wrappers import CountingStore
from arrowlog.testing.scripted import ScriptedStore
from tests.support.schedules import FAST, SCHEMA, Background, rows
from tests.support.stores import StoreSpec

ROOT = Path(__file__).resolve().parents[2]

DELAY_MS = 100
CONFIG = TopicConfig(checkpoint_interval=4, delete_delay_ms=DELAY_MS)


@pytest.fixture
def scripted(store: Store) -> Iterator[ScriptedStore]:
    yield ScriptedStore(store)


def wait_out_the_delay() -> None:
    time.sleep(DELAY_MS / 1000 + 2.1)


def keys(store: Store, prefix: str) -> list[str]:
    return [info.key for info in store.list(prefix)]


def segments(store: Store, partition: int = 0) -> list[str]:
    return [k for k in keys(store, segment_prefix("t", partition)) if k.endswith(".arrow")]


def scanned(log: arrowlog.ArrowLog, **kwargs: object) -> tuple[pa.Table, set[str]]:
    """What the Spark source's tasks read of topic t: rows with their offsets
    and timestamps, and the objects the tasks fetch."""
    plan = plan_scan(log, ["t"], **kwargs)  # type: ignore[arg-type]
    schema = output_schema(log.topic("t").schema)
    batches = [b for task in plan.tasks for b in read_task(log.store, task, schema)]
    table = pa.Table.from_batches(batches, schema=schema)
    return table.sort_by([("partition", "ascending"), ("offset", "ascending")]), {
        s.key for task in plan.tasks for s in task.segments
    }


def a_mixed_log(store: Store) -> arrowlog.ArrowLog:
    """Topic t: plain appends, idempotent sends, committed and aborted
    transactions (with their markers), 40-odd segments in windows of 4."""
    log = arrowlog.connect(store, config=FAST)
    log.create_topic("t", SCHEMA, config=CONFIG)
    for v in range(8):
        log.append("t", rows(v, v + 1000))
    p = log.producer()
    for v in range(8, 16):
        p.send("t", rows(v))
    p.flush()
    tx = log.producer(transactional_id="tx")
    tx.init_transactions()
    for n in range(6):
        tx.begin_transaction()
        tx.send("t", rows(100 + n, 200 + n))
        tx.send("t", rows(300 + n))
        tx.flush()
        if n % 2:
            tx.abort_transaction()
        else:
            tx.commit_transaction()
    for v in range(16, 30):
        log.append("t", rows(v))
    return log


def test_compaction_keeps_every_committed_record_with_its_offset_and_timestamp(
    store: Store,
) -> None:
    log = a_mixed_log(store)
    committed = log.consumer().read("t", 0)
    before, read_before = scanned(log)
    assert not any("/compacted/" in k for k in read_before)
    planned = log.maintenance.compact(target_bytes=MIN_TARGET_BYTES, dry_run=True)
    assert planned and all(c.key is None for c in planned)
    assert not keys(store, compacted_prefix("t", 0))  # a dry run writes nothing
    done = log.maintenance.compact(target_bytes=MIN_TARGET_BYTES)
    assert [(c.start, c.end) for c in done] == [(c.start, c.end) for c in planned]
    assert done[0].start == 0 and done[-1].end <= log.partition("t", 0).end_offset()
    assert sum(c.records or 0 for c in done) < done[-1].end  # aborted records left out

    for reader in (log, arrowlog.connect(store, config=FAST)):  # the compactor, a new client
        after, read_after = scanned(reader)
        assert after.equals(before)
        assert any("/compacted/" in k for k in read_after)
        assert reader.consumer().read("t", 0).equals(committed)
    # the segments go after the delay; every read is the same without them
    vacuumed = {r.key for r in log.maintenance.vacuum()}
    assert not any(k in vacuumed for k in segments(store))  # not before the delay
    wait_out_the_delay()
    removed = [r for r in log.maintenance.vacuum() if r.key.endswith(".arrow")]
    assert len(removed) == sum(c.segments for c in done)
    assert all("compacted object" in r.reason for r in removed)
    fresh = arrowlog.connect(store, config=FAST)
    assert scanned(fresh)[0].equals(before)
    assert fresh.consumer().read("t", 0).equals(committed)
    assert log.consumer().read("t", 0).equals(committed)  # a client that planned before
    # a range inside a compacted object: only its records, read from it
    offsets = pa.compute.field("offset")
    inside = before.filter((offsets >= 5) & (offsets < 21))
    ranged, read = scanned(fresh, starting={("t", 0): 5}, ending={("t", 0): 21})
    assert ranged.equals(inside) and all("/compacted/" in k for k in read)
    assert fresh.consumer().read("t", 0, start=5, end=21).column("v").to_pylist() == (
        inside.column("v").to_pylist()
    )


def test_bad_arguments_are_refused_and_write_nothing(store: Store) -> None:
    log = a_mixed_log(store)
    before = keys(store, "")
    for bad in (0, MIN_TARGET_BYTES - 1, "64MiB", 1.5, True):
        with pytest.raises(InvalidConfigError):
            log.maintenance.compact(target_bytes=bad)  # type: ignore[arg-type]
    with pytest.raises(InvalidConfigError):
        log.maintenance.compact("t")
    with pytest.raises(InvalidConfigError):
        log.maintenance.compact(dry_run="yes")  # type: ignore[arg-type]
    with pytest.raises(arrowlog.UnknownTopicOrPartitionError):
        log.maintenance.compact(["nope"])
    assert keys(store, "") == before


# --- writers and readers that knew the segments compaction removed ----------------------


def twenty_compacted(store: Store, writer: Store) -> tuple[arrowlog.ArrowLog, arrowlog.ArrowLog]:
    """Writer A (through ``writer``) wrote offset 0 and knows the log ends at
    1; B wrote 1..19, compacted [0, 16) (the windows before the newest) and,
    the delay over, removed its segments: key 1 is free again."""
    a = arrowlog.connect(writer, config=FAST)
    a.create_topic("t", SCHEMA, config=CONFIG)
    a.append("t", rows(0))
    b = arrowlog.connect(store, config=FAST)
    for v in range(1, 20):
        b.append("t", rows(v))
    assert [(c.start, c.end) for c in b.maintenance.compact(target_bytes=MIN_TARGET_BYTES)] == [
        (0, 16)
    ]
    wait_out_the_delay()
    assert segment_key("t", 0, 1) in {r.key for r in b.maintenance.vacuum()}
    return a, b


def values(log: arrowlog.ArrowLog) -> list[int]:
    return [v for v in log.consumer().read("t", 0).column("v").to_pylist() if v is not None]


def test_an_idle_writer_lists_before_it_writes_at_a_key_a_compacted_segment_freed(
    store: Store,
) -> None:
    a, _ = twenty_compacted(store, store)
    assert a.append("t", rows(100)).base_offset == 20
    assert segment_key("t", 0, 1) not in segments(store)
    assert values(arrowlog.connect(store, config=FAST)) == [*range(20), 100]


def test_a_put_held_until_compaction_freed_its_key_is_not_acknowledged_there(
    store: Store, scripted: ScriptedStore
) -> None:
    """A's PUT at offset 1 (on a fresh view) is held in the network while B
    writes 1..19, compacts, and removes the compacted segments once the delay
    has passed. Then the PUT lands at the freed key 1. A's reply came later
    than half the delay: it lists the marks, finds its offset below the
    compaction mark and another segment indexed there, and writes at the end."""
    a = arrowlog.connect(scripted, config=FAST)
    a.create_topic("t", SCHEMA, config=CONFIG)
    a.append("t", rows(0))
    gate = scripted.hold("put_if_absent", segment_key("t", 0, 1))
    held = Background(lambda: a.append("t", rows(100)))
    gate.wait_reached()
    b = arrowlog.connect(store, config=FAST)
    for v in range(1, 20):
        b.append("t", rows(v))
    b.maintenance.compact(target_bytes=MIN_TARGET_BYTES)
    wait_out_the_delay()
    assert segment_key("t", 0, 1) in {r.key for r in b.maintenance.vacuum()}
    gate.release()
    result = held.result()
    assert isinstance(result, arrowlog.AppendResult) and result.base_offset == 20
    assert a.partition("t", 0).stats["below_log_start"] == 1
    assert values(arrowlog.connect(store, config=FAST)) == [*range(20), 100]


def test_a_sync_that_races_the_removal_reopens_from_the_newest_checkpoint(
    store: Store, scripted: ScriptedStore
) -> None:
    """A knows the log ends at 1 and lists before it writes; the LIST shows
    segments 0..19, but before A reads segment 1's header, vacuum removes the
    compacted ones. A's chain stops at 1, below the compaction mark the LIST
    showed: it reopens and writes at 20, never at the freed key."""
    a = arrowlog.connect(scripted, config=FAST)
    a.create_topic("t", SCHEMA, config=CONFIG)
    a.append("t", rows(0))
    b = arrowlog.connect(store, config=FAST)
    for v in range(1, 20):
        b.append("t", rows(v))
    b.maintenance.compact(target_bytes=MIN_TARGET_BYTES)
    wait_out_the_delay()
    gate = scripted.hold("get_range", segment_key("t", 0, 1))
    held = Background(lambda: a.append("t", rows(100)))
    gate.wait_reached()
    assert segment_key("t", 0, 1) in {r.key for r in b.maintenance.vacuum()}
    gate.release()
    result = held.result()
    assert isinstance(result, arrowlog.AppendResult) and result.base_offset == 20
    assert values(arrowlog.connect(store, config=FAST)) == [*range(20), 100]


def test_a_reader_that_planned_before_the_removal_reads_the_compacted_object(
    store: Store, scripted: ScriptedStore
) -> None:
    """A read_committed reader planned [0, 20) from the segments; its first
    fetch is held while B compacts and vacuum removes the segments. The
    reader's other fetches find their segments gone and read the records from
    the compacted object instead: the same records."""
    b = arrowlog.connect(store, config=FAST)
    b.create_topic("t", SCHEMA, config=CONFIG)
    for v in range(20):
        b.append("t", rows(v))
    reader = arrowlog.connect(scripted, config=dataclasses.replace(FAST, read_ahead=1))
    assert values(reader) == list(range(20))
    gate = scripted.hold("get", segment_key("t", 0, 0))
    held = Background(lambda: values(reader))
    gate.wait_reached()
    b.maintenance.compact(target_bytes=MIN_TARGET_BYTES)
    wait_out_the_delay()
    assert segment_key("t", 0, 0) in {r.key for r in b.maintenance.vacuum()}
    gate.release()
    assert held.result() == list(range(20))


def test_a_corrupt_compacted_object_fails_the_read_with_its_name(store: Store) -> None:
    log = a_mixed_log(store)
    (done, *_) = log.maintenance.compact(target_bytes=MIN_TARGET_BYTES)
    assert done.key is not None
    data = bytearray(store.get(done.key))
    data[len(data) // 2] ^= 0x10
    store.delete(done.key)
    store.put_if_absent(done.key, bytes(data))
    fresh = arrowlog.connect(store, config=FAST)
    with pytest.raises(CorruptSegmentError, match="compacted"):
        fresh.consumer().read("t", 0)
    with pytest.raises(CorruptSegmentError, match="compacted"):
        scanned(fresh)


def test_a_range_of_aborted_records_only_compacts_to_an_empty_object(store: Store) -> None:
    log = arrowlog.connect(store, config=FAST)
    log.create_topic("t", SCHEMA, config=CONFIG)
    tx = log.producer(transactional_id="tx")
    tx.init_transactions()
    for n in range(6):
        tx.begin_transaction()
        tx.send("t", rows(n))
        tx.send("t", rows(n + 10))
        tx.flush()
        tx.abort_transaction()
    log.append("t", rows(99))
    done = log.maintenance.compact(target_bytes=MIN_TARGET_BYTES)
    assert done and all(c.records == 0 for c in done)
    fresh = arrowlog.connect(store, config=FAST)
    assert values(fresh) == [99]
    assert scanned(fresh)[0].column("v").to_pylist() == [99]
    # aborted records are gone from the compacted range for read_uncommitted
    # readers too (as after Kafka's log cleaner); the newest window keeps them
    end = done[-1].end
    assert fresh.partition("t", 0).read(0, end).num_rows == 0
    assert fresh.partition("t", 0).read(end).column("v").to_pylist()[-1] == 99


def test_compactors_that_race_write_each_range_once(store: Store) -> None:
    log = a_mixed_log(store)
    committed = log.consumer().read("t", 0)
    first = Background(
        lambda: arrowlog.connect(store, config=FAST).maintenance.compact(
            target_bytes=MIN_TARGET_BYTES
        )
    )
    second = arrowlog.connect(store, config=FAST).maintenance.compact(target_bytes=MIN_TARGET_BYTES)
    # Whichever got there first wrote a range; the other reports it too, or
    # nothing once it saw itself overtaken: never another object for it.
    reported = {(c.start, c.end) for c in [*first.result(), *second]}  # type: ignore[misc]
    ranges = sorted(reported)
    assert ranges and all(a[1] <= b[0] for a, b in itertools.pairwise(ranges))
    assert len(keys(store, compacted_prefix("t", 0))) == len(ranges)
    assert log.maintenance.compact(target_bytes=MIN_TARGET_BYTES) == []  # nothing left to compact
    assert arrowlog.connect(store, config=FAST).consumer().read("t", 0).equals(committed)


def test_records_deleted_below_the_log_start_take_their_compacted_objects_along(
    store: Store,
) -> None:
    log = a_mixed_log(store)
    done = log.maintenance.compact(target_bytes=MIN_TARGET_BYTES)
    end = done[-1].end
    log.delete_records("t", 0, end)
    wait_out_the_delay()
    removed = {r.key for r in log.maintenance.vacuum()}
    assert all(c.key in removed for c in done)
    assert not keys(store, compacted_prefix("t", 0))
    fresh = arrowlog.connect(store, config=FAST)
    assert fresh.partition("t", 0).start_offset(refresh=True) == end
    with pytest.raises(arrowlog.OffsetOutOfRangeError):
        fresh.consumer().read("t", 0, start=0)
    assert values(fresh) == log.consumer().read("t", 0, start=end).column("v").to_pylist()


# --- OS processes: writers racing compactors SIGKILLed at every step --------------------


def _spawn(spec: StoreSpec, *argv: str) -> subprocess.Popen[str]:
    return subprocess.Popen(
        [sys.executable, "-m", "tests.support.compaction_race_worker", *argv, *spec.argv()],
        cwd=ROOT,
        stdout=subprocess.PIPE,
        text=True,
    )


def _observe(spec: StoreSpec, seen: dict[int, int]) -> int:
    """One read_committed scan by a new client, checked against every earlier
    one: an offset once seen always holds the same record and stays, and
    none is read twice. Returns how many records it saw."""
    table, _ = scanned(spec.connect(config=FAST))
    offsets: list[int] = table.column("offset").to_pylist()  # type: ignore[assignment]
    assert offsets == sorted(set(offsets)), "an offset read twice, or out of order"
    records: list[int] = table.column("v").to_pylist()  # type: ignore[assignment]
    for offset, value in zip(offsets, records, strict=True):
        assert seen.setdefault(offset, value) == value, f"offset {offset} changed"
    assert set(seen) <= set(offsets), "a record seen before is gone"
    return len(offsets)


@pytest.mark.slow
def test_writers_racing_compactors_killed_at_every_step_never_claim_an_offset_twice(
    shared_store_spec: StoreSpec,
) -> None:
    """Two writer processes append (plain appends, and transactions that
    commit or abort) while compactor processes compact and vacuum in a loop,
    each SIGKILLed at its k-th write or delete (k = 1, 2, ...: every step of a
    compaction and of a removal), and this process reads again and again,
    checking every observation. Afterwards every acknowledged record is in the
    log exactly once, at the offset it was acknowledged at."""
    log = shared_store_spec.connect(config=FAST)
    log.create_topic("t", SCHEMA, config=CONFIG)
    writers = [_spawn(shared_store_spec, "write", "--writer", str(w)) for w in (1, 2)]
    seen: dict[int, int] = {}
    killed_at: set[int] = set()
    k = 1
    while any(w.poll() is None for w in writers) or k < 8:
        compactor = _spawn(shared_store_spec, "compact", "--kill-after", str(k))
        compactor.communicate(timeout=120)
        if compactor.returncode == -signal.SIGKILL:
            killed_at.add(k)
            k += 1
        else:
            assert compactor.returncode == 0
            k = max(1, k - 3)  # nothing left to do at step k: try earlier steps again
        _observe(shared_store_spec, seen)
    acked: dict[int, int] = {}
    for w in writers:
        out, _ = w.communicate(timeout=120)
        assert w.returncode == 0, out
        for line in out.splitlines():
            offset, value = json.loads(line)
            assert acked.setdefault(offset, value) == value, f"offset {offset} acknowledged twice"
    assert killed_at >= set(range(1, 8))
    # the last compaction and removal, unkilled; then every acknowledged committed
    # record is there once, where it was acknowledged
    shared_store_spec.connect(config=FAST).maintenance.compact(target_bytes=MIN_TARGET_BYTES)
    wait_out_the_delay()
    shared_store_spec.connect(config=FAST).maintenance.vacuum()
    final, read = scanned(shared_store_spec.connect(config=FAST))
    got = dict(zip(final.column("offset").to_pylist(), final.column("v").to_pylist(), strict=True))
    committed = {o: v for o, v in acked.items() if v >= 0}
    assert got == committed
    assert any("/compacted/" in k for k in read)
    assert len(segments(shared_store_spec.open())) < len(acked) / 2  # most were compacted
    _observe(shared_store_spec, seen)


def test_a_scan_planned_before_never_reads_a_stray_at_a_freed_key(store: Store) -> None:
    """A scan is planned; then segment 1 is removed and another object with the
    same offsets (a late PUT into the freed key) takes its place. The scan's
    task refuses it instead of returning its rows: the index's append time
    differs from the stray's."""
    log = arrowlog.connect(store, config=FAST)
    log.create_topic("t", SCHEMA, config=CONFIG)
    for v in range(4):
        log.append("t", rows(v))
    plan = plan_scan(log, ["t"])
    key = segment_key("t", 0, 1)
    stray = arrowlog.format.segment.encode_segment(
        rows(100),
        arrowlog.format.segment.SegmentHeader(
            base_offset=1, record_count=1, timestamp_ms=1, append_id="stray"
        ),
    )
    store.delete(key)
    store.put_if_absent(key, stray)
    schema = output_schema(SCHEMA)
    with pytest.raises(CorruptSegmentError, match="not the segment this scan planned"):
        for task in plan.tasks:
            list(read_task(store, task, schema))
    # a reader of the library, which knows no newer log start, refuses it too
    with pytest.raises(CorruptSegmentError, match="not the log's segment"):
        arrowlog.connect(store, config=FAST).read("t", 0)


# --- the index a compacted object carries (corrupt checkpoints after vacuum) ----------


def compacted_index(store: Store, key: str, start: int, end: int) -> CompactedIndex:
    metadata = pa.ipc.open_file(pa.py_buffer(bytes(store.get(key)))).schema.metadata
    return CompactedIndex.from_json(metadata[INDEX_KEY], key=key, start=start, end=end)


def window_starts(store: Store, partition: int = 0) -> list[int]:
    keys_ = keys(store, checkpoint_prefix("t", partition))
    return sorted(10**20 - 1 - int(k.rsplit("/", 1)[1][:20]) for k in keys_)  # inverted


def test_a_compacted_object_carries_the_summaries_of_the_segments_it_replaced(
    store: Store,
) -> None:
    """Each compacted object's index holds every segment of its range as the
    checkpoints summarise it (the aborted records and markers it left out
    too; column statistics aside) and the windows they fall in; readers
    never see it in the schema they return."""
    log = a_mixed_log(store)
    done = log.maintenance.compact(target_bytes=MIN_TARGET_BYTES)
    assert done
    part = log.partition("t", 0)
    starts = window_starts(store)
    held: list[SegmentSummary] = []
    for c in done:
        assert c.key is not None
        index = compacted_index(store, c.key, c.start, c.end)
        want = [dataclasses.replace(s, stats=None) for s in part.summaries(c.start, c.end)]
        assert list(index.segments) == want
        windows = [(a, b) for a, b in itertools.pairwise(starts) if a < c.end and b > c.start]
        assert list(index.windows) == windows
        held += index.segments
    assert any(s.control for s in held) and any(s.producer_id >= 0 for s in held)
    table = arrowlog.connect(store, config=FAST).consumer().read("t", 0)
    assert INDEX_KEY not in (table.schema.metadata or {})


def test_a_corrupt_window_is_rebuilt_from_the_index_and_not_from_an_object_without_one(
    store: Store,
) -> None:
    """Two partitions of 20 records, [0, 16) compacted in each; partition 1's
    object is replaced by the same object without an index (as written
    before objects had one). Both read as before. After the delay, vacuum
    removes the segments, and the checkpoint of [4, 8) is found corrupt in
    both. Partition 0's window is rebuilt from its object's index: every
    record reads. Partition 1's cannot be (its object says which records it
    kept, not which segments it replaced nor where windows end): a read
    across it raises SegmentNotFoundError saying so, never rows; the rest of
    partition 1 reads."""
    log = arrowlog.connect(store, config=FAST)
    log.create_topic("t", SCHEMA, partitions=2, config=CONFIG)
    for p in (0, 1):
        for v in range(20):
            log.append("t", rows(v), partition=p)
    done = {c.partition: c for c in log.maintenance.compact(target_bytes=MIN_TARGET_BYTES)}
    key = done[1].key
    assert key is not None
    header, batch = fetch_compacted(store, key, 0, 16)
    old, _ = encode(batch, header, log.topic("t").config.compression, stats=True)
    store.delete(key)
    store.put_if_absent(key, old)
    assert INDEX_KEY not in (pa.ipc.open_file(pa.py_buffer(bytes(old))).schema.metadata or {})
    fresh = arrowlog.connect(store, config=FAST)
    for p in (0, 1):
        assert read_values(fresh, p) == list(range(20))
    wait_out_the_delay()
    log.maintenance.vacuum()
    for p in (0, 1):
        assert segment_key("t", p, 15) not in segments(store, p)
        ck = checkpoint_key("t", p, 4)
        raw = bytearray(store.get(ck))
        raw[len(raw) // 2] ^= 0x01
        store.delete(ck)
        store.put_if_absent(ck, bytes(raw))
    fresh = arrowlog.connect(store, config=FAST)
    with pytest.warns(RuntimeWarning, match="unusable checkpoint"):
        assert read_values(fresh, 0) == list(range(20))
    with (
        pytest.warns(RuntimeWarning, match="unusable checkpoint"),
        pytest.raises(SegmentNotFoundError, match=r"window at 4 .* readable index"),
    ):
        read_values(fresh, 1)
    assert read_values(fresh, 1, start=8) == list(range(8, 20))


def read_values(log: arrowlog.ArrowLog, partition: int, start: int | None = None) -> list[int]:
    return [
        v
        for v in log.consumer().read("t", partition, start=start).column("v").to_pylist()
        if v is not None
    ]


def test_vacuum_reads_each_compacted_object_back_once_before_its_segments_go(
    store: Store,
) -> None:
    """Before removing the 16 segments a compacted object holds, vacuum reads
    the object back (whole, and its index's head): once, not per segment;
    a later vacuum, with nothing left to remove, reads nothing of it."""
    log = arrowlog.connect(store, config=FAST)
    log.create_topic("t", SCHEMA, config=CONFIG)
    for v in range(22):
        log.append("t", rows(v))
    (done,) = log.maintenance.compact(target_bytes=MIN_TARGET_BYTES)
    assert done.key is not None
    wait_out_the_delay()
    counting = CountingStore(store)
    removed = arrowlog.connect(counting, config=FAST).maintenance.vacuum()
    assert len([r for r in removed if r.key.endswith(".arrow")]) == 16
    assert counting.keys_read[done.key] == 2
    counting = CountingStore(store)
    assert arrowlog.connect(counting, config=FAST).maintenance.vacuum() == []
    assert counting.keys_read[done.key] == 0


def test_describe_counts_compacted_objects_and_the_bytes_a_read_fetches() -> None:
    """After compaction a read fetches one compacted object for the range, not
    its segments: describe_topic says so (it counted every segment before),
    with the bytes of what a read from the log start fetches."""
    log = arrowlog.connect("memory://")
    log.create_topic("t", pa.schema([("x", pa.int64())]), config=TopicConfig(checkpoint_interval=4))
    for i in range(20):
        log.append("t", pa.record_batch({"x": [i]}))
    [before] = log.describe_topic("t").partitions
    assert (before.segments, before.compacted_objects, before.batches) == (20, 0, 20)
    assert before.bytes == sum(s.size for s in log.partition("t", 0).segments())
    [done] = log.maintenance.compact(["t"], target_bytes=1 << 20)
    [after] = log.describe_topic("t").partitions
    assert (after.segments, after.compacted_objects, after.batches) == (20 - done.end, 1, 20)
    compacted = log.partition("t", 0).compacted_objects(0, done.end)
    tail = log.partition("t", 0).segments(done.end, 20)
    assert after.bytes == compacted[0].size + sum(s.size for s in tail) < before.bytes


def test_vacuum_by_the_writer_keeps_the_segments_of_a_window_whose_stored_checkpoint_is_corrupt(
    store: Store,
) -> None:
    """The writer keeps each checkpoint it writes. The checkpoint of [4, 8)
    is then found corrupt in the store; the writer compacts [0, 16), and
    the object is replaced by the same one without an index (as written
    before objects had one). When the writer vacuums, the window cannot be
    rebuilt but from its segments, whatever copy of its checkpoint the
    writer holds: they stay (with a warning), and every record reads."""
    log = arrowlog.connect(store, config=FAST)
    log.create_topic("t", SCHEMA, config=CONFIG)
    for v in range(20):
        log.append("t", rows(v))
    ck = checkpoint_key("t", 0, 4)
    store.delete(ck)
    store.put_if_absent(ck, b"{not json")
    with warnings.catch_warnings():  # the writer plans from its copy; another client warns
        warnings.simplefilter("ignore", RuntimeWarning)
        (done,) = log.maintenance.compact(target_bytes=MIN_TARGET_BYTES)
    assert done.key is not None and (done.start, done.end) == (0, 16)
    header, batch = fetch_compacted(store, done.key, 0, 16)
    old, _ = encode(batch, header, log.topic("t").config.compression, stats=True)
    store.delete(done.key)
    store.put_if_absent(done.key, old)
    wait_out_the_delay()
    with pytest.warns(RuntimeWarning, match="has no index to rebuild it from"):
        log.maintenance.vacuum()
    assert segment_key("t", 0, 4) in segments(store)
    with pytest.warns(RuntimeWarning, match="unusable checkpoint"):
        assert read_values(arrowlog.connect(store, config=FAST), 0) == list(range(20))
