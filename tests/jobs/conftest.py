"""Where the export tests keep the log and the Delta table: both on a local
directory, or both on SeaweedFS (the log through arrowlog's S3 client, the
table through delta-rs's); and both exports behind one interface. The classes
are in :mod:`tests.support.exports`."""

from __future__ import annotations

import uuid
from pathlib import Path

import pytest

from tests.support.exports import DeltaTarget, IcebergTarget, Place, Target
from tests.support.stores import StoreSpec


@pytest.fixture(params=["local", pytest.param("s3", marks=pytest.mark.s3)])
def place(request: pytest.FixtureRequest, tmp_path: Path) -> Place:
    if request.param == "local":
        spec = StoreSpec("local", str(tmp_path / "log"), {"fsync": False})
        return Place(spec, str(tmp_path / "delta"), {})
    server = request.getfixturevalue("s3_server")
    name = uuid.uuid4().hex[:12]
    spec = StoreSpec("s3", server.url(f"t-{name}"), dict(server.storage_options))
    storage = {
        "AWS_ENDPOINT_URL": server.endpoint,
        "AWS_ALLOW_HTTP": "true",
        "AWS_REGION": "us-east-1",
        "AWS_ACCESS_KEY_ID": server.access_key,
        "AWS_SECRET_ACCESS_KEY": server.secret_key,
        "conditional_put": "etag",
    }
    return Place(spec, f"s3://{server.bucket}/delta-{name}/events", storage)


@pytest.fixture(params=["delta", "iceberg"])
def target(request: pytest.FixtureRequest, place: Place, tmp_path: Path) -> Target:
    if request.param == "delta":
        return DeltaTarget(place)
    return IcebergTarget(tmp_path / "warehouse")
