"""One suite that every store backend must pass: memory, local directory and a
real S3 server (SeaweedFS over HTTP), races included."""

from __future__ import annotations

import json
import os
import pickle
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

from arrowlog.errors import InvalidNameError
from arrowlog.storage import Store, read_start
from arrowlog.storage.s3 import S3Store
from arrowlog.storage.wrappers import CountingStore
from arrowlog.testing.faulty import Faults, FaultyStore
from arrowlog.testing.scripted import ScriptedStore
from tests.support.stores import StoreSpec

ROOT = Path(__file__).resolve().parents[2]


def test_put_then_get_returns_the_same_bytes(store: Store) -> None:
    data = bytes(range(256)) * 10
    store.put_if_absent("a/b/obj", data)
    assert store.get("a/b/obj") == data
    info = store.head("a/b/obj")
    assert (info.key, info.size) == ("a/b/obj", len(data))


def test_missing_objects_raise_file_not_found(store: Store) -> None:
    with pytest.raises(FileNotFoundError):
        store.get("nothing/here")
    with pytest.raises(FileNotFoundError):
        store.head("nothing/here")
    with pytest.raises(FileNotFoundError):
        store.get_range("nothing/here", 0, 10)


def test_put_if_absent_refuses_an_existing_key_and_keeps_the_first_object(store: Store) -> None:
    store.put_if_absent("k", b"first")
    with pytest.raises(FileExistsError):
        store.put_if_absent("k", b"second, longer")
    assert store.get("k") == b"first"


def test_get_range(store: Store) -> None:
    store.put_if_absent("r", b"0123456789")
    assert store.get_range("r", 2, 5) == b"234"
    assert store.get_range("r", 8, 100) == b"89"
    assert store.get_range("r", 10, 20) == b""
    assert store.get_range("r", 3, 3) == b""


def test_read_start_gives_the_first_bytes_and_the_head_in_one_request(store: Store) -> None:
    """A writer following the log end reads the next key's header and learns
    its size and time from the same answer; a store that has ``read_start``
    answers with one request, and any other through the module's fallback."""
    store.put_if_absent("s", b"0123456789")
    counted = CountingStore(store)
    data, info, tag = read_start(counted, "s", 4)
    assert data == b"0123"
    assert info == store.head("s")
    assert tag == store.get_range_tagged("s", 0, 1)[1]
    # every backend but s3fs's (a ranged read there tells no size) in one
    one = not isinstance(store, S3Store)
    assert counted.requests == (1 if one else 2)
    assert read_start(store, "s", 100)[:2] == (b"0123456789", store.head("s"))
    assert read_start(store, "s", 0)[1].size == 10
    with pytest.raises(FileNotFoundError):
        read_start(counted, "nothing/here", 4)
    for wrapper in (FaultyStore(store, Faults()), ScriptedStore(store)):  # the fallback
        assert read_start(wrapper, "s", 4) == (b"0123", store.head("s"), tag)


def test_ranges_of_one_object_carry_one_tag_and_other_bytes_another(store: Store) -> None:
    """The tag is what lets a reader trust a part of an object it kept beside
    a part it fetches now (a column read of a known segment): one tag means
    the same bytes, so two objects at one key that differ in one byte (of
    equal size, the part read equal) have two tags."""
    store.put_if_absent("t", b"0123456789")
    first, tag = store.get_range_tagged("t", 2, 5)
    assert first == b"234" and tag is not None
    assert store.get_range_tagged("t", 8, 100) == (b"89", tag)
    assert store.get_range_tagged("t", 10, 20) == (b"", tag)
    assert store.get_range_tagged("t", 3, 3) == (b"", tag)
    store.delete("t")
    store.put_if_absent("t", b"9123456789")  # another object: its first byte differs
    again, other = store.get_range_tagged("t", 2, 5)
    assert again == b"234" and other is not None and other != tag
    store.delete("t")
    with pytest.raises(FileNotFoundError):
        store.get_range_tagged("t", 0, 4)
    with pytest.raises(FileNotFoundError):
        store.get_range_tagged("t", 3, 3)


def test_a_large_object_round_trips_in_one_put(store: Store) -> None:
    data = os.urandom(9 * 1024 * 1024)  # above s3fs's multipart threshold
    store.put_if_absent("big", data)
    assert store.get("big") == data
    with pytest.raises(FileExistsError):
        store.put_if_absent("big", b"x")


def test_list_is_sorted_filtered_and_paged(store: Store) -> None:
    for key in ["p/b", "p/a", "p/c/d", "p2/x", "q/y", "p/aa"]:
        store.put_if_absent(key, key.encode())
    assert [o.key for o in store.list("p/")] == ["p/a", "p/aa", "p/b", "p/c/d"]
    assert [o.key for o in store.list("p/a")] == ["p/a", "p/aa"]
    assert [o.key for o in store.list("p/", start_after="p/aa")] == ["p/b", "p/c/d"]
    assert [o.key for o in store.list("p/", start_after="p/a", limit=2)] == ["p/aa", "p/b"]
    assert [o.key for o in store.list("p/", limit=1)] == ["p/a"]
    assert [o.key for o in store.list("nothing/")] == []
    assert {o.key for o in store.list("")} >= {"p/a", "p2/x", "q/y"}
    assert [o.size for o in store.list("p/c/")] == [len(b"p/c/d")]


def test_list_by_a_prefix_that_ends_inside_a_name(store: Store) -> None:
    """A prefix is a string, not a directory: ``d/a0`` matches ``d/a0x`` and not
    ``d/a/b`` (which sorts between them), whatever the characters around it."""
    # No key is both an object and a directory (a local directory cannot hold
    # both), nor a directory's name followed by one of "+-." (SeaweedFS lists a
    # directory before such a sibling, S3 after it: arrowlog's keys never do).
    keys = ["d/+", "d/-x", "d/0", "d/09", "d/1", "d/a/b", "d/a0", "d/a0x",
            "d/a=1/k", "d/aB", "d/b", "d0/x", "e"]  # fmt: skip
    for key in keys:
        store.put_if_absent(key, b"x")
    for prefix in ["d/a0", "d/0", "d/a", "d/a=", "d/a/", "d/", "d", "d/-", "d/+", "d0", "e", "z"]:
        expected = [k for k in keys if k.startswith(prefix)]
        assert [o.key for o in store.list(prefix)] == expected, prefix
        # after a key, as arrowlog pages (SeaweedFS skips a whole directory
        # after its bare name: "d/a" would skip "d/a/b")
        for after in ["d/", "d/0", "d/09", "d/a0", "d/a/b", "d0/x"]:
            got = [o.key for o in store.list(prefix, start_after=after)]
            assert got == [k for k in expected if k > after], (prefix, after)
        assert [o.key for o in store.list(prefix, limit=2)] == expected[:2], prefix


def test_list_pages_through_more_than_one_page(store: Store) -> None:
    keys = [f"many/{i:05d}" for i in range(1205)]
    for key in keys:
        store.put_if_absent(key, b"")
    assert [o.key for o in store.list("many/")] == keys
    assert [o.key for o in store.list("many/", start_after=keys[1100], limit=50)] == keys[1101:1151]


def test_list_and_head_tell_when_each_object_was_written_on_the_store_clock(
    store: Store,
) -> None:
    before = time.time_ns() // 1_000_000
    keys = [f"m/{i:02d}" for i in range(12)]
    for key in keys:
        store.put_if_absent(key, b"x")
    after = time.time_ns() // 1_000_000
    listed = list(store.list("m/"))
    stamps = [info.modified_ms for info in listed]
    assert all(isinstance(ms, int) for ms in stamps), stamps
    ints = [ms for ms in stamps if ms is not None]
    # The store's clock is not ours (and S3 rounds to seconds): a generous window.
    assert all(before - 60_000 <= ms <= after + 60_000 for ms in ints), (before, ints, after)
    assert ints == sorted(ints), "written one after another, so non-decreasing"
    for info in listed:
        head = store.head(info.key).modified_ms
        assert head is not None and abs(head - ints[0]) <= 60_000
        assert abs(head - (info.modified_ms or 0)) <= 1000  # HTTP dates have 1 s resolution
    for wrapper in (CountingStore(store), FaultyStore(store, Faults()), ScriptedStore(store)):
        assert list(wrapper.list("m/")) == listed
        assert wrapper.head(keys[0]) == store.head(keys[0])


def test_delete_removes_and_tolerates_missing(store: Store) -> None:
    store.put_if_absent("d", b"x")
    store.delete("d")
    with pytest.raises(FileNotFoundError):
        store.get("d")
    store.delete("d")
    store.put_if_absent("d", b"again")
    assert store.get("d") == b"again"


@pytest.mark.parametrize(
    "key",
    ["", "/abs", "a//b", "../up", "a/../b", "a/./b", ".hidden", "a/.tmp", "a\\b", "a/b/", "x\x00"],
)
def test_unsafe_keys_are_refused_and_nothing_is_written(store: Store, key: str) -> None:
    with pytest.raises(InvalidNameError):
        store.put_if_absent(key, b"x")
    with pytest.raises(InvalidNameError):
        store.get(key)
    assert list(store.list("")) == []


def test_a_store_pickles_and_its_copy_works(store: Store) -> None:
    """Spark's workers and process pools receive stores pickled (the Store
    protocol's rule). A copy reaches the same objects; a memory store's copy holds
    the objects it had when pickled and is a store of its own from then on."""
    store.put_if_absent("before", b"1")
    copy = pickle.loads(pickle.dumps(store))
    assert type(copy) is type(store) and copy.url == store.url
    assert copy.get("before") == b"1"
    assert copy.head("before").modified_ms == store.head("before").modified_ms
    copy.put_if_absent("after", b"2")
    assert copy.get("after") == b"2"
    assert [o.key for o in copy.list("")] == ["after", "before"]
    with pytest.raises(FileExistsError):
        copy.put_if_absent("before", b"again")
    copy.delete("before")
    if store.url.startswith("memory://"):
        assert [o.key for o in store.list("")] == ["before"]  # the original: unchanged
    else:
        assert store.get("after") == b"2"
        with pytest.raises(FileNotFoundError):
            store.get("before")
    copy.close()


def test_threads_racing_on_one_key_have_exactly_one_winner(store: Store) -> None:
    winners: list[int] = []
    barrier = threading.Barrier(8)

    def race(i: int) -> None:
        barrier.wait()
        try:
            store.put_if_absent("contended", str(i).encode())
            winners.append(i)
        except FileExistsError:
            pass

    threads = [threading.Thread(target=race, args=(i,)) for i in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert len(winners) == 1
    assert store.get("contended") == str(winners[0]).encode()


@pytest.mark.slow
def test_processes_racing_on_many_keys_have_exactly_one_winner_each(
    shared_store_spec: StoreSpec,
) -> None:
    count = 60
    start_at = time.time() + 3
    procs = [
        subprocess.Popen(
            [
                sys.executable,
                "-m",
                "tests.support.workers",
                "put_race",
                *shared_store_spec.argv(),
                "--writer",
                str(w),
                "--count",
                str(count),
                "--start-at",
                str(start_at),
            ],
            cwd=ROOT,
            stdout=subprocess.PIPE,
        )
        for w in range(4)
    ]
    won: dict[str, int] = {}
    for w, proc in enumerate(procs):
        out, _ = proc.communicate(timeout=300)
        assert proc.returncode == 0
        for key in json.loads(out):
            assert key not in won, f"{key} won by both {won[key]} and {w}"
            won[key] = w
    assert len(won) == count
    store = shared_store_spec.open()
    for key, w in won.items():
        assert store.get(key) == str(w).encode()
