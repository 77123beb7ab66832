"""The store registry: a scheme names one backend, a backend registered by a
program opens by URL, and an unknown scheme says which ones are known."""

from __future__ import annotations

import pickle
import threading
from collections.abc import Iterator, Mapping
from typing import Any

import pyarrow as pa
import pytest

import arrowlog
from arrowlog.storage import Blob, ObjectInfo, check_key, check_prefix
from arrowlog.storage.location import StoreURL
from arrowlog.storage.options import Kind, coerce_options
from arrowlog.storage.registry import register_store, registered_schemes, unregister_store
from arrowlog.storage.url import open_store


class DictStore:
    """A toy backend: objects in a dict (``setdefault`` is the atomic claim)."""

    options: Mapping[str, Kind] = {"label": "text"}

    def __init__(self, name: str, label: str = "") -> None:
        self.name = name
        self.label = label
        self.objects: dict[str, bytes] = {}

    @classmethod
    def from_url(cls, url: StoreURL, storage_options: Mapping[str, Any] | None) -> DictStore:
        return cls(url.netloc, **coerce_options("toy://", storage_options, cls.options))

    @property
    def url(self) -> str:
        return f"toy://{self.name}"

    @property
    def atomic_put_if_absent(self) -> bool:
        return True

    def get(self, key: str) -> bytes:
        try:
            return self.objects[check_key(key)]
        except KeyError:
            raise FileNotFoundError(key) from None

    def get_range(self, key: str, start: int, end: int) -> bytes:
        return self.get(key)[start:end]

    def get_range_tagged(self, key: str, start: int, end: int) -> tuple[bytes, str | None]:
        return self.get_range(key, start, end), None

    def head(self, key: str) -> ObjectInfo:
        return ObjectInfo(key, len(self.get(key)))

    def put_if_absent(self, key: str, data: Blob) -> None:
        value = bytes(data)
        if self.objects.setdefault(check_key(key), value) is not value:
            raise FileExistsError(key)

    def list(
        self, prefix: str, *, start_after: str | None = None, limit: int | None = None
    ) -> Iterator[ObjectInfo]:
        check_prefix(prefix)
        keys = sorted(k for k in self.objects if k.startswith(prefix) and k > (start_after or ""))
        return iter([ObjectInfo(k, len(self.objects[k])) for k in keys[:limit]])

    def delete(self, key: str) -> None:
        self.objects.pop(check_key(key), None)

    def close(self) -> None:
        pass


class UnsafeDictStore(DictStore):
    """A toy backend that says its put-if-absent is not atomic."""

    @property
    def atomic_put_if_absent(self) -> bool:
        return False


@pytest.fixture
def toy() -> Iterator[str]:
    """``toy://`` registered for one test."""
    register_store("toy", f"{__name__}:DictStore")
    try:
        yield "toy"
    finally:
        unregister_store("toy")


def test_a_registered_store_opens_by_url_with_its_options_and_keeps_the_contract(
    toy: str,
) -> None:
    store = open_store("toy://box", {"label": "mine"})
    assert isinstance(store, DictStore) and (store.url, store.label) == ("toy://box", "mine")
    with pytest.raises(arrowlog.InvalidConfigError, match="unknown storage option 'lable'"):
        open_store("toy://box", {"lable": "mine"})

    # put_if_absent: exactly one of eight racing threads wins
    winners: list[int] = []
    barrier = threading.Barrier(8)

    def race(i: int) -> None:
        barrier.wait()
        try:
            store.put_if_absent("p/contended", str(i).encode())
            winners.append(i)
        except FileExistsError:
            pass

    threads = [threading.Thread(target=race, args=(i,)) for i in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert len(winners) == 1 and store.get("p/contended") == str(winners[0]).encode()

    for key in ["p/b", "p/a", "q/c"]:
        store.put_if_absent(key, key.encode())
    assert [o.key for o in store.list("p/")] == ["p/a", "p/b", "p/contended"]
    assert [o.key for o in store.list("p/", start_after="p/a", limit=1)] == ["p/b"]
    store.delete("p/a")
    store.delete("p/a")
    with pytest.raises(FileNotFoundError):
        store.get("p/a")
    copy = pickle.loads(pickle.dumps(store))  # a store must pickle
    assert copy.get("q/c") == b"q/c"

    with arrowlog.connect("toy://log") as log:  # and arrowlog runs on it
        schema = pa.schema([("x", pa.int64())])
        log.create_topic("t", schema)
        log.append("t", pa.record_batch({"x": [1, 2]}, schema=schema), expected_offset=0)
        assert log.read("t")["x"].to_pylist() == [1, 2]


def test_an_unknown_scheme_names_the_registered_ones(toy: str) -> None:
    with pytest.raises(arrowlog.UnsupportedStoreError) as info:
        open_store("nosuchfs://x/y")
    message = str(info.value)
    assert "unknown store protocol 'nosuchfs'" in message
    for scheme in registered_schemes():
        assert f"{scheme}://" in message
    assert "toy://" in message and "memory://" in message and "s3://" in message


def test_a_scheme_is_registered_once(toy: str) -> None:
    with pytest.raises(arrowlog.InvalidConfigError, match="'toy' is registered already"):
        register_store("toy", f"{__name__}:UnsafeDictStore")
    with pytest.raises(arrowlog.InvalidConfigError, match="'s3' is registered already"):
        register_store("s3", f"{__name__}:DictStore")
    assert type(open_store("toy://box")) is DictStore  # the first registration stands


@pytest.mark.parametrize(
    ("scheme", "target", "extra"),
    [("Toy", "m:C", None), ("t y", "m:C", None), ("toy2", "m.C", None), ("toy2", "m:C", "nope")],
)
def test_a_malformed_registration_is_refused(scheme: str, target: str, extra: str | None) -> None:
    with pytest.raises(arrowlog.InvalidConfigError):
        register_store(scheme, target, extra=extra)
    assert scheme not in registered_schemes()


def test_a_registered_store_without_atomic_put_if_absent_needs_the_opt_in() -> None:
    register_store("toy-unsafe", f"{__name__}:UnsafeDictStore")
    try:
        with pytest.raises(arrowlog.UnsupportedStoreError, match="no atomic put-if-absent"):
            arrowlog.connect("toy-unsafe://x")
        with pytest.warns(UserWarning, match="toy-unsafe:// without atomic put-if-absent"):
            store = open_store("toy-unsafe://x", allow_unsafe_store=True)
        assert isinstance(store, UnsafeDictStore)
    finally:
        unregister_store("toy-unsafe")
