"""Attacks on a new client's read leaving small segments to the reading
thread (arrowlog/partition/listing.py, Listing._read_whole): the listing's
threads take a small segment's header from its bytes (checked by the
header's own CRC only) and keep the bytes; the reading thread checks them
(whole-file CRC, offsets, append id) and decodes them. Corrupt bodies under
intact headers, truncated objects, sizes at the threshold, compressed and
dictionary-encoded segments, reads inside others sharing the kept bytes,
filtered and transactional reads, several partitions: every result is what a
stream (which never prefetches) returns, every failure names the key, the
chain is the one a plain listing builds, and the budget comes back."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Iterator
from typing import Any, Literal

import pyarrow as pa
import pyarrow.compute as pc
import pytest

import arrowlog
from arrowlog import TopicConfig
from arrowlog.config import Compression
from arrowlog.format.segment import decode_segment
from arrowlog.format.segment.framing import CRC_VALUE, regions
from arrowlog.format.topic import segment_key
from arrowlog.partition import fetch, listing, prefetch, units
from arrowlog.partition.fetch import DECODE_AHEAD_MIN_BYTES
from arrowlog.storage import Blob, Store
from arrowlog.storage.memory import MemoryStore
from arrowlog.testing.scripted import Gate, ScriptedStore
from tests.support.schedules import FAST, Background, wait_until

FIELDS: list[tuple[str, pa.DataType]] = [
    ("x", pa.int64()),
    ("y", pa.string()),
    ("d", pa.dictionary(pa.int32(), pa.string())),
]
SCHEMA = pa.schema(FIELDS)
SEGMENTS = 12
BAD = 5  # the segment of offsets 10 and 11


@pytest.fixture(autouse=True)
def _budget_comes_back() -> Iterator[None]:
    assert prefetch.BUDGET.held == 0
    yield
    assert prefetch.BUDGET.held == 0, "a read kept bytes it did not hand back"


def two(i: int, text: str) -> pa.RecordBatch:
    d = pa.array([f"k{i % 3}", f"k{(i + 1) % 3}"]).dictionary_encode()
    return pa.record_batch(
        {"x": [2 * i, 2 * i + 1], "y": [text, text], "d": d.cast(SCHEMA.field("d").type)},
        schema=SCHEMA,
    )


def written(
    store: Store,
    segments: int = SEGMENTS,
    compression: Compression = Compression.NONE,
    text: Callable[[int], str] = lambda i: f"t{i}",
    partitions: int = 1,
) -> None:
    """Segment i holds offsets 2i and 2i + 1 (x = the offset); no checkpoint."""
    log = arrowlog.connect(store, config=FAST)
    config = TopicConfig(checkpoint_interval=900, compression=compression)
    log.create_topic("t", SCHEMA, partitions, config=config)
    for p in range(partitions):
        part = log.partition("t", p)
        for i in range(segments):
            part.append(two(i, text(i)))


def streamed(
    store: Store, columns: list[str] | None = None, start: int | None = None, end: int | None = None
) -> pa.Table:
    """What a stream of a new client (no prefetch: heads read) returns."""
    part = arrowlog.connect(store, config=FAST).partition("t", 0)
    batches = list(part.iter_batches(start, end, columns=columns))
    return pa.Table.from_batches(batches, schema=fetch.projected(SCHEMA, columns))


def replaced(store: Store, key: str, change: Callable[[bytearray], bytes]) -> None:
    data = bytearray(store.get(key))
    new = change(data)
    store.delete(key)
    store.put_if_absent(key, new)
    assert bytes(store.get(key)) == new


def region_offset(data: bytearray, where: str) -> int:
    """A byte of the segment outside its header and the header's CRC."""
    (lo, hi), (flo, _) = regions(data, "k")
    slots = [m.start(1) for m in CRC_VALUE.finditer(data)]
    if where == "batch":
        return hi + (flo - hi) // 2
    if where == "footer":
        return flo + 4
    if where == "head-crc-slot":
        return slots[0] + 3
    if where == "footer-crc-slot":
        return slots[1] + 3
    if where == "head-field-name":
        at = data.find(b"\x01\x00\x00\x00y\x00", lo, hi)
        assert at > 0
        return at + 4
    raise AssertionError(where)


def flipped(where: str) -> Callable[[bytearray], bytes]:
    def change(data: bytearray) -> bytes:
        if where == "truncated":
            (_, hi), _ = regions(data, "k")
            return bytes(data[: hi + 40])  # the head whole, the rest cut off
        at = region_offset(data, where)
        # a hex digit stays a hex digit (a slot must still parse as one)
        data[at] = ord("0") if data[at] != ord("0") else ord("1")
        return bytes(data)

    return change


REGIONS = ["batch", "footer", "head-crc-slot", "footer-crc-slot", "head-field-name", "truncated"]


def read_by(how: str, client: arrowlog.ArrowLog, columns: list[str] | None) -> pa.Table:
    if how == "partition":
        return client.partition("t", 0).read(columns=columns)
    if how == "log":
        return client.read("t", 0, columns=columns)
    if how == "whole topic":
        return client.read("t", columns=columns)
    if how == "read_committed":
        return client.consumer(isolation_level="read_committed").read("t", 0, columns=columns)
    if how == "read_uncommitted":
        c = client.consumer(isolation_level="read_uncommitted")
        return c.read("t", 0, columns=columns)
    if how == "read_many":
        c = client.consumer(isolation_level="read_committed")
        return c.read_many({("t", 0): (None, None)}, columns=columns)[("t", 0)]
    raise AssertionError(how)


READS = ["partition", "log", "whole topic", "read_committed", "read_uncommitted", "read_many"]


# every region and every read, each region read one way (their product, 108
# cases over the three stores, found nothing more than this diagonal)
@pytest.mark.parametrize(("where", "how"), list(zip(REGIONS, READS, strict=True)))
def test_a_small_segment_corrupt_under_an_intact_header_fails_the_read_naming_its_key(
    store: Store, where: str, how: str
) -> None:
    """The listing takes the header (its own CRC holds) and chains past the
    segment, as a plain listing does; the read then fails on it, naming it,
    never returning its rows or skipping it; the same client's chain ends
    where the log does, and reads around the segment are right."""
    written(store)
    key = segment_key("t", 0, 2 * BAD)
    replaced(store, key, flipped(where))
    for columns in (None, ["x"], ["d", "y"]):
        client = arrowlog.connect(store, config=FAST)
        with pytest.raises(arrowlog.CorruptSegmentError, match=key):
            read_by(how, client, columns)
        part = client.partition("t", 0)
        assert part.end_offset() == 2 * SEGMENTS, (where, columns)
        before = part.read(0, 2 * BAD, columns=columns)
        assert before.equals(streamed(store, columns, 0, 2 * BAD))
        after = part.read(2 * BAD + 2, columns=columns)
        assert after.equals(streamed(store, columns, 2 * BAD + 2, 2 * SEGMENTS))
        with pytest.raises(arrowlog.CorruptSegmentError, match=key):
            part.read(columns=columns)  # a warm read of it fails the same way
    # a stream, which reads heads, agrees
    plain = arrowlog.connect(store, config=FAST).partition("t", 0)
    with pytest.raises(arrowlog.CorruptSegmentError, match=key):
        list(plain.iter_batches())
    assert plain.end_offset() == 2 * SEGMENTS


def test_a_small_segment_whose_header_crc_fails_ends_the_read_there(store: Store) -> None:
    """A header that fails its own CRC is never skipped: the listing's
    chain raises, naming the key, as a plain listing does."""
    written(store)
    key = segment_key("t", 0, 2 * BAD)

    def change(data: bytearray) -> bytes:
        at = data.find(b'"append_id":"')
        assert at > 0
        at += len(b'"append_id":"')
        data[at] = ord("a") if data[at] != ord("a") else ord("b")
        return bytes(data)

    replaced(store, key, change)
    with pytest.raises(arrowlog.CorruptSegmentError, match=key):
        arrowlog.connect(store, config=FAST).read("t", 0)
    with pytest.raises(arrowlog.CorruptSegmentError, match=key):
        list(arrowlog.connect(store, config=FAST).partition("t", 0).iter_batches())


class Decodes:
    """Which part decoded which segment: the listing (its lane, whose tasks
    the waiting thread may run itself) or the read (units)."""

    def __init__(self, monkeypatch: pytest.MonkeyPatch) -> None:
        self.seen: list[tuple[str, str]] = []
        self._lock = threading.Lock()
        real = decode_segment

        def counted(where: str) -> Callable[..., Any]:
            def decode(data: Blob, *, key: str, **kwargs: Any) -> Any:
                with self._lock:
                    self.seen.append((key, where))
                return real(data, key=key, **kwargs)

            return decode

        monkeypatch.setattr(listing, "decode_segment", counted("listing"))
        monkeypatch.setattr(units, "decode_segment", counted("read"))

    def parts(self, key: str) -> list[str]:
        return [t for k, t in self.seen if k == key]


@pytest.mark.parametrize("compression", [Compression.NONE, Compression.LZ4, Compression.ZSTD])
@pytest.mark.parametrize(("shift", "columns"), [(-1, None), (0, ["x"]), (1, ["d"])])
def test_segments_at_the_threshold_are_decoded_once_on_the_side_their_size_says(
    store: Store,
    monkeypatch: pytest.MonkeyPatch,
    compression: Compression,
    shift: int,
    columns: list[str] | None,
) -> None:
    """The threshold moved onto the size of one segment (times the
    compressed ratio), the others smaller and larger: each segment is
    decoded once, by the listing's threads if large enough, by the reading
    thread if not; the table is the stream's; a corrupt body fails either way."""
    written(store, compression=compression, text=lambda i: "z" * (40 * i))
    sizes = {o.key: o.size for o in store.list("t/0/segments/") if o.key.endswith(".arrow")}
    middle = segment_key("t", 0, 2 * (SEGMENTS // 2))
    ratio = 1 if compression is Compression.NONE else fetch.COMPRESSED_RATIO
    threshold = sizes[middle] * ratio + shift
    monkeypatch.setattr(fetch, "DECODE_AHEAD_MIN_BYTES", threshold)
    decodes = Decodes(monkeypatch)
    table = arrowlog.connect(store, config=FAST).read("t", 0, columns=columns)
    for key, size in sizes.items():
        parts = decodes.parts(key)
        large = size * ratio >= threshold
        assert parts == ["listing" if large else "read"], (key, size, parts)
    assert table.equals(streamed(store, columns))
    replaced(store, middle, flipped("batch"))
    with pytest.raises(arrowlog.CorruptSegmentError, match=middle):
        arrowlog.connect(store, config=FAST).read("t", 0, columns=columns)


@pytest.mark.parametrize("compression", [Compression.NONE, Compression.ZSTD])
def test_small_and_large_segments_mixed_read_as_a_stream(
    store: Store, compression: Compression
) -> None:
    """Small segments (kept as bytes) between large ones (decoded by the
    listing) under the real threshold, of every column set."""
    big = "q" * DECODE_AHEAD_MIN_BYTES  # at least the threshold, compressed or not

    def text(i: int) -> str:
        return big + str(i) if i % 3 == 1 else f"s{i}"

    written(store, segments=7, compression=compression, text=text)
    for columns in (None, ["x"], ["y", "x"], ["d"]):
        table = arrowlog.connect(store, config=FAST).read("t", 0, columns=columns)
        assert table.equals(streamed(store, columns)), columns


@pytest.mark.parametrize("outer", [None, ["x"], ["y"], ["d", "x"]], ids=["all", "x", "y", "d-x"])
def test_reads_inside_a_read_take_its_small_segments_right(
    store: Store, outer: list[str] | None
) -> None:
    """A read under way in the thread (its listing keeps the bytes): a
    filtered read, a stream, a column read of other columns, a range read, a
    read_committed consumer read inside it each return what a stream does,
    and the outer read, whose kept bytes they took, fetches the rest itself."""
    written(store)
    where = [("x", ">=", 7), ("x", "<", 19)]
    client = arrowlog.connect(store, config=FAST)
    part = client.partition("t", 0)
    expected_filtered = streamed(store, ["x", "y"]).filter(
        (pc.field("x") >= 7) & (pc.field("x") < 19)
    )
    with part.reading(columns=outer):
        filtered = part.read(columns=["x", "y"], where=where)
        assert filtered.equals(expected_filtered)
        stream = pa.Table.from_batches(
            list(part.iter_batches(4, 16, columns=["d"])), schema=fetch.projected(SCHEMA, ["d"])
        )
        assert stream.equals(streamed(store, ["d"], 4, 16))
        assert part.read(6, 20, columns=["y"]).equals(streamed(store, ["y"], 6, 20))
        consumer = client.consumer(isolation_level="read_committed")
        assert consumer.read("t", 0, columns=["x"]).equals(streamed(store, ["x"]))
        whole = part.read(columns=outer)
        assert whole.equals(streamed(store, outer))
    assert part.read(columns=outer).equals(streamed(store, outer))


def test_two_threads_reading_one_object_with_a_corrupt_small_segment(store: Store) -> None:
    """Kept bytes fit any read, so a read in one thread may take what
    another's listing kept: the one that takes the corrupt segment's bytes
    fails naming it, the other fails or reads its range right."""
    written(store)
    key = segment_key("t", 0, 2 * BAD)
    replaced(store, key, flipped("batch"))
    for _ in range(5):
        part = arrowlog.connect(store, config=FAST).partition("t", 0)
        barrier = threading.Barrier(3)
        out: dict[str, Any] = {}

        def read(
            name: str,
            start: int | None,
            end: int | None,
            columns: list[str] | None,
            part: arrowlog.PartitionLog = part,
            barrier: threading.Barrier = barrier,
            out: dict[str, Any] = out,
        ) -> None:
            barrier.wait()
            try:
                out[name] = part.read(start, end, columns=columns)
            except arrowlog.CorruptSegmentError as e:
                out[name] = e

        calls = {"all": (None, None, ["x"]), "before": (0, 10, ["y"]), "after": (12, 24, None)}
        threads = [threading.Thread(target=read, args=(n, *c)) for n, c in calls.items()]
        for t in threads:
            t.start()
        for t in threads:
            t.join(30)
            assert not t.is_alive()
        assert isinstance(out["all"], arrowlog.CorruptSegmentError) and key in str(out["all"])
        assert out["before"].equals(streamed(store, ["y"], 0, 10))
        assert out["after"].equals(streamed(store, None, 12, 24))


def test_a_read_of_every_partition_with_a_corrupt_small_segment_in_one(store: Store) -> None:
    written(store, partitions=3)
    key = segment_key("t", 1, 2 * BAD)
    replaced(store, key, flipped("batch"))
    for isolation in ("read_committed", "read_uncommitted"):
        consumer = arrowlog.connect(store, config=FAST).consumer(isolation_level=isolation)
        with pytest.raises(arrowlog.CorruptSegmentError, match=key):
            consumer.read("t")
        assert consumer.read("t", 2).num_rows == 2 * SEGMENTS


def test_a_transactional_log_of_small_segments_read_by_columns_equals_a_stream(
    store: Store,
) -> None:
    """Markers (control records, whose columns are their own) and aborted
    records among small segments kept as bytes, read of some columns."""
    log = arrowlog.connect(store, config=FAST)
    log.create_topic("t", SCHEMA, config=TopicConfig(checkpoint_interval=900))
    p = log.producer(transactional_id="tx")
    p.init_transactions()
    for r in range(4):
        p.begin_transaction()
        p.send("t", two(10 * r, "tx"), partition=0)
        p.send("t", two(10 * r + 1, "tx"), partition=0)
        log.append("t", two(10 * r + 5, "plain"))
        if r == 2:
            p.abort_transaction()
        else:
            p.commit_transaction()
    for isolation in ("read_committed", "read_uncommitted"):
        for columns in (None, ["x"], ["d"]):
            reader = arrowlog.connect(store, config=FAST)
            table = reader.consumer(isolation_level=isolation).read("t", 0, columns=columns)
            plain = arrowlog.connect(store, config=FAST).consumer(isolation_level=isolation)
            batches = list(plain.iter_batches("t", 0, columns=columns))
            expected = pa.Table.from_batches(batches, schema=fetch.projected(SCHEMA, columns))
            assert table.equals(expected), (isolation, columns)


# --- schedules: the listing has kept small segments' bytes, held at a later GET ------


class Recording(ScriptedStore):
    """Also which whole GETs have come back."""

    def __init__(self, inner: Store) -> None:
        super().__init__(inner)
        self.got: set[str] = set()

    def get(self, key: str) -> Blob:
        data = super().get(key)
        self.got.add(key)
        return data


def held_after_kept(
    store: Store, read: Callable[[arrowlog.ArrowLog], object], held: str, kept: list[str]
) -> tuple[Gate, Background]:
    """A new client's read whose listing has fetched ``kept`` whole and is
    held at the GET of ``held``."""
    recording = Recording(store)
    gate = recording.hold("get", held)
    reader = arrowlog.connect(recording, config=FAST)
    run = Background(lambda: read(reader))
    gate.wait_reached()
    wait_until(lambda: all(k in recording.got for k in kept), "the listing's GETs")
    return gate, run


def a_whole_read_held_at_its_last_get(
    store: Store, columns: list[str] | None
) -> tuple[Gate, Background]:
    """A new client's read of the whole partition, held at the listing's GET of
    the last segment once it has kept every other one: (gate, run)."""
    last = segment_key("t", 0, 2 * (SEGMENTS - 1))
    kept = [segment_key("t", 0, 2 * i) for i in range(SEGMENTS - 1)]

    def read(reader: arrowlog.ArrowLog) -> object:
        return reader.read("t", 0, columns=columns)

    return held_after_kept(store, read, last, kept)


@pytest.mark.parametrize("columns", [None, ["x"]], ids=["all", "x"])
def test_a_small_segment_corrupted_after_the_listing_kept_it_reads_as_kept(
    store: Store, columns: list[str] | None
) -> None:
    written(store)
    expected = streamed(store, columns)
    key = segment_key("t", 0, 2 * BAD)
    gate, run = a_whole_read_held_at_its_last_get(store, columns)
    try:
        replaced(store, key, flipped("batch"))
    finally:
        gate.release()
    got = run.result()
    assert isinstance(got, pa.Table) and got.equals(expected)


@pytest.mark.parametrize("columns", [None, ["x"]], ids=["all", "x"])
def test_a_small_segment_repaired_after_the_listing_kept_it_corrupt_fails_naming_it(
    store: Store, columns: list[str] | None
) -> None:
    """The read checks the bytes the listing kept, not the key's object now:
    it fails, naming the key, never returning other rows; a read after it
    reads the repaired segment."""
    written(store)
    expected = streamed(store, columns)
    key = segment_key("t", 0, 2 * BAD)
    good = bytes(store.get(key))
    replaced(store, key, flipped("batch"))
    gate, run = a_whole_read_held_at_its_last_get(store, columns)
    try:
        replaced(store, key, lambda _: good)
    finally:
        gate.release()
    with pytest.raises(arrowlog.CorruptSegmentError, match=key):
        run.result()
    assert arrowlog.connect(store, config=FAST).read("t", 0, columns=columns).equals(expected)


DELAY_MS = 100


def one(v: int) -> pa.RecordBatch:
    return pa.record_batch({"x": [v], "y": ["s"], "d": two(0, "")["d"][:1]}, schema=SCHEMA)


def stray_at(key: str, values: list[int]) -> bytes:
    """A valid segment of topic t at ``key`` from another log: another
    append id, other records, the same offsets."""
    other = MemoryStore()
    log = arrowlog.connect(other)
    log.create_topic("t", SCHEMA, config=TopicConfig(checkpoint_interval=900))
    for v in values:
        log.append("t", one(v))
    return bytes(other.get(key))


@pytest.mark.parametrize("columns", [None, ["x"]], ids=["all", "x"])
@pytest.mark.parametrize("isolation", ["read_uncommitted", "read_committed"])
def test_a_stray_at_the_freed_key_the_held_listing_reads_next_is_never_returned(
    store: Store,
    columns: list[str] | None,
    isolation: Literal["read_committed", "read_uncommitted"],
) -> None:
    """The reader opens from the checkpoint of [0, 8) and lists 8, 9, 10; its
    listing has kept 8 and 9 and is held at 10's GET; a writer appends to 30,
    deletes the records below 20, vacuum removes 0..19 and a stray lands at
    freed key 10, the next one the listing reads."""
    config = TopicConfig(checkpoint_interval=8, delete_delay_ms=DELAY_MS)
    log = arrowlog.connect(store, config=FAST)
    log.create_topic("t", SCHEMA, config=config)
    for v in range(11):
        log.append("t", one(v))
    held = segment_key("t", 0, 10)

    def read(reader: arrowlog.ArrowLog) -> object:
        c = reader.consumer(isolation_level=isolation)
        return c.read("t", 0, columns=columns).column("x").to_pylist()

    gate, run = held_after_kept(store, read, held, [segment_key("t", 0, 8), segment_key("t", 0, 9)])
    try:
        for v in range(11, 30):
            log.append("t", one(v))
        log.delete_records("t", 0, 20)
        time.sleep(DELAY_MS / 1000 + 2.1)
        removed = {r.key for r in log.maintenance.vacuum()}
        assert held in removed
        store.put_if_absent(held, stray_at(held, [700 + v for v in range(12)]))
    finally:
        gate.release()
    try:
        got = run.result()
    except arrowlog.OffsetOutOfRangeError:
        return
    assert isinstance(got, list)
    assert not any(v >= 700 for v in got), got
    assert got in (list(range(10)), list(range(11)), list(range(20, 30))), got


class Stop(BaseException):
    pass


@pytest.mark.parametrize("nth", [1, 6, SEGMENTS])
def test_an_interrupt_in_the_reading_threads_decode_of_kept_bytes_gives_the_budget_back(
    store: Store, monkeypatch: pytest.MonkeyPatch, nth: int
) -> None:
    """The reading thread now decodes what the listing kept: an interrupt
    there (as a KeyboardInterrupt) leaves nothing held, and the same object
    reads right afterwards."""
    written(store)
    expected = streamed(store)
    real = decode_segment
    calls = [0]

    def interrupted(data: Blob, *, key: str, **kwargs: Any) -> Any:
        calls[0] += 1
        if calls[0] == nth:
            raise Stop
        return real(data, key=key, **kwargs)

    monkeypatch.setattr(units, "decode_segment", interrupted)
    part = arrowlog.connect(store, config=FAST).partition("t", 0)
    with pytest.raises(Stop):
        part.read()
    assert prefetch.BUDGET.held == 0
    assert part.read().equals(expected)
