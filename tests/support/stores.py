"""The stores tests run on: memory, a local directory (``local``) and ``s3``,
which speaks HTTP to the suite's SeaweedFS (the ``s3_server`` fixture) through
obstore, or ``s3fs``, the same server through s3fs. A :class:`StoreSpec` opens
one here or, by its arguments, in a child process."""

from __future__ import annotations

import json
import uuid
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

import arrowlog
from arrowlog.storage import Store
from arrowlog.storage.url import open_store
from arrowlog.storage.wrappers import CountingStore
from arrowlog.testing import azurite, fakegcs, seaweedfs


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


class Untagged(CountingStore):
    """A store that reports no entity tags with ranged reads, as fsspec's do
    (counted)."""

    def get_range_tagged(self, key: str, start: int, end: int) -> tuple[bytes, str | None]:
        return super().get_range_tagged(key, start, end)[0], None


def spec_for(kind: str, tmp_path: Path, request: pytest.FixtureRequest) -> StoreSpec:
    """A fresh store of ``kind`` for one test (an S3 kind starts the suite's server)."""
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
    if kind == "memory":
        return StoreSpec("memory", "memory://", {})
    if kind == "azure":
        emulator: azurite.AzuriteServer = request.getfixturevalue("azurite_server")
        return StoreSpec(kind, emulator.url(f"t-{uuid.uuid4().hex[:12]}"), emulator.storage_options)
    if kind == "gcs":
        gcs: fakegcs.GcsServer = request.getfixturevalue("gcs_server")
        return StoreSpec(kind, gcs.url(f"t-{uuid.uuid4().hex[:12]}"), gcs.storage_options)
    # a new kind must say how it is opened, or the suite would test memory:// for it
    raise ValueError(f"no store spec for kind {kind!r}: say how spec_for opens it")


STORE_KINDS = [
    pytest.param("memory", id="memory"),
    pytest.param("local", id="local"),
    pytest.param("s3", id="s3", marks=pytest.mark.s3),
]
#: the clouds' stores, each against its emulator: the storage suite runs on them
#: (every other test runs on STORE_KINDS)
CLOUD_KINDS = [
    pytest.param("azure", id="azure", marks=pytest.mark.azure),
    pytest.param("gcs", id="gcs", marks=pytest.mark.gcs),
]
#: kinds whose stores live inside one process: a second process cannot open them
IN_PROCESS_KINDS = frozenset({"memory"})
#: kinds a second process can open (the races between processes)
SHARED_STORE_KINDS = [p for p in STORE_KINDS if p.values[0] not in IN_PROCESS_KINDS]


# A module that imports these runs its store_spec / shared_store_spec tests on
# the clouds' emulators too: the schedules whose outcome rests on the store's
# conditional requests and listings (every other module runs on STORE_KINDS).
@pytest.fixture(name="store_spec", params=[*STORE_KINDS, *CLOUD_KINDS])
def store_spec_on_clouds_too(request: pytest.FixtureRequest, tmp_path: Path) -> StoreSpec:
    return spec_for(request.param, tmp_path, request)


@pytest.fixture(name="shared_store_spec", params=[*SHARED_STORE_KINDS, *CLOUD_KINDS])
def shared_store_spec_on_clouds_too(request: pytest.FixtureRequest, tmp_path: Path) -> StoreSpec:
    return spec_for(request.param, tmp_path, request)
