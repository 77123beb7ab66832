"""Choosing a store from a URL, and refusing stores that cannot keep the log safe."""

from __future__ import annotations

import time
import warnings
from pathlib import Path

import pyarrow as pa
import pytest

import arrowlog
from arrowlog.storage.fsspec_store import FsspecStore
from arrowlog.storage.local import LocalStore
from arrowlog.storage.memory import MemoryStore
from arrowlog.storage.objectstore import ObjectStore
from arrowlog.storage.url import open_store
from arrowlog.testing import seaweedfs


def test_urls_pick_their_backends(tmp_path: Path) -> None:
    assert isinstance(open_store("memory://"), MemoryStore)
    assert isinstance(open_store(str(tmp_path / "a")), LocalStore)
    local = open_store((tmp_path / "b").as_uri())
    assert isinstance(local, LocalStore)
    assert local.url == (tmp_path / "b").as_uri()


@pytest.mark.parametrize("name", ["a b", "a+b", "50%", "a#b", "a?b", "é"])
def test_a_local_store_url_opens_the_same_directory(tmp_path: Path, name: str) -> None:
    """``store.url`` is a percent-encoded file:// URL (as the README passes it to
    Spark): opening it finds the same directory, not one named after the escapes."""
    log = arrowlog.connect(str(tmp_path / name))
    log.create_topic("t", pa.schema([("v", pa.int64())]))
    again = arrowlog.connect(log.store.url)
    assert again.list_topics() == ["t"]
    assert sorted(p.name for p in tmp_path.iterdir()) == [name]


def test_reading_a_root_that_does_not_exist_creates_nothing(tmp_path: Path) -> None:
    log = arrowlog.connect(str(tmp_path / "typo" / "deeper"))
    assert log.list_topics() == []
    with pytest.raises(arrowlog.UnknownTopicOrPartitionError):
        log.read("t")
    assert list(tmp_path.iterdir()) == []
    log.create_topic("t", pa.schema([("v", pa.int64())]))  # the first write makes it
    assert (tmp_path / "typo" / "deeper").is_dir()


def test_each_memory_connection_is_a_fresh_store() -> None:
    a = arrowlog.connect("memory://x")
    a.create_topic("t", pa.schema([("x", pa.int8())]))
    assert arrowlog.connect("memory://x").list_topics() == []
    assert arrowlog.connect(a.store).list_topics() == ["t"]


def test_a_filesystem_without_atomic_put_if_absent_is_refused(tmp_path: Path) -> None:
    # fsspec's own local filesystem does check-then-write: two writers can both win.
    with pytest.raises(arrowlog.UnsupportedStoreError, match="atomic put-if-absent"):
        arrowlog.connect(f"local://{tmp_path}")
    assert list(tmp_path.iterdir()) == []


def test_an_explicit_opt_in_works_with_a_warning(tmp_path: Path) -> None:
    with pytest.warns(UserWarning, match="without atomic put-if-absent"):
        log = arrowlog.connect(f"local://{tmp_path}", allow_unsafe_store=True)
    assert isinstance(log.store, FsspecStore)
    schema = pa.schema([("x", pa.int64())])
    log.create_topic("t", schema)
    log.append("t", pa.record_batch({"x": [1, 2]}, schema=schema), expected_offset=0)
    assert log.read("t")["x"].to_pylist() == [1, 2]


@pytest.mark.parametrize("protocol", ["local", "memory"])
def test_an_fsspec_store_tells_when_objects_were_written(tmp_path: Path, protocol: str) -> None:
    root = str(tmp_path) if protocol == "local" else f"/{tmp_path.name}"
    store = FsspecStore(protocol, root, {})
    before = time.time() * 1000
    store.put_if_absent("a/x", b"1")
    store.put_if_absent("a/y", b"2")
    after = time.time() * 1000
    stamps = [info.modified_ms for info in store.list("a/")]
    stamps.append(store.head("a/y").modified_ms)
    assert all(ms is not None and before - 60_000 <= ms <= after + 60_000 for ms in stamps)


def test_an_unsafe_store_object_is_refused_without_opt_in(tmp_path: Path) -> None:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        store = open_store(f"local://{tmp_path}", allow_unsafe_store=True)
    with pytest.raises(arrowlog.UnsupportedStoreError):
        arrowlog.connect(store)


def test_unknown_protocols_and_remote_file_urls_are_refused() -> None:
    with pytest.raises(arrowlog.UnsupportedStoreError, match="unknown store protocol"):
        arrowlog.connect("nosuchfs://x/y")
    with pytest.raises(arrowlog.UnsupportedStoreError, match="local path"):
        arrowlog.connect("file://otherhost/data")
    with pytest.raises(arrowlog.InvalidConfigError, match="unknown storage option"):
        open_store("/tmp/x", {"bogus": 1})
    with pytest.raises(arrowlog.UnsupportedStoreError, match="needs a bucket"):
        arrowlog.connect("s3:///prefix")


def test_an_s3_root_prefix_that_escapes_is_refused() -> None:
    with pytest.raises(arrowlog.InvalidNameError):
        arrowlog.connect("s3://bucket/../other", {"anon": True})


@pytest.mark.s3
@pytest.mark.parametrize("how", ["option", "AWS_PROFILE"])
def test_s3_credentials_and_region_come_from_a_profile_as_the_aws_cli_finds_them(
    s3_server: seaweedfs.S3Server,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    how: str,
) -> None:
    """object_store alone reads only AWS_* variables and instance roles; a data
    engineer's laptop has ~/.aws files with profiles. Both clients find them."""
    for var in ("AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY", "AWS_SESSION_TOKEN",
                "AWS_PROFILE", "AWS_REGION", "AWS_DEFAULT_REGION"):  # fmt: skip
        monkeypatch.delenv(var, raising=False)
    (tmp_path / "credentials").write_text(
        f"[lab]\naws_access_key_id = {s3_server.access_key}\n"
        f"aws_secret_access_key = {s3_server.secret_key}\n"
    )
    (tmp_path / "config").write_text("[profile lab]\nregion = eu-west-3\n")
    monkeypatch.setenv("AWS_SHARED_CREDENTIALS_FILE", str(tmp_path / "credentials"))
    monkeypatch.setenv("AWS_CONFIG_FILE", str(tmp_path / "config"))
    options = {"endpoint_url": s3_server.endpoint}
    if how == "option":
        options["profile"] = "lab"
    else:
        monkeypatch.setenv("AWS_PROFILE", "lab")
    schema = pa.schema([("x", pa.int64())])
    for client in ("obstore", "s3fs"):
        url = s3_server.url(f"profile-{how}-{client}")
        store = open_store(url, {**options, "client": client})
        if client == "obstore":
            assert isinstance(store, ObjectStore)
            assert store._store.config["region"] == "eu-west-3"
        with arrowlog.connect(store) as log:
            log.create_topic("t", schema)
            log.append("t", pa.record_batch({"x": [7]}, schema=schema), expected_offset=0)
            assert log.read("t")["x"].to_pylist() == [7]


def test_missing_s3_credentials_fail_at_once_not_after_retries(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    for var in ("AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY", "AWS_PROFILE"):
        monkeypatch.delenv(var, raising=False)
    monkeypatch.setenv("AWS_CONFIG_FILE", "/nonexistent")
    monkeypatch.setenv("AWS_SHARED_CREDENTIALS_FILE", "/nonexistent")
    monkeypatch.setenv("AWS_EC2_METADATA_DISABLED", "true")
    store = open_store("s3://bucket/prefix", {"endpoint_url": "http://127.0.0.1:9"})
    with pytest.raises(arrowlog.StoreError, match="NoCredentialsError") as info:
        store.get("x")
    assert not info.value.retriable
