"""Attacks on column reads that trust a kept frame by the store's entity tag
(commit ae84675: ``Store.get_range_tagged``, ``partition.heads``).

The guarantee under attack: a read returns exactly the records the log's index
names at each offset (by append id), or a typed error; never the rows of a
stray that now sits at a freed key, never a mix of two objects, and read-only
paths never write.

A *stray* here is the hardest kind: the very same batch re-encoded under
another header (another append id), so its column bytes are byte for byte the
kept segment's and every column CRC passes. Only the object's identity (its
tag, or its frame) can tell it apart. The reader (``log.read``) must then
refuse it (``CorruptSegmentError``: "not the log's segment").

Tests marked ``xfail(strict=True, reason="FINDING: ...")`` expose a real
violation; the others document what held.

Origin: the attack on entity tags (was tests/attack/test_tag_attack.py).
"""

from __future__ import annotations

import dataclasses
import json
import os
import signal
import threading
import time
import types
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa
import pytest

import arrowlog
from arrowlog import Compression, CorruptSegmentError, TopicConfig
from arrowlog.errors import SegmentNotFoundError, TransientStoreError
from arrowlog.format.segment import decode_segment, encode
from arrowlog.format.segment.column_table import COLUMNS_KEY, ColumnTable
from arrowlog.partition import SegmentRef
from arrowlog.partition.fetch import COLUMN_READ_MIN_BYTES, fetch_segment
from arrowlog.partition.heads import HEADS
from arrowlog.storage import Blob, ObjectInfo, Store
from arrowlog.storage import local as local_store
from arrowlog.storage.local import LocalStore
from arrowlog.storage.memory import MemoryStore
from arrowlog.storage.wrappers import CountingStore
from arrowlog.testing.scripted import ScriptedStore, _Rule
from tests.support.stores import Untagged

ROWS = 70_000
SCHEMA = pa.record_batch(
    {"a": pa.array([], pa.int64()), "b": pa.array([], pa.float64()), "s": pa.array([], pa.string())}
).schema
# "a" and "s" lie more than 256 KiB apart ("b" between): two ranged GETs
COLUMNS = ["a", "s"]
SEG = "t/0/segments/*"


def big(seed: int = 0, rows: int = ROWS) -> pa.RecordBatch:
    rng = np.random.default_rng(seed)
    return pa.record_batch(
        {
            "a": pa.array(np.arange(rows, dtype=np.int64) + seed * 10**6),
            "b": pa.array(rng.random(rows)),
            "s": pa.array([f"r{seed}-{i}" for i in range(rows)]),
        },
        schema=SCHEMA,
    )


@pytest.fixture(autouse=True)
def _fresh_heads() -> Iterator[None]:
    HEADS.clear()  # every test starts as a process that has seen no frame
    yield
    HEADS.clear()


def make_topic(store: Store, *, schema: pa.Schema = SCHEMA, seed: int = 0) -> pa.RecordBatch:
    log = arrowlog.connect(store)
    log.create_topic("t", schema, config=TopicConfig(compression=Compression.NONE))
    batch = big(seed)
    if schema is not SCHEMA:
        batch = batch.replace_schema_metadata(None).cast(schema)
    log.append("t", batch)
    return batch


def columns_of(data: bytes, key: str) -> list[bytes]:
    """The bytes of each column of a segment, by its column table."""
    schema = pa.ipc.open_file(pa.py_buffer(data)).schema
    table = ColumnTable.parse((schema.metadata or {})[COLUMNS_KEY], len(schema))
    assert table is not None, key
    return [data[lo:hi] for lo, hi, _ in table.columns]


def stray_of(store: Store, key: str, **changes: Any) -> bytes:
    """The segment at ``key`` re-encoded under another header: a stray whose
    column bytes are byte for byte the segment's (checked), of the same size."""
    data = bytes(store.get(key))
    header, batch = decode_segment(data, key=key)
    changes.setdefault("append_id", "e" * 32)
    plain = dataclasses.replace(header, stats=None, **changes)
    other = bytes(encode(batch, plain, stats=True)[0])  # as an append encodes
    assert len(other) == len(data) and other != data
    assert columns_of(other, key) == columns_of(data, key)
    return other


def swap_at(scripted: ScriptedStore, key: str, data: bytes, nth: int) -> _Rule:
    """Just before the ``nth`` ranged GET of ``key`` from now on: the object
    at ``key`` is deleted and ``data`` put in its place (a freed key taken by a
    late PUT), then the request reads what is there."""

    def act(_key: str, _data: Blob | None) -> None:
        scripted.inner.delete(key)
        scripted.inner.put_if_absent(key, data)

    return scripted._add("get_range", key, nth, 1, act)


REFUSED = (CorruptSegmentError, SegmentNotFoundError)


def no_writes(counting: CountingStore) -> None:
    assert counting.counts["put_if_absent"] == 0 and counting.counts["delete"] == 0


# --- a stray put at the key at each request of a column read --------------------


@pytest.mark.parametrize("kept", [True, False], ids=["kept-frame", "fresh"])
@pytest.mark.parametrize("nth", [1, 2, 3])
def test_a_stray_with_the_same_columns_put_at_any_request_is_refused(
    store: Store, kept: bool, nth: int
) -> None:
    """Schedule: the frame kept (or not), then the key deleted and the stray
    put just before the 1st, 2nd or 3rd ranged GET of a column read (the head,
    the column "a", the column "s"; a kept frame needs only the two columns).
    Whatever the stray's bytes the read took, its tag differs from the kept
    frame's or the head's, and the object is read as what it is: refused."""
    scripted = ScriptedStore(store)
    counting = CountingStore(scripted)
    make_topic(store)
    log = arrowlog.connect(counting)
    ref = log.partition("t", 0).segments()[0]
    assert ref.size is not None and ref.size >= COLUMN_READ_MIN_BYTES
    assert log.read("t", columns=COLUMNS).num_rows == ROWS
    assert (HEADS.get(ref.key, ref.append_id or "") is not None) is True
    if not kept:
        HEADS.clear()
    stray = stray_of(store, ref.key)
    rule = swap_at(scripted, ref.key, stray, nth)
    counting.reset()
    requests = 2 if kept else 3
    if nth > requests:  # the read ends before the swap: the segment's own rows
        assert log.read("t", columns=COLUMNS).equals(pa.Table.from_batches([big()]).select(COLUMNS))
        assert rule.seen == requests
    else:
        # refused; a parallel range that fell between the delete and the put
        # finds the key empty instead (the same refusal, another name)
        with pytest.raises(REFUSED):
            log.read("t", columns=COLUMNS)
        assert rule.seen >= nth
    no_writes(counting)


def test_a_stray_put_while_a_column_request_is_retried_is_refused(store: Store) -> None:
    """Schedule: the frame kept; the column "s" request fails with a transient
    error after the key was freed and the stray put; the retry reads the
    stray's (identical) bytes. The retried range's tag is the stray's: refused."""
    scripted = ScriptedStore(store)
    make_topic(store)
    log = arrowlog.connect(scripted)
    ref = log.partition("t", 0).segments()[0]
    log.read("t", columns=COLUMNS)
    assert HEADS.get(ref.key, ref.append_id or "") is not None
    stray = stray_of(store, ref.key)

    def act(_key: str, _data: Blob | None) -> None:
        store.delete(ref.key)
        store.put_if_absent(ref.key, stray)
        raise TransientStoreError("scripted 503 after the swap", maybe_applied=False)

    rule = scripted._add("get_range", ref.key, 2, 1, act)
    with pytest.raises(REFUSED):
        log.read("t", columns=COLUMNS)
    assert rule.seen >= 2


def test_the_same_object_put_again_at_its_key_reads_as_the_segment(store: Store) -> None:
    """A late PUT of the very same bytes (an append's retry that landed after
    the key was freed): on S3 its ETag is the kept frame's (MD5 of the same
    bytes), in memory and on disk another. Either way the bytes are the
    segment's own, and the read returns exactly its rows."""
    scripted = ScriptedStore(store)
    make_topic(store)
    log = arrowlog.connect(scripted)
    ref = log.partition("t", 0).segments()[0]
    log.read("t", columns=COLUMNS)
    same = bytes(store.get(ref.key))
    swap_at(scripted, ref.key, same, 1)
    got = log.read("t", columns=COLUMNS)
    assert got.equals(pa.Table.from_batches([big()]).select(COLUMNS))


# --- stores without tags ------------------------------------------------------------


def test_untagged_store_a_stray_between_head_and_columns_is_refused() -> None:
    inner = MemoryStore()
    scripted = ScriptedStore(inner)
    untagged = Untagged(scripted)
    make_topic(inner)
    log = arrowlog.connect(untagged)
    ref = log.partition("t", 0).segments()[0]
    HEADS.clear()  # a process that has not seen this frame (a fresh Spark worker)
    swap_at(scripted, ref.key, stray_of(inner, ref.key), 2)  # after the head
    with pytest.raises(CorruptSegmentError, match="not the log's segment"):
        log.read("t", columns=COLUMNS)


def kept_untagged(
    untagged: type[Untagged],
) -> tuple[MemoryStore, ScriptedStore, Untagged, arrowlog.ArrowLog, SegmentRef]:
    """A reader through a store without tags (of class ``untagged``) that has
    read the topic's columns once: the segment's frame is kept."""
    inner = MemoryStore()
    scripted = ScriptedStore(inner)
    store = untagged(scripted)
    make_topic(inner)
    log = arrowlog.connect(store)
    ref = log.partition("t", 0).segments()[0]
    log.read("t", columns=COLUMNS)
    assert HEADS.get(ref.key, ref.append_id or "") is not None
    return inner, scripted, store, log, ref


def test_untagged_store_a_kept_frame_never_vouches_for_a_stray_put_before_it() -> None:
    """Without tags, the kept frame is fetched again once the columns are in
    and must be the kept one: a stray put before the three requests ("a",
    "s", the frame) is refused."""
    inner, scripted, untagged, log, ref = kept_untagged(Untagged)
    swap_at(scripted, ref.key, stray_of(inner, ref.key), 1)
    untagged.reset()
    with pytest.raises(REFUSED):
        log.read("t", columns=COLUMNS)
    no_writes(untagged)


class Ordered(Untagged):
    """Untagged, and tells when a ranged GET of a segment has returned."""

    def __init__(self, inner: Store) -> None:
        super().__init__(inner)
        self.returned = threading.Event()

    def get_range_tagged(self, key: str, start: int, end: int) -> tuple[bytes, str | None]:
        got = super().get_range_tagged(key, start, end)
        if "/segments/" in key:
            self.returned.set()
        return got


def test_untagged_store_a_stray_put_after_the_frame_request_is_refused() -> None:
    inner, scripted, untagged, log, ref = kept_untagged(Ordered)
    assert isinstance(untagged, Ordered)
    stray = stray_of(inner, ref.key)
    untagged.returned.clear()

    def act(_key: str, _data: Blob | None) -> None:
        # the frame's GET (the first of three in flight) has returned
        assert untagged.returned.wait(10)
        inner.delete(ref.key)
        inner.put_if_absent(ref.key, stray)

    scripted._add("get_range", ref.key, 2, 1, act)
    with pytest.raises(REFUSED):
        log.read("t", columns=COLUMNS)


# --- a schema larger than the first read, a compressed topic ------------------------


@pytest.mark.parametrize("nth", [1, 2, 3, 4, 5])
def test_a_large_schema_stray_at_any_request_is_refused(nth: int) -> None:
    """A schema message over 16 KiB (field metadata): the head is read twice
    (16 KiB, then as much as the schema needs), then the columns. A stray put
    before any of the four requests is refused: the second head's tag decides
    for the columns."""
    meta: dict[bytes | str, bytes | str] = {"doc": "x" * 40_000}
    schema = pa.schema([SCHEMA.field(0).with_metadata(meta), SCHEMA.field(1), SCHEMA.field(2)])
    inner = MemoryStore()
    scripted = ScriptedStore(inner)
    make_topic(inner, schema=schema)
    log = arrowlog.connect(scripted)
    ref = log.partition("t", 0).segments()[0]
    assert log.read("t", columns=COLUMNS).num_rows == ROWS
    HEADS.clear()
    scripted.history.clear()
    assert log.read("t", columns=COLUMNS).num_rows == ROWS
    ranged = [op for op, key in scripted.history if op == "get_range" and key == ref.key]
    assert len(ranged) == 5  # 16 KiB, the schema, the rest of the frame, "a", "s"
    HEADS.clear()
    swap_at(scripted, ref.key, stray_of(inner, ref.key), nth)
    with pytest.raises(REFUSED):
        log.read("t", columns=COLUMNS)


def test_a_compressed_stray_at_a_kept_frames_key_is_refused() -> None:
    """A ZSTD topic (strings dictionary-encoded, the dictionaries in the frame):
    the stray's compressed column bytes are the segment's; the kept frame's
    tag is not the stray's."""
    inner = MemoryStore()
    scripted = ScriptedStore(inner)
    log = arrowlog.connect(scripted)
    log.create_topic("t", SCHEMA, config=TopicConfig(compression=Compression.ZSTD))
    rng = np.random.default_rng(3)
    batch = pa.record_batch(
        {
            "a": pa.array(rng.integers(0, 2**62, ROWS * 2)),
            "b": pa.array(rng.random(ROWS * 2)),
            "s": pa.array(np.array(["click", "view", "buy"])[rng.integers(0, 3, ROWS * 2)]),
        },
        schema=SCHEMA,
    )
    log.append("t", batch)
    ref = log.partition("t", 0).segments()[0]
    assert ref.size is not None and ref.size >= COLUMN_READ_MIN_BYTES
    assert log.read("t", columns=["s"]).column("s").equals(pa.chunked_array([batch.column(2)]))
    assert HEADS.get(ref.key, ref.append_id or "") is not None
    data = bytes(inner.get(ref.key))
    header, whole = decode_segment(data, key=ref.key)
    stray = bytes(
        encode(whole, dataclasses.replace(header, stats=None, append_id="e" * 32),
               Compression.ZSTD, stats=True)[0]
    )  # fmt: skip
    assert columns_of(stray, ref.key) == columns_of(data, ref.key)
    swap_at(scripted, ref.key, stray, 1)
    with pytest.raises(REFUSED):
        log.read("t", columns=["s"])


# --- one cache for every store in the process ---------------------------------------


def test_two_memory_stores_never_share_a_kept_frame() -> None:
    first = MemoryStore()
    make_topic(first)
    ref = arrowlog.connect(first).partition("t", 0).segments()[0]
    assert ref.append_id is not None and ref.size is not None
    # the same log in a second store, put in the same order, its segment
    # carrying another timestamp: tags are numbered per process, not per store
    keys = sorted(
        (int(first.get_range_tagged(info.key, 0, 0)[1] or 0), info.key) for info in first.list("")
    )
    second = MemoryStore()
    for _, key in keys:
        data = bytes(first.get(key))
        if key == ref.key:
            header = decode_segment(data, key=key)[0]
            data = stray_of(
                first, key, append_id=ref.append_id, timestamp_ms=header.timestamp_ms - 1
            )
        second.put_if_absent(key, data)
    assert first.get_range_tagged(ref.key, 0, 0)[1] != second.get_range_tagged(ref.key, 0, 0)[1]
    want = decode_segment(bytes(second.get(ref.key)), key=ref.key)[0].timestamp_ms

    arrowlog.connect(first).read("t", columns=COLUMNS)  # keeps the first store's frame
    got, _ = fetch_segment(
        second, ref.key, 0, ROWS, columns=COLUMNS, size=ref.size, append_id=ref.append_id
    )
    assert got.timestamp_ms == want


@pytest.mark.parametrize("kind", ["local", pytest.param("s3", marks=pytest.mark.s3)])
def test_two_roots_with_the_same_log_never_share_a_kept_frame(
    kind: str, tmp_path: Path, request: pytest.FixtureRequest
) -> None:
    """The same as above on two directories or two S3 prefixes (a copied
    log): a file's identity names its device and inode, an ETag the bytes, so
    the copy's tag differs and its own frame is read."""
    if kind == "local":
        first: Store = LocalStore(tmp_path / "one", fsync=False)
        second: Store = LocalStore(tmp_path / "two", fsync=False)
    else:
        from arrowlog.storage.url import open_store

        server = request.getfixturevalue("s3_server")
        base = f"roots-{os.getpid()}-{time.time_ns()}"
        first = open_store(server.url(f"{base}/one"), dict(server.storage_options))
        second = open_store(server.url(f"{base}/two"), dict(server.storage_options))
    make_topic(first)
    ref = arrowlog.connect(first).partition("t", 0).segments()[0]
    assert ref.append_id is not None and ref.size is not None
    for info in first.list(""):
        data = bytes(first.get(info.key))
        if info.key == ref.key:
            header = decode_segment(data, key=info.key)[0]
            data = stray_of(
                first, info.key, append_id=ref.append_id, timestamp_ms=header.timestamp_ms - 1
            )
        second.put_if_absent(info.key, data)
    want = decode_segment(bytes(second.get(ref.key)), key=ref.key)[0].timestamp_ms
    arrowlog.connect(first).read("t", columns=COLUMNS)
    got, _ = fetch_segment(
        second, ref.key, 0, ROWS, columns=COLUMNS, size=ref.size, append_id=ref.append_id
    )
    assert got.timestamp_ms == want


# --- a local directory's file identity ----------------------------------------------


def _second_granular_os(monkeypatch: pytest.MonkeyPatch) -> None:
    """The local store sees change times in whole seconds, as on HFS+, ext3 or
    an NFS server with second timestamps (FAT: two seconds)."""
    real = os.fstat

    def fstat(fd: int) -> Any:
        st = real(fd)
        return types.SimpleNamespace(
            st_dev=st.st_dev,
            st_ino=st.st_ino,
            st_size=st.st_size,
            st_ctime_ns=st.st_ctime_ns // 10**9 * 10**9,
        )

    fake = types.SimpleNamespace(**{**vars(os), "fstat": fstat})
    monkeypatch.setattr("arrowlog.storage.local.os", fake)


def test_local_a_stray_in_the_same_second_on_a_reused_inode_is_refused(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Change times in whole seconds, and ext4 hands the freed inode to the
    stray at once: same device, inode, change time and size. The inode's
    generation (new for each file on it) still tells the stray apart."""
    probe = tmp_path / "probe"
    probe.write_bytes(b"x")
    with probe.open("rb") as f:
        if local_store._generation(f.fileno()) is None:
            pytest.skip("this filesystem gives files no inode generation")
    _second_granular_os(monkeypatch)
    # Another process may start the second over or take the freed inode
    # (the suite runs on several workers): try again until both hold.
    for attempt in range(10):
        root = tmp_path / f"r{attempt}"
        inner = LocalStore(root, fsync=False)
        HEADS.clear()
        time.sleep(1 - time.time() % 1)  # the start of a second
        begun = int(time.time())
        make_topic(inner)  # the segment's change time: this second
        log = arrowlog.connect(inner)
        ref = log.partition("t", 0).segments()[0]
        assert log.read("t", columns=COLUMNS).num_rows == ROWS
        path = root / ref.key
        inode = path.stat().st_ino
        stray = stray_of(inner, ref.key)
        inner.delete(ref.key)
        inner.put_if_absent(ref.key, stray)
        if int(time.time()) == begun and path.stat().st_ino == inode:
            break  # ext4: the freed inode, at once
    else:
        pytest.fail("never a stray on the freed inode within one second")
    with pytest.raises(REFUSED):
        log.read("t", columns=COLUMNS)


def test_local_a_stray_on_a_reused_inode_is_refused_here(tmp_path: Path) -> None:
    """The same schedule on this machine's filesystem, change times in
    nanoseconds: the reused inode's tag differs, the stray is refused."""
    inner = LocalStore(tmp_path / "r", fsync=False)
    make_topic(inner)
    log = arrowlog.connect(inner)
    ref = log.partition("t", 0).segments()[0]
    assert log.read("t", columns=COLUMNS).num_rows == ROWS
    stray = stray_of(inner, ref.key)
    inner.delete(ref.key)
    inner.put_if_absent(ref.key, stray)
    with pytest.raises(REFUSED):
        log.read("t", columns=COLUMNS)


# --- stores as the protocol was -------------------------------------------------------


class OldStore:
    """A store written to the protocol before ae84675 (no get_range_tagged),
    as a user passes to connect(): "or an already opened Store"."""

    def __init__(self) -> None:
        self.inner = MemoryStore()
        self.url = self.inner.url
        self.atomic_put_if_absent = True

    def get(self, key: str) -> Blob:
        return self.inner.get(key)

    def get_range(self, key: str, start: int, end: int) -> bytes:
        return self.inner.get_range(key, start, end)

    def head(self, key: str) -> ObjectInfo:
        return self.inner.head(key)

    def put_if_absent(self, key: str, data: Blob) -> None:
        self.inner.put_if_absent(key, data)

    def list(
        self, prefix: str, *, start_after: str | None = None, limit: int | None = None
    ) -> Iterator[ObjectInfo]:
        return self.inner.list(prefix, start_after=start_after, limit=limit)

    def delete(self, key: str) -> None:
        self.inner.delete(key)

    def close(self) -> None:
        self.inner.close()


def test_a_store_without_get_range_tagged_still_reads() -> None:
    old = OldStore()
    log = arrowlog.connect(old)  # type: ignore[arg-type]
    log.create_topic("t", SCHEMA)
    log.append("t", big(rows=10))
    assert arrowlog.connect(old).read("t").num_rows == 10  # type: ignore[arg-type]


# --- processes -----------------------------------------------------------------------


def _child_reads(root: Path) -> int:
    """In a forked child: a column read of the log at ``root``; its exit code
    (0: the rows, 1: anything else; SIGALRM kills a child that hangs)."""
    signal.alarm(5)
    try:
        got = arrowlog.connect(str(root), {"fsync": False}).read("t", columns=COLUMNS)
        return 0 if got.num_rows == ROWS else 1
    except BaseException:  # noqa: BLE001 - reported by the exit code
        return 1


def _fork(root: Path) -> int:
    """Fork a child that reads; its exit status (a signal number, negated)."""
    pid = os.fork()
    if pid == 0:  # pragma: no cover - the child
        os._exit(_child_reads(root))
    _, status = os.waitpid(pid, 0)
    return os.waitstatus_to_exitcode(status)


def test_a_forked_child_reads_with_the_frames_it_inherited(tmp_path: Path) -> None:
    """A child forked after its parent kept frames (and started the range
    pool's threads) reads the same columns: its own pool, the same files."""
    root = tmp_path / "root"
    make_topic(LocalStore(root, fsync=False))
    assert arrowlog.connect(str(root), {"fsync": False}).read("t", columns=COLUMNS).num_rows
    assert len(HEADS) >= 1
    assert _fork(root) == 0


def test_a_child_forked_while_a_thread_is_in_the_head_cache_reads(tmp_path: Path) -> None:
    root = tmp_path / "root"
    make_topic(LocalStore(root, fsync=False))
    inside, leave = threading.Event(), threading.Event()

    def in_the_cache() -> None:  # a read-ahead thread in HEADS.keep, frozen here
        with HEADS._lock:
            inside.set()
            leave.wait(10)

    thread = threading.Thread(target=in_the_cache)
    thread.start()
    assert inside.wait(10)
    try:
        status = _fork(root)
    finally:
        leave.set()
        thread.join()
    assert status == 0, f"the child ended with {status} (-14: killed by its alarm, hung)"


# --- a real S3 server's entity tags -----------------------------------------------------


@pytest.mark.s3
def test_seaweedfs_tags_of_multi_chunk_objects_follow_their_bytes(s3_server: Any) -> None:
    """Objects of several SeaweedFS chunks (4 MiB by default): every range of
    one object carries one tag; an object at the freed key differing in its
    last byte only gets another; the very same bytes at another key get the
    same tag (MD5 ETags: the case the kept frame's own bytes settle)."""
    from arrowlog.storage.url import open_store

    store = open_store(s3_server.url(f"tags-{os.getpid()}-{time.time_ns()}"),
                       dict(s3_server.storage_options))  # fmt: skip
    try:
        data = os.urandom(9 * 1024 * 1024 + 17)
        store.put_if_absent("k", data)
        tags = {store.get_range_tagged("k", lo, lo + 100)[1] for lo in (0, 5 << 20, len(data) - 50)}
        assert len(tags) == 1 and None not in tags
        (tag,) = tags
        store.delete("k")
        changed = data[:-1] + bytes([data[-1] ^ 1])
        store.put_if_absent("k", changed)
        got, other = store.get_range_tagged("k", 0, 100)
        assert got == data[:100] and other is not None and other != tag
        store.put_if_absent("copy", data)
        assert store.get_range_tagged("copy", 10, 20)[1] == tag
    finally:
        store.close()


_VACUUM_AND_STRAY = """
import sys, time
import arrowlog
from arrowlog.storage.url import open_store
import json
url, options, key, stray_path, before = sys.argv[1], json.loads(sys.argv[2]), *sys.argv[3:6]
log = arrowlog.connect(url, options)
log.delete_records("t", 0, int(before))
store = open_store(url, options)
for _ in range(40):  # until the delay has passed on the store's clock
    time.sleep(0.25)
    log.maintenance.vacuum(["t"])
    try:
        store.head(key)
    except FileNotFoundError:
        break
else:
    sys.exit("vacuum left the segment")
store.put_if_absent(key, open(stray_path, "rb").read())  # a late PUT takes the freed key
"""


@pytest.mark.slow
def test_a_stray_at_a_key_vacuumed_by_another_process_is_never_read(
    shared_store_spec: Any, tmp_path: Path
) -> None:
    """OS processes: this one keeps the frames of two segments; another deletes
    the records of the first, vacuums its segment once the delay has passed,
    and a late PUT puts a stray with the same column bytes at the freed key.
    This process's reads give the second segment's rows or OffsetOutOfRange,
    never the deleted records."""
    import subprocess
    import sys

    store = shared_store_spec.open()
    log = arrowlog.connect(store)
    log.create_topic(
        "t",
        SCHEMA,
        config=TopicConfig(
            compression=Compression.NONE, delete_delay_ms=100, checkpoint_interval=1
        ),
    )
    for seed in range(3):
        log.append("t", big(seed))
    reader = arrowlog.connect(shared_store_spec.open())
    refs = reader.partition("t", 0).segments()
    assert reader.read("t", columns=COLUMNS).num_rows == 3 * ROWS  # frames kept
    assert all(HEADS.get(r.key, r.append_id or "") is not None for r in refs)
    stray = tmp_path / "stray"
    stray.write_bytes(stray_of(store, refs[0].key))
    done = subprocess.run(
        [sys.executable, "-c", _VACUUM_AND_STRAY, shared_store_spec.url,
         json.dumps(shared_store_spec.options), refs[0].key, str(stray), str(ROWS)],
        capture_output=True, text=True, timeout=60, env={**os.environ, "PYTHONPATH": os.getcwd()},
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    with pytest.raises(arrowlog.OffsetOutOfRangeError):
        reader.read("t", start=0, columns=COLUMNS)
    got = reader.read("t", columns=COLUMNS)
    assert got.equals(pa.Table.from_batches([big(1), big(2)]).select(COLUMNS))


def test_columns_as_an_iterator_read_or_get_a_typed_error() -> None:
    inner = MemoryStore()
    make_topic(inner)
    try:
        got = arrowlog.connect(inner).read("t", columns=iter(["a"]))  # type: ignore[arg-type]
        assert got.column_names == ["a"]
    except arrowlog.ArrowLogError:
        pass


# --- what pyarrow parses beyond the checked ranges -----------------------------------


def test_a_column_table_that_misplaces_a_column_never_yields_unchecked_bytes(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    from arrowlog.format.segment import column_table

    inner = MemoryStore()
    log = arrowlog.connect(inner)
    for name in ("secret", "t"):
        log.create_topic(name, SCHEMA, config=TopicConfig(compression=Compression.NONE))
    log.append("secret", big(7))
    real = column_table.layout

    def misplaced(data: memoryview, schema: pa.Schema) -> Any:
        body_start, body_end, ranges = real(data, schema) or (0, 0, [])
        return body_start, body_end, [ranges[1], *ranges[1:]]  # "a" said to be where "b" is

    with monkeypatch.context() as patch:
        patch.setattr(column_table, "layout", misplaced)
        log.append("t", big(0))
    reader = arrowlog.connect(inner)
    whole = reader.read("t").column("a")
    assert whole.equals(pa.chunked_array([big(0).column("a")]))  # the segment is sound
    assert reader.read("secret", columns=["a"]).num_rows == ROWS  # another topic's read
    HEADS.clear()
    try:
        got = reader.read("t", columns=["a"]).column("a")
    except CorruptSegmentError:
        return
    assert got.equals(whole), f"read {got.slice(0, 3).to_pylist()}, not {whole[:3]}"
