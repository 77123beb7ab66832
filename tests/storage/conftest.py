"""The storage suite runs on every backend: both clients of ``s3://``, and
Azure Blob Storage against Azurite."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.support.stores import CLOUD_KINDS, SHARED_STORE_KINDS, STORE_KINDS, StoreSpec, spec_for

S3FS = pytest.param("s3fs", id="s3fs", marks=pytest.mark.s3)


@pytest.fixture(params=[*STORE_KINDS, S3FS, *CLOUD_KINDS])
def store_spec(request: pytest.FixtureRequest, tmp_path: Path) -> StoreSpec:
    return spec_for(request.param, tmp_path, request)


@pytest.fixture(params=[*SHARED_STORE_KINDS, S3FS, *CLOUD_KINDS])
def shared_store_spec(request: pytest.FixtureRequest, tmp_path: Path) -> StoreSpec:
    return spec_for(request.param, tmp_path, request)
