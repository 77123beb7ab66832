"""Fixtures shared by the whole suite.

Stores are real backends: ``memory``, ``local`` (a temp directory) and ``s3``,
which speaks HTTP to a SeaweedFS server started once per session on 127.0.0.1
(or to any S3 endpoint named by ARROWLOG_TEST_S3_ENDPOINT, e.g. a MinIO) through
obstore; the storage suite also runs ``s3fs``, the same server through s3fs.
"""

from __future__ import annotations

import json
import os
import uuid
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

import arrowlog
from arrowlog.storage import Store
from arrowlog.storage.url import open_store
from arrowlog.storage.wrappers import CountingStore
from arrowlog.testing import seaweedfs


@dataclass(frozen=True)
class StoreSpec:
    """How to open one store, here or in a child process."""

    kind: str
    url: str
    options: dict[str, Any]

    def open(self) -> Store:
        return open_store(self.url, self.options)

    def connect(self, **kwargs: Any) -> arrowlog.ArrowLog:
        return arrowlog.connect(self.url, self.options, **kwargs)

    def argv(self) -> list[str]:
        return ["--url", self.url, "--options", json.dumps(self.options)]


@pytest.fixture(scope="session")
def s3_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[seaweedfs.S3Server]:
    endpoint = os.environ.get("ARROWLOG_TEST_S3_ENDPOINT")
    if endpoint:
        yield seaweedfs.S3Server(
            endpoint=endpoint,
            bucket=os.environ.get("ARROWLOG_TEST_S3_BUCKET", "arrowlog"),
            access_key=os.environ["ARROWLOG_TEST_S3_KEY"],
            secret_key=os.environ["ARROWLOG_TEST_S3_SECRET"],
        )
        return
    server = seaweedfs.start(tmp_path_factory.mktemp("seaweedfs"))
    try:
        yield server
    finally:
        server.stop()


class Untagged(CountingStore):
    """A store that reports no entity tags with ranged reads, as fsspec's do
    (counted)."""

    def get_range_tagged(self, key: str, start: int, end: int) -> tuple[bytes, str | None]:
        return super().get_range_tagged(key, start, end)[0], None


def _spec(kind: str, tmp_path: Path, request: pytest.FixtureRequest) -> StoreSpec:
    if kind == "local":
        # fsync off: these tests are about atomicity, not power loss, and fsync
        # on a busy CI disk only adds minutes.
        return StoreSpec("local", str(tmp_path / "store"), {"fsync": False})
    if kind in ("s3", "s3fs"):
        server: seaweedfs.S3Server = request.getfixturevalue("s3_server")
        options = dict(server.storage_options)
        if kind == "s3fs":  # the client that s3:// used before obstore, still selectable
            options["client"] = "s3fs"
        return StoreSpec(kind, server.url(f"t-{uuid.uuid4().hex[:12]}"), options)
    return StoreSpec("memory", "memory://", {})


STORE_KINDS = [
    pytest.param("memory", id="memory"),
    pytest.param("local", id="local"),
    pytest.param("s3", id="s3", marks=pytest.mark.s3),
]
# Kinds a second process can open: memory lives inside one process.
SHARED_STORE_KINDS = STORE_KINDS[1:]


@pytest.fixture(params=STORE_KINDS)
def store_spec(request: pytest.FixtureRequest, tmp_path: Path) -> StoreSpec:
    return _spec(request.param, tmp_path, request)


@pytest.fixture(params=SHARED_STORE_KINDS)
def shared_store_spec(request: pytest.FixtureRequest, tmp_path: Path) -> StoreSpec:
    return _spec(request.param, tmp_path, request)


@pytest.fixture
def store(store_spec: StoreSpec) -> Iterator[Store]:
    # One store object for the whole test: memory stores are private to it.
    s = store_spec.open()
    yield s
    s.close()


@pytest.fixture
def make_log(store: Store) -> Callable[..., arrowlog.ArrowLog]:
    """Connections to the test's store (several connections see the same data)."""

    def make(**kwargs: Any) -> arrowlog.ArrowLog:
        return arrowlog.connect(store, **kwargs)

    return make
