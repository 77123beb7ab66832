"""Fixtures shared by the whole suite.

Stores are real backends (:mod:`tests.support.stores`): ``memory``, ``local`` (a
temp directory) and ``s3``, which speaks HTTP to a SeaweedFS server started once
per session on 127.0.0.1 (or to any S3 endpoint named by ARROWLOG_TEST_S3_ENDPOINT,
e.g. a MinIO) through obstore; the storage suite also runs ``s3fs``, the same
server through s3fs.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

import arrowlog
from arrowlog import _clock
from arrowlog.storage import Store
from arrowlog.testing import azurite, fakegcs, seaweedfs
from tests.support import suite_order
from tests.support.stores import SHARED_STORE_KINDS, STORE_KINDS, StoreSpec, spec_for

# every JVM a test starts reads this Spark configuration (see the file)
os.environ.setdefault("SPARK_CONF_DIR", str(Path(__file__).parent / "support" / "spark-conf"))


@pytest.hookimpl(optionalhook=True)  # a hook of pytest-xdist, which test-spark-min lacks
def pytest_xdist_make_scheduler(config: pytest.Config, log: Any) -> Any:
    """``--dist loadfile`` (``make test``) as :mod:`tests.support.suite_order` says."""
    if config.getoption("dist") != "loadfile":
        return None
    return suite_order.make_scheduler(config, log)


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """A test that uses the Spark session or the S3 server is a ``spark`` or an
    ``s3`` test whether or not it says so: ``make test-fast`` leaves it out."""
    for item in items:
        used = set(getattr(item, "fixturenames", ()))
        for fixture, marker in (
            ("spark", pytest.mark.spark),
            ("s3_server", pytest.mark.s3),
            ("azurite_server", pytest.mark.azure),
            ("gcs_server", pytest.mark.gcs),
        ):
            if fixture in used and item.get_closest_marker(marker.name) is None:
                item.add_marker(marker)


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


@pytest.fixture(scope="session")
def azurite_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[azurite.AzuriteServer]:
    """Azurite on loopback (installed from npm into the user's cache on first use)."""
    with azurite.running(tmp_path_factory.mktemp("azurite")) as server:
        yield server


@pytest.fixture(scope="session")
def gcs_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[fakegcs.GcsServer]:
    """fake-gcs-server behind the XML-API shim, on loopback."""
    with fakegcs.running(tmp_path_factory.mktemp("fakegcs")) as server:
        yield server


@pytest.fixture(params=STORE_KINDS)
def store_spec(request: pytest.FixtureRequest, tmp_path: Path) -> StoreSpec:
    return spec_for(request.param, tmp_path, request)


@pytest.fixture(params=SHARED_STORE_KINDS)
def shared_store_spec(request: pytest.FixtureRequest, tmp_path: Path) -> StoreSpec:
    return spec_for(request.param, tmp_path, request)


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


@pytest.fixture
def now(monkeypatch: pytest.MonkeyPatch) -> list[float]:
    """The clients' elapsed clock, moved only by the test (``now[0]``). Left
    alone, it stands still: a writer's appends then make one run that never
    lasts the tenth of a second after which it looks for others' staged
    batches, so a count of its requests does not depend on the machine's speed."""
    at = [0.0]
    monkeypatch.setattr(_clock, "elapsed", lambda: at[0])
    return at
