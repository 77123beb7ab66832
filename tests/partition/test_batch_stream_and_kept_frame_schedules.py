"""Attacks on two features: ``append_batches`` (a stream of batches, the next
encoded ahead while one is written, used by ``bulk_load``) and the process-wide
cache of large segments' frames (``partition.heads``) used by column reads.

Every schedule is deterministic: requests are held or failed by a
ScriptedStore, and the test waits on events, never on luck. Tests marked
``xfail(strict=True)`` are findings: they fail on the current code.

Origin: the attack on append_batches and kept frames (was tests/attack/test_stream_attack.py).
"""

from __future__ import annotations

import gc
import threading
from collections.abc import Callable, Iterator
from typing import Any

import numpy as np
import pyarrow as pa
import pytest

import arrowlog
import arrowlog.partition.append as append_mod
import arrowlog.partition.batches as batches_mod
from arrowlog import (
    AppendOutcomeUnknownError,
    CorruptSegmentError,
    LogConfig,
    OffsetMismatchError,
    RetryPolicy,
    TopicConfig,
)
from arrowlog.partition import projected
from arrowlog.partition.heads import HEADS, HeadCache
from arrowlog.producer.bulkload import bulk_load
from arrowlog.read.scan import output_schema, plan_scan, read_task
from arrowlog.storage import Store
from arrowlog.storage.url import open_store
from arrowlog.storage.wrappers import CountingStore
from arrowlog.testing.scripted import Gate, ScriptedStore
from tests.support.stores import Untagged

FIELDS: list[pa.Field[Any]] = [pa.field("id", pa.int64()), pa.field("name", pa.string())]
SCHEMA = pa.schema(FIELDS)


def seg(key: str) -> bool:
    return "/segments/" in key and key.endswith(".arrow")


def batch(first: int, rows: int) -> pa.RecordBatch:
    ids = list(range(first, first + rows))
    return pa.record_batch([pa.array(ids), pa.array([f"n{i}" for i in ids])], schema=SCHEMA)


def batches(count: int, rows: int = 10) -> list[pa.RecordBatch]:
    return [batch(i * rows, rows) for i in range(count)]


def memory() -> Store:
    return open_store("memory://", {})


def new_log(store: Store, **kwargs: Any) -> arrowlog.ArrowLog:
    log = arrowlog.connect(store)
    log.create_topic("t", SCHEMA, **kwargs)
    return log


def segments(log: arrowlog.ArrowLog, topic: str = "t") -> list[tuple[int, int]]:
    return [(ref.base, ref.end) for ref in log.partition(topic, 0).segments()]


def fresh_segments(store: Store, topic: str = "t") -> list[tuple[int, int]]:
    log = arrowlog.connect(store)
    log.partition(topic, 0).end_offset(refresh=True)
    return segments(log, topic)


class Run:
    """Consume a stream in a thread; results and the error, if any."""

    def __init__(self, make: Callable[[], Iterator[arrowlog.AppendResult]]) -> None:
        self.seen: list[tuple[int, int]] = []
        self.error: BaseException | None = None
        self.thread = threading.Thread(target=self._run, args=(make,), daemon=True)
        self.thread.start()

    def _run(self, make: Callable[[], Iterator[arrowlog.AppendResult]]) -> None:
        try:
            for r in make():
                self.seen.append((r.base_offset, r.next_offset))
        except BaseException as e:  # noqa: BLE001 - reported to the test
            self.error = e

    def join(self) -> None:
        self.thread.join(30)
        assert not self.thread.is_alive(), "the stream hung"


class Writers:
    """Records each stream's writer (its stop event) as it is made."""

    def __init__(self, monkeypatch: pytest.MonkeyPatch) -> None:
        self.made: list[batches_mod._Writer] = []
        original = batches_mod._Writer
        made = self.made

        class Recorded(original):  # type: ignore[misc, valid-type]
            def __post_init__(self) -> None:
                made.append(self)

        monkeypatch.setattr(batches_mod, "_Writer", Recorded)

    def stopped(self, timeout: float) -> bool:
        return bool(self.made) and self.made[-1].stop.wait(timeout)


class Abort(BaseException):
    """A KeyboardInterrupt-like exception (not an Exception)."""


def first_put_held() -> tuple[Store, Gate, arrowlog.ArrowLog]:
    """A new topic, and a connection whose first segment PUT will be held."""
    store = memory()
    new_log(store)
    scripted = ScriptedStore(store)
    gate = scripted.hold("put_if_absent", seg, nth=1)
    log = arrowlog.connect(scripted)
    log.partition("t", 0).end_offset()
    return store, gate, log


# ---------------------------------------------------------------------------
# Feature 1: append_batches
# ---------------------------------------------------------------------------


def test_any_error_encoding_ahead_is_raised_after_the_batches_before_it(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """FINDING 1 (fixed). Schedule: batch 0's PUT is held; batch 1 is encoded
    and handed on (queued); encoding batch 2 ahead raises MemoryError; then
    batch 0's PUT goes on. As a loop of append: batches 0 and 1 written and
    reported, then MemoryError at batch 2."""
    store, gate, log = first_put_held()
    writers = Writers(monkeypatch)
    calls = 0
    original = getattr(append_mod, "encode")  # noqa: B009 - not re-exported

    def encode(*args: Any, **kwargs: Any) -> Any:
        nonlocal calls
        calls += 1
        if calls == 3:
            raise MemoryError("scripted: out of memory encoding batch 2")
        return original(*args, **kwargs)

    monkeypatch.setattr(append_mod, "encode", encode)
    run = Run(lambda: log.append_batches("t", batches(4)))
    gate.wait_reached()
    writers.stopped(2.0)  # the stream gave up (current code) or 2 s passed
    gate.release()
    run.join()
    assert isinstance(run.error, MemoryError)
    assert fresh_segments(store) == [(0, 10), (10, 20)]
    assert run.seen == [(0, 10), (10, 20)]


def test_an_interrupt_from_the_input_is_raised_after_the_batches_before_it(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """FINDING 2 (fixed). Schedule: batch 0's PUT is held; the input gives
    batch 1 (handed on), then raises Abort(BaseException); batch 0's PUT goes
    on. As a loop of append: batches 0 and 1 written and reported first."""
    store, gate, log = first_put_held()
    writers = Writers(monkeypatch)

    def given() -> Iterator[pa.RecordBatch]:
        yield batch(0, 10)
        yield batch(10, 10)
        raise Abort("interrupted")

    run = Run(lambda: log.append_batches("t", given()))
    gate.wait_reached()
    writers.stopped(2.0)
    gate.release()
    run.join()
    assert isinstance(run.error, Abort)
    assert fresh_segments(store) == [(0, 10), (10, 20)]
    assert run.seen == [(0, 10), (10, 20)]


def test_exception_from_the_input_while_a_put_is_held_writes_the_ones_before() -> None:
    """Same schedule as FINDING 2 with a plain Exception."""
    store, gate, log = first_put_held()
    handed = threading.Event()

    def given() -> Iterator[pa.RecordBatch]:
        yield batch(0, 10)
        yield batch(10, 10)
        handed.set()
        raise RuntimeError("input broke")

    run = Run(lambda: log.append_batches("t", given()))
    gate.wait_reached()
    assert handed.wait(10)
    gate.release()
    run.join()
    assert isinstance(run.error, RuntimeError)
    assert run.seen == [(0, 10), (10, 20)]
    assert fresh_segments(store) == [(0, 10), (10, 20)]


def test_arrowlog_error_encoding_ahead_is_raised_by_the_writer_in_order(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """A batch too large only once encoded (compressed topic): encode_ahead
    gives None, the writer's own encode raises; the ones before land first."""
    store = memory()
    log = new_log(store)
    log.partition("t", 0).end_offset()
    calls = 0
    original = getattr(append_mod, "encode")  # noqa: B009 - not re-exported

    def encode(*args: Any, **kwargs: Any) -> Any:
        nonlocal calls
        calls += 1
        data, header = original(*args, **kwargs)
        if args[0].num_rows == 7:  # the bad batch, however often encoded
            raise arrowlog.RecordBatchTooLargeError("scripted: too large")
        return data, header

    monkeypatch.setattr(append_mod, "encode", encode)
    seen = []
    with pytest.raises(arrowlog.RecordBatchTooLargeError):
        for r in log.append_batches(
            "t", [batch(0, 10), batch(10, 10), batch(20, 7), batch(27, 10)]
        ):
            seen.append(r.base_offset)
    assert seen == [0, 10]
    assert fresh_segments(store) == [(0, 10), (10, 20)]


def test_closing_by_garbage_collection_mid_way_writes_only_the_batch_being_written() -> None:
    """Schedule: batch 0 landed and was yielded; batch 1's PUT is held, batch 2
    queued; the last reference to the stream is dropped (in another thread,
    gc'd); the PUT goes on. Batch 1 lands, batch 2 and later never."""
    store = memory()
    new_log(store)
    scripted = ScriptedStore(store)
    gate = scripted.hold("put_if_absent", seg, nth=2)
    log = arrowlog.connect(scripted)
    holder: list[Any] = [log.append_batches("t", batches(6))]
    assert next(holder[0]) == arrowlog.AppendResult("t", 0, 0, 10)
    gate.wait_reached()

    def drop() -> None:
        holder.clear()
        gc.collect()

    dropper = threading.Thread(target=drop, daemon=True)
    dropper.start()
    dropper.join(0.3)
    assert dropper.is_alive()  # closing waits for the PUT in flight
    gate.release()
    dropper.join(30)
    assert not dropper.is_alive()
    assert fresh_segments(store) == [(0, 10), (10, 20)]
    puts = [k for op, k in scripted.history if op == "put_if_absent" and seg(k)]
    assert len(puts) == 2


def test_exception_in_the_callers_loop_body_closes_the_stream() -> None:
    """The caller's loop raises while batch 1 is held: as close()."""
    store = memory()
    new_log(store)
    scripted = ScriptedStore(store)
    gate = scripted.hold("put_if_absent", seg, nth=2)
    log = arrowlog.connect(scripted)
    done = threading.Event()

    def body() -> None:
        try:
            for _ in log.append_batches("t", batches(6)):
                gate.wait_reached()  # batch 1, handed on before batch 0 was yielded
                raise Abort("caller gave up")
        except Abort:
            done.set()

    t = threading.Thread(target=body, daemon=True)
    t.start()
    gate.wait_reached()
    assert not done.wait(0.2)
    gate.release()
    t.join(30)
    assert done.is_set()
    assert fresh_segments(store) == [(0, 10), (10, 20)]


def test_lost_reply_whose_write_lands_before_the_readback_is_ours() -> None:
    """Schedule: batch 1's PUT times out (not applied yet); the write lands
    while the readback of the key is held; the readback finds our append id.
    Batch 2, encoded ahead for where batch 1 ends, lands right after."""
    store = memory()
    new_log(store)
    scripted = ScriptedStore(store)
    late = scripted.late_put(seg, nth=2)
    log = arrowlog.connect(scripted)
    part = log.partition("t", 0)
    part.end_offset()
    key1 = part.segment_key(10)
    gate = scripted.hold("get_range", key1, nth=1)
    run = Run(lambda: log.append_batches("t", batches(4)))
    assert late.reached.wait(10)
    gate.wait_reached()
    assert late.land()
    gate.release()
    run.join()
    assert run.error is None
    assert run.seen == [(0, 10), (10, 20), (20, 30), (30, 40)]
    assert fresh_segments(store) == run.seen
    got = arrowlog.connect(store).read("t").column("id").to_pylist()
    assert got == list(range(40))


def test_outcome_unknown_stops_the_stream_and_the_late_write_lands_alone() -> None:
    """Batch 1's PUT times out on every attempt until the deadline
    (AppendOutcomeUnknownError); batch 0 was reported, 2 and 3 never written;
    then the first attempt of batch 1 lands: the log is exactly batches 0, 1."""
    store = memory()
    new_log(store)
    scripted = ScriptedStore(store)
    late = scripted.late_put(seg, nth=2, times=10_000)
    config = LogConfig(retry=RetryPolicy(initial_backoff=0.01, max_backoff=0.02, deadline=0.3))
    log = arrowlog.connect(scripted, config=config)
    run = Run(lambda: log.append_batches("t", batches(4)))
    run.join()
    assert isinstance(run.error, AppendOutcomeUnknownError)
    assert run.seen == [(0, 10)]
    assert fresh_segments(store) == [(0, 10)]
    datas = {d for _, d in late.pending}
    assert len(datas) == 1  # every attempt sent the same segment
    assert late.land()
    while late.pending:
        assert not late.land()
    assert fresh_segments(store) == [(0, 10), (10, 20)]
    assert arrowlog.connect(store).read("t").column("id").to_pylist() == list(range(20))


def test_other_writer_between_stream_creation_and_first_put() -> None:
    """The stream predicts from a view of the log end that another writer
    outdates before the first PUT: every batch is encoded again for the real
    end, none lands on the other's offsets."""
    store = memory()
    new_log(store)
    other = arrowlog.connect(store)
    log = arrowlog.connect(store)
    log.partition("t", 0).end_offset()
    stream = log.append_batches("t", batches(3))
    other.append("t", batch(1000, 5))
    other.append("t", batch(1005, 5))
    # the writer's view is fresh (not stale), so it writes at 0, loses, and moves
    results = [(r.base_offset, r.next_offset) for r in stream]
    assert results == [(10, 20), (20, 30), (30, 40)]
    got = arrowlog.connect(store).read("t").column("id").to_pylist()
    assert got == list(range(1000, 1010)) + list(range(30))


def test_callers_loop_body_appending_to_the_same_partition() -> None:
    """The caller appends to the same PartitionLog between two results (its
    thread races the stream's writer thread): both land, no overlap."""
    store = memory()
    log = new_log(store)
    extra = 0
    results = []
    for r in log.append_batches("t", batches(4)):
        results.append((r.base_offset, r.next_offset))
        log.append("t", batch(1000 + extra, 3))
        extra += 3
    segs = fresh_segments(store)
    assert sorted(results) == results
    assert all((b, e) in segs for b, e in results)
    ends = [e for _, e in segs]
    assert [b for b, _ in segs] == [0, *ends[:-1]]  # contiguous
    ids = [i for i in arrowlog.connect(store).read("t").column("id").to_pylist() if i is not None]
    assert sorted(ids) == sorted(list(range(40)) + list(range(1000, 1012)))


def test_expected_offset_with_another_writer_before_the_first_put() -> None:
    store = memory()
    new_log(store)
    other = arrowlog.connect(store)
    log = arrowlog.connect(store)
    log.partition("t", 0).end_offset()
    stream = log.append_batches("t", batches(3), expected_offset=0)
    other.append("t", batch(1000, 5))
    with pytest.raises(OffsetMismatchError) as e:
        list(stream)
    assert e.value.log_end_offset == 5
    assert fresh_segments(store) == [(0, 5)]


def test_expected_offset_lost_reply_then_other_writer_takes_the_next_offset() -> None:
    """Batch 1's PUT times out and lands before the readback (ours); batch 2's
    PUT is held while another writer takes its offset: OffsetMismatchError at
    batch 2, batches 0 and 1 reported, nothing after."""
    store = memory()
    new_log(store)
    scripted = ScriptedStore(store)
    late = scripted.late_put(seg, nth=2)
    log = arrowlog.connect(scripted)
    part = log.partition("t", 0)
    part.end_offset()
    gate1 = scripted.hold("get_range", part.segment_key(10), nth=1)
    gate2 = scripted.hold("put_if_absent", seg, nth=3)  # batch 2 (batch 1 needed no retry)
    run = Run(lambda: log.append_batches("t", batches(5), expected_offset=0))
    assert late.reached.wait(10)
    gate1.wait_reached()
    assert late.land()
    gate1.release()
    gate2.wait_reached()
    arrowlog.connect(store).append("t", batch(1000, 4))
    gate2.release()
    run.join()
    assert isinstance(run.error, OffsetMismatchError)
    assert run.seen == [(0, 10), (10, 20)]
    assert fresh_segments(store) == [(0, 10), (10, 20), (20, 24)]


def test_bulk_load_outcome_unknown_then_late_landing_during_rerun_never_doubles(
    tmp_path: Any,
) -> None:
    """Run 1: chunk 1's PUT times out until the deadline. Run 2: its first PUT
    (chunk 1 again, new append id) is held while run 1's write lands: run 2
    meets OffsetMismatchError. Run 3 finds chunk 1 already there (checks it)
    and finishes. Every row once, in order."""
    store = open_store(str(tmp_path / "s"), {"fsync": False})
    new_log(store)
    data = [batch(0, 95)]
    short = LogConfig(retry=RetryPolicy(initial_backoff=0.01, max_backoff=0.02, deadline=0.3))
    s1 = ScriptedStore(store)
    late = s1.late_put(seg, nth=2, times=10_000)
    with pytest.raises(AppendOutcomeUnknownError):
        bulk_load(
            arrowlog.connect(s1, config=short).partition("t", 0),
            data,
            start_offset=0,
            rows_per_batch=10,
        )
    assert fresh_segments(store) == [(0, 10)]
    s2 = ScriptedStore(store)
    gate = s2.hold("put_if_absent", seg, nth=1)
    result: list[Any] = []

    def rerun() -> None:
        try:
            bulk_load(
                arrowlog.connect(s2).partition("t", 0), data, start_offset=0, rows_per_batch=10
            )
        except BaseException as e:  # noqa: BLE001
            result.append(e)

    t = threading.Thread(target=rerun, daemon=True)
    t.start()
    gate.wait_reached()
    assert late.land()
    gate.release()
    t.join(30)
    assert len(result) == 1 and isinstance(result[0], OffsetMismatchError)
    done = bulk_load(
        arrowlog.connect(store).partition("t", 0), data, start_offset=0, rows_per_batch=10
    )
    assert done.rows_skipped == 20 and done.end_offset == 95
    ids = arrowlog.connect(store).read("t").column("id").to_pylist()
    assert ids == list(range(95))


def test_bulk_load_progress_callback_failure_writes_at_most_the_batch_in_flight() -> None:
    """The progress callback raises after chunk 0: the stream is closed; the
    rerun resumes and nothing is doubled."""
    store = memory()
    new_log(store)
    data = [batch(0, 55)]

    def boom(_: Any) -> None:
        raise RuntimeError("progress failed")

    with pytest.raises(RuntimeError):
        bulk_load(
            arrowlog.connect(store).partition("t", 0),
            data,
            start_offset=0,
            rows_per_batch=10,
            progress=boom,
        )
    first = fresh_segments(store)
    assert 1 <= len(first) <= 3
    done = bulk_load(
        arrowlog.connect(store).partition("t", 0), data, start_offset=0, rows_per_batch=10
    )
    assert done.end_offset == 55
    assert arrowlog.connect(store).read("t").column("id").to_pylist() == list(range(55))


# ---------------------------------------------------------------------------
# Feature 2: the kept frames of large segments
# ---------------------------------------------------------------------------

BIG_FIELDS: list[pa.Field[Any]] = [
    pa.field("a", pa.int64()),
    pa.field("b", pa.int64()),
    pa.field("kind", pa.string()),
]
BIG_SCHEMA = pa.schema(BIG_FIELDS)
BIG_ROWS = 200_000


def big_batch(seed: int, kinds: tuple[str, str] = ("alpha", "beta")) -> pa.RecordBatch:
    rng = np.random.default_rng(seed)
    a = rng.integers(0, 2**62, BIG_ROWS)
    b = rng.integers(0, 2**62, BIG_ROWS)
    kind = [kinds[i % 2] for i in range(BIG_ROWS)]
    return pa.record_batch([pa.array(a), pa.array(b), pa.array(kind)], schema=BIG_SCHEMA)


def big_topic(store: Store, compression: str = "none") -> arrowlog.ArrowLog:
    log = arrowlog.connect(store)
    log.create_topic(
        "big",
        BIG_SCHEMA,
        config=TopicConfig(compression=compression, max_batch_bytes=64 * 1024 * 1024),  # type: ignore[arg-type]
    )
    return log


def stray_bytes(data: pa.RecordBatch, compression: str, before: int = 0) -> bytes:
    """The segment another writer would put at offset ``before`` of a fresh
    topic ``big``: same offsets and layout, its own header."""
    other = memory()
    log = big_topic(other, compression)
    if before:
        log.append("big", pa.Table.from_batches([data]).slice(0, before))
    log.append("big", data)
    part = log.partition("big", 0)
    return bytes(other.get(part.segment_key(before)))


@pytest.fixture(autouse=True)
def _clean_heads() -> Iterator[None]:
    HEADS.clear()
    yield
    HEADS.clear()


def swap(store: Store, key: str, data: bytes) -> None:
    """The key freed (retention, compaction, vacuum) and taken by another object."""
    store.delete(key)
    store.put_if_absent(key, data)


TAGS = pytest.mark.parametrize("tags", [True, False], ids=["tagged", "untagged"])


def reader_of(store: Store, tags: bool) -> arrowlog.ArrowLog:
    """A reader on ``store``, through a store that reports no entity tags
    unless ``tags``."""
    return arrowlog.connect(store if tags else Untagged(store))


@TAGS
@pytest.mark.parametrize("kept", [True, False], ids=["frame-kept", "frame-dropped"])
def test_a_stray_with_identical_column_bytes_is_refused(kept: bool, tags: bool) -> None:
    """FINDING 3 (fixed): a stray at a freed key with the indexed segment's
    column bytes under another header is refused, whether this process kept
    the segment's frame or not, and whether the store has entity tags."""
    store = memory()
    writer = big_topic(store)
    data = big_batch(1)
    writer.append("big", data)
    reader = reader_of(store, tags)
    part = reader.partition("big", 0)
    key = part.segment_key(0)
    got = reader.partition("big", 0).read(columns=["a"])
    assert got.column("a").equals(pa.chunked_array([data["a"]]))
    original = bytes(store.get(key))
    stray = stray_bytes(data, "none")
    assert stray != original and len(stray) == len(original)
    swap(store, key, stray)
    if not kept:
        HEADS.clear()
    with pytest.raises(CorruptSegmentError):
        reader.partition("big", 0).read(columns=["a"])


@TAGS
@pytest.mark.parametrize("kept", [True, False], ids=["frame-kept", "frame-dropped"])
def test_a_stray_never_gets_the_kept_frames_dictionary(kept: bool, tags: bool) -> None:
    """FINDING 3 (fixed), dictionary variant: the stray stores other strings
    behind the same compressed index bytes; the kept frame's dictionary is
    never applied to them."""
    store = memory()
    writer = big_topic(store, "zstd")
    writer.append("big", big_batch(2, ("alpha", "beta")))
    reader = reader_of(store, tags)
    part = reader.partition("big", 0)
    key = part.segment_key(0)
    assert part.segments()[0].size >= 1024 * 1024
    reader.partition("big", 0).read(columns=["kind"])
    swap(store, key, stray_bytes(big_batch(2, ("gamma", "delta")), "zstd"))  # same a, b
    if not kept:
        HEADS.clear()
    with pytest.raises(CorruptSegmentError):
        reader.partition("big", 0).read(columns=["kind"])


@TAGS
def test_kept_frame_with_different_column_bytes_is_refused(tags: bool) -> None:
    store = memory()
    writer = big_topic(store)
    writer.append("big", big_batch(1))
    reader = reader_of(store, tags)
    key = reader.partition("big", 0).segment_key(0)
    reader.partition("big", 0).read(columns=["b"])
    swap(store, key, stray_bytes(big_batch(9), "none"))
    with pytest.raises(CorruptSegmentError):
        reader.partition("big", 0).read(columns=["b"])


@TAGS
def test_column_read_with_a_kept_frame_checks_which_object_is_at_the_key(tags: bool) -> None:
    """With a kept frame, a column read sends one request of the segment, whose
    entity tag says which object is at the key; without tags, two at once:
    the frame again (which says it) and the column."""
    inner = memory()
    writer = big_topic(inner)
    data = big_batch(3)
    writer.append("big", data)
    counting = CountingStore(inner) if tags else Untagged(inner)
    reader = arrowlog.connect(counting)
    reader.partition("big", 0).read(columns=["a"])
    counting.reset()
    got = reader.partition("big", 0).read(columns=["b"])
    assert got.column("b").equals(pa.chunked_array([data["b"]]))
    segment_reads = {k: n for k, n in counting.keys_read.items() if seg(k)}
    requests = 1 if tags else 2
    assert list(segment_reads.values()) == [requests]
    assert counting.counts["get_range"] == requests and counting.counts["get"] == 0


def test_flipped_column_byte_is_detected_with_a_kept_frame() -> None:
    store = memory()
    writer = big_topic(store)
    writer.append("big", big_batch(4))
    reader = arrowlog.connect(store)
    part = reader.partition("big", 0)
    key = part.segment_key(0)
    reader.partition("big", 0).read(columns=["a"])
    raw = bytearray(store.get(key))
    raw[len(raw) // 2] ^= 0x01  # in a column, past the frame
    swap(store, key, bytes(raw))
    for cols in (["a"], ["b"], ["a", "b"]):
        try:
            got = reader.partition("big", 0).read(columns=cols)
        except CorruptSegmentError:
            continue
        # untouched columns may be read; they must equal the original
        for c in cols:
            assert got.column(c).equals(pa.chunked_array([big_batch(4)[c]]))


@TAGS
def test_frame_corrupted_in_the_store_after_it_was_kept(tags: bool) -> None:
    """A bit flipped in the stored frame after this process kept it: the
    column's tag (or the frame read beside it) differs from the kept one, the
    head is read again and fails its CRC; a whole read catches the flip too."""
    store = memory()
    writer = big_topic(store)
    data = big_batch(5)
    writer.append("big", data)
    reader = reader_of(store, tags)
    key = reader.partition("big", 0).segment_key(0)
    reader.partition("big", 0).read(columns=["a"])
    raw = bytearray(store.get(key))
    raw[200] ^= 0x10
    swap(store, key, bytes(raw))
    with pytest.raises(CorruptSegmentError):  # another tag, or frame, than the kept one
        reader.partition("big", 0).read(columns=["a"])
    with pytest.raises(CorruptSegmentError):
        reader.partition("big", 0).read()


def test_head_cache_is_bounded() -> None:
    cache = HeadCache(limit_bytes=10_000)
    for i in range(100):
        cache.keep(f"k{i}", "id", b"x" * 3000, None)
    assert len(cache) == 3
    cache.keep("huge", "id", b"x" * 20_000, "tag")
    assert cache.get("huge", "id") is None
    assert cache._held <= 10_000


def test_schema_larger_than_16_kib_column_read_twice() -> None:
    """A segment whose schema message is past the first 16 KiB: column reads
    stay right, with and without a kept frame, and a stray is refused."""
    store = memory()
    fields = [pa.field(f"c{i:03d}_" + "x" * 60, pa.int64()) for i in range(300)]
    schema = pa.schema(fields)
    log = arrowlog.connect(store)
    log.create_topic(
        "wide",
        schema,
        config=TopicConfig(compression="none", max_batch_bytes=64 * 1024 * 1024),  # type: ignore[arg-type]
    )
    rows = 600
    cols = [pa.array(np.arange(rows, dtype=np.int64) + i * 1000) for i in range(300)]
    data = pa.record_batch(cols, schema=schema)
    log.append("wide", data)
    reader = arrowlog.connect(store)
    name = schema.names[7]
    for _ in range(2):
        got = reader.partition("wide", 0).read(columns=[name, schema.names[250]])
        assert got.column(0).to_pylist() == cols[7].to_pylist()
        assert got.column(1).to_pylist() == cols[250].to_pylist()


def test_compacted_objects_and_markers_read_by_columns() -> None:
    """A transactional topic whose large segments are compacted: column reads
    before and after compaction give the same rows; markers never appear."""
    store = memory()
    log = big_topic(store)
    p = log.producer(transactional_id="tx")
    p.init_transactions()
    data = [big_batch(10), big_batch(11)]
    for b in data:
        p.begin_transaction()
        p.send("big", b, partition=0)
        p.commit_transaction()
    reader = arrowlog.connect(store)
    before = reader.partition("big", 0).read(columns=["b", "a"])
    expected = pa.Table.from_batches(data).select(["b", "a"])
    assert before.equals(expected)
    log.maintenance.compact(["big"], target_bytes=64 * 1024 * 1024)
    after = arrowlog.connect(store).read("big", columns=["b", "a"])
    assert after.equals(expected)
    again = reader.partition("big", 0).read(columns=["b", "a"])
    assert again.equals(expected)


def test_store_refusing_a_put_until_the_deadline_stops_after_the_batch_before() -> None:
    store = memory()
    new_log(store)
    scripted = ScriptedStore(store)
    scripted.throttle("put_if_absent", seg, nth=2, times=10_000)
    config = LogConfig(retry=RetryPolicy(initial_backoff=0.01, max_backoff=0.02, deadline=0.3))
    log = arrowlog.connect(scripted, config=config)
    run = Run(lambda: log.append_batches("t", batches(5)))
    run.join()
    assert isinstance(run.error, arrowlog.TransientStoreError)
    assert run.seen == [(0, 10)]
    assert fresh_segments(store) == [(0, 10)]
    puts = {k for op, k in scripted.history if op == "put_if_absent" and seg(k)}
    assert len(puts) == 2  # batch 2 and later never tried


def test_compressed_stream_with_dictionaries_reads_back_as_a_loop_would() -> None:
    store = memory()
    log = arrowlog.connect(store)
    log.create_topic("z", SCHEMA, partitions=2, config=TopicConfig(compression="zstd"))  # type: ignore[arg-type]
    words = ["a", "bb", "ccc"]
    given = [
        pa.Table.from_batches(
            [
                pa.record_batch(
                    [pa.array(range(i, i + 50)), pa.array([words[j % 3] for j in range(50)])],
                    schema=SCHEMA,
                )
            ]
            * 2
        )
        for i in range(0, 500, 50)
    ]
    results = list(log.append_batches("z", given, partition=1, expected_offset=0))
    assert [(r.partition, r.base_offset) for r in results] == [(1, 100 * i) for i in range(10)]
    assert arrowlog.connect(store).read("z", 1).equals(pa.concat_tables(given))
    assert arrowlog.connect(store).partition("z", 0).end_offset(refresh=True) == 0


def _scan_after_swap(clear: bool) -> None:
    store = memory()
    writer = big_topic(store)
    data = big_batch(1)
    writer.append("big", data)
    plan = plan_scan(writer, ["big"])
    schema = output_schema(projected(BIG_SCHEMA, ["a"]))
    first = [b for t in plan.tasks for b in read_task(store, t, schema, ["a"])]
    assert sum(b.num_rows for b in first) == BIG_ROWS
    key = writer.partition("big", 0).segment_key(0)
    swap(store, key, stray_bytes(data, "none"))
    if clear:
        HEADS.clear()
    with pytest.raises(CorruptSegmentError, match="not the segment this scan planned"):
        [b for t in plan.tasks for b in read_task(store, t, schema, ["a"])]


def test_scan_task_with_a_kept_frame_refuses_the_stray() -> None:
    _scan_after_swap(clear=False)


def test_scan_task_without_a_kept_frame_refuses_the_stray() -> None:
    _scan_after_swap(clear=True)


def test_callers_loop_body_reading_the_partition_while_the_writer_appends() -> None:
    """Between two results the caller reads and syncs the same PartitionLog
    while the writer thread appends the next batch: every read is a
    contiguous prefix of the stream, and the stream's offsets are untouched."""
    store = memory()
    log = new_log(store)
    part = log.partition("t", 0)
    seen = []
    for r in part.append_batches(batches(30)):
        seen.append((r.base_offset, r.next_offset))
        end = part.end_offset(refresh=True)
        assert end >= r.next_offset
        ids = part.read(0, end).column("id").to_pylist()
        assert ids == list(range(end))
    assert seen == [(10 * i, 10 * i + 10) for i in range(30)]
    assert fresh_segments(store) == seen
