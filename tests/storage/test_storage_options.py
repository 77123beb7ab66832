"""Storage options are checked and coerced at connect, for every backend.

The command line and Spark hand options over as strings: ``anon=false`` must mean
False, ``client_kwargs`` may be JSON, and a mistyped key must be refused by name,
with nothing created or written.
"""

from __future__ import annotations

import re
import warnings
from pathlib import Path
from typing import Any

import pyarrow as pa
import pytest

import arrowlog
from arrowlog.storage.local import LocalStore
from arrowlog.storage.objectstore import OBSTORE_S3_OPTIONS, ObjectStore
from arrowlog.storage.s3 import S3_OPTIONS, S3Store
from arrowlog.storage.url import open_store
from arrowlog.testing import seaweedfs

TRUE_STRINGS = ["true", "True", " TRUE ", "1", "yes", "on"]
FALSE_STRINGS = ["false", "False", "0", "no", "off", " off"]


def refusal(url: str, options: Any, **kwargs: Any) -> str:
    """The one-line message of the InvalidConfigError that connect raises."""
    with pytest.raises(arrowlog.InvalidConfigError) as info:
        arrowlog.connect(url, options, **kwargs)
    message = str(info.value)
    assert "\n" not in message
    return message


# --- local directory ----------------------------------------------------------------


@pytest.mark.parametrize(
    ("value", "expected"),
    [(v, True) for v in [*TRUE_STRINGS, True]] + [(v, False) for v in [*FALSE_STRINGS, False]],
)
def test_local_fsync_takes_booleans_and_their_strings(
    tmp_path: Path, value: object, expected: bool
) -> None:
    store = arrowlog.connect(str(tmp_path / "log"), {"fsync": value}).store
    assert isinstance(store, LocalStore)
    assert store.fsync is expected


def test_local_fsync_defaults_to_true_and_none_means_unset(tmp_path: Path) -> None:
    for options in (None, {}, {"fsync": None}):
        store = arrowlog.connect(str(tmp_path / "log"), options).store
        assert isinstance(store, LocalStore) and store.fsync is True


@pytest.mark.parametrize(
    ("options", "expected"),
    [
        ({"fsync": "maybe"}, "storage option fsync for a local directory must be true or false"),
        ({"fsync": 2}, "must be true or false, got 2"),
        ({"fsync": ""}, "must be true or false, got ''"),
        ({"fsynk": "false"}, "unknown storage option 'fsynk' for a local directory (did you mean "),
        ({"endpoint_url": "http://x"}, "unknown storage option 'endpoint_url'"),
    ],
)
def test_bad_local_options_are_refused_and_nothing_is_created(
    tmp_path: Path, options: dict[str, Any], expected: str
) -> None:
    root = tmp_path / "never"
    message = refusal(str(root), options)
    assert expected in message
    assert "known: fsync" in message or "true or false" in message
    assert not root.exists()
    message = refusal(root.as_uri(), options)
    assert not root.exists()


def test_options_must_be_a_mapping(tmp_path: Path) -> None:
    assert "must be a dict, got list" in refusal(str(tmp_path / "x"), [("fsync", "0")])
    assert not (tmp_path / "x").exists()


# --- memory ---------------------------------------------------------------------------


def test_memory_takes_no_options() -> None:
    assert arrowlog.connect("memory://", {}).list_topics() == []
    assert refusal("memory://", {"fsync": "false"}) == (
        "memory:// takes no storage options, got 'fsync'"
    )


# --- s3 through obstore (the default client) -----------------------------------------


def obstore(options: dict[str, Any]) -> ObjectStore:
    # Opening an S3 store sends no request: it only configures the client.
    store = open_store("s3://bucket/prefix", options)
    assert isinstance(store, ObjectStore)
    return store


def test_s3fs_names_map_onto_obstore_settings() -> None:
    store = obstore(
        {
            "key": "K",
            "secret": "S",
            "token": "T",
            "endpoint_url": "http://127.0.0.1:8333",
            "region_name": "eu-west-3",
            "anon": "false",
            "requester_pays": "true",
            "client_kwargs": '{"verify": "false"}',
        }
    )
    assert store._config == {
        "access_key_id": "K",
        "secret_access_key": "S",
        "session_token": "T",
        "endpoint": "http://127.0.0.1:8333",
        "region": "eu-west-3",
        "request_payer": True,
    }
    # plain HTTP to an http:// endpoint, as s3fs would
    assert store._client == {"allow_http": True, "allow_invalid_certificates": True}
    assert obstore({"anon": "yes"})._config == {"skip_signature": True}
    assert obstore(
        {"client_kwargs": {"region_name": "x", "endpoint_url": "https://e"}}
    )._config == {
        "region": "x",
        "endpoint": "https://e",
    }
    assert obstore({"endpoint_url": "https://e"})._client == {}
    assert obstore({"use_ssl": "false"})._client == {"allow_http": True}
    assert "no AWS profile named 'no-such-profile'" in refusal(
        "s3://bucket/p", {"profile": "no-such-profile"}
    )


def test_an_http_endpoint_from_the_environment_allows_http(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("AWS_ENDPOINT_URL", "http://127.0.0.1:8333")
    assert obstore({})._client == {"allow_http": True}
    monkeypatch.setenv("AWS_ENDPOINT_URL", "https://s3.example.com")
    assert obstore({})._client == {}


@pytest.mark.parametrize("name", [k for k, kind in OBSTORE_S3_OPTIONS.items() if kind == "bool"])
def test_every_obstore_boolean_is_coerced_from_strings(name: str) -> None:
    for text in FALSE_STRINGS:
        obstore({name: text})
    for text in TRUE_STRINGS:
        obstore({name: text})
    assert "must be true or false, got 'maybe'" in refusal("s3://bucket/p", {name: "maybe"})


@pytest.mark.parametrize(
    ("options", "expected"),
    [
        (
            {"max_concurrency": "4"},
            "storage option 'max_concurrency' is a setting of the s3fs client: add client=s3fs",
        ),
        ({"config_kwargs": "{}"}, "'config_kwargs' is a setting of the s3fs client"),
        ({"client_kwargs": '{"proxies": {}}'}, "client_kwargs.proxies is not known to the obst"),
        ({"client": "boto"}, "storage option client for s3:// must be one of obstore, s3fs"),
        ({"endpoint": "http://x"}, "unknown storage option 'endpoint' for s3:// (did you mean "),
        ({"anon": "nope"}, "storage option anon for s3:// must be true or false, got 'nope'"),
        ({"endpoint_url": 9000}, "endpoint_url for s3:// must be a string, got 9000"),
        (
            {"region_name": "a", "client_kwargs": {"region_name": "b"}},
            "region_name and client_kwargs.region_name disagree: 'a' vs 'b'",
        ),
    ],
)
def test_bad_obstore_options_are_refused_one_message_each(
    options: dict[str, Any], expected: str
) -> None:
    message = refusal("s3://bucket/prefix", options)
    assert expected in message
    if "unknown" in expected:
        assert "; known: allow_http, anon, client, client_kwargs," in message


@pytest.mark.parametrize(
    ("url", "options", "expected"),
    [
        ("gs://b/p", {"key": "x"}, "unknown storage option 'key' for gs://"),
        ("az://c/p", {"use_emulator": "perhaps"}, "use_emulator for az:// must be true or false"),
        ("gs:///p", {}, "a gs:// URL needs a bucket"),
    ],
)
def test_gcs_and_azure_options_are_obstores_own(url: str, options: Any, expected: str) -> None:
    with pytest.raises(arrowlog.ArrowLogError, match=re.escape(expected)):
        arrowlog.connect(url, options)
    store = open_store("gs://bucket/p", {"skip_signature": "true", "allow_http": "true"})
    assert isinstance(store, ObjectStore)
    assert (store.url, store._config, store._client) == (
        "gs://bucket/p",
        {"skip_signature": True},
        {"allow_http": True},
    )
    # what object_store itself refuses, at connect, in one line
    message = refusal("gs://bucket/p", {"service_account_key": "{}"})
    assert message.startswith("storage options for gs://bucket/p: Generic GCS error: GCP cred")
    store = open_store("az://container", {"use_emulator": "true"})
    assert isinstance(store, ObjectStore)
    assert (store.url, store._config) == ("az://container", {"use_emulator": True})


# --- s3 through s3fs (client=s3fs) ---------------------------------------------------


def s3_store(options: dict[str, Any]) -> S3Store:
    store = open_store("s3://bucket/prefix", {**options, "client": "s3fs"})
    assert isinstance(store, S3Store)
    return store


@pytest.mark.parametrize("name", [k for k, kind in S3_OPTIONS.items() if kind == "bool"])
def test_every_s3_boolean_is_coerced_from_strings(name: str) -> None:
    for text in TRUE_STRINGS:
        assert getattr(s3_store({name: text})._fs, name) is True
    for text in FALSE_STRINGS:
        assert getattr(s3_store({name: text})._fs, name) is False


def test_s3_integers_and_json_objects_are_coerced_from_strings() -> None:
    fs = s3_store(
        {
            "default_block_size": "8388608",
            "max_concurrency": " 4",
            "client_kwargs": '{"region_name": "eu-west-3"}',
            "config_kwargs": '{"connect_timeout": 5}',
            "s3_additional_kwargs": '{"ServerSideEncryption": "AES256"}',
        }
    )._fs
    assert fs.default_block_size == 8388608
    assert fs.max_concurrency == 4
    assert fs.client_kwargs == {"region_name": "eu-west-3"}
    assert fs.config_kwargs == {"connect_timeout": 5}
    assert fs.s3_additional_kwargs == {"ServerSideEncryption": "AES256"}
    # real values pass unchanged
    fs = s3_store({"anon": True, "client_kwargs": {"region_name": "x"}, "max_concurrency": 3})._fs
    assert (fs.anon, fs.client_kwargs, fs.max_concurrency) == (True, {"region_name": "x"}, 3)


def test_s3_region_name_goes_into_client_kwargs() -> None:
    fs = s3_store({"region_name": "eu-west-3"})._fs
    assert fs.client_kwargs == {"region_name": "eu-west-3"}
    fs = s3_store({"region_name": "a", "client_kwargs": '{"verify": false}'})._fs
    assert fs.client_kwargs == {"verify": False, "region_name": "a"}
    assert "disagree: 'a' vs 'b'" in refusal(
        "s3://bucket/p",
        {"region_name": "a", "client_kwargs": {"region_name": "b"}, "client": "s3fs"},
    )


@pytest.mark.parametrize(
    ("options", "expected"),
    [
        ({"anon": "nope"}, "storage option anon for s3:// must be true or false, got 'nope'"),
        ({"use_ssl": 1}, "storage option use_ssl for s3:// must be true or false, got 1"),
        ({"max_concurrency": "four"}, "max_concurrency for s3:// must be an integer, got 'four'"),
        ({"default_block_size": True}, "default_block_size for s3:// must be an integer, got True"),
        ({"default_block_size": "1.5"}, "must be an integer, got '1.5'"),
        ({"client_kwargs": "{region_name: x}"}, "client_kwargs for s3:// must be a JSON object"),
        ({"config_kwargs": "[1, 2]"}, "config_kwargs for s3:// must be a JSON object"),
        ({"client_kwargs": 3}, "client_kwargs for s3:// must be a JSON object"),
        ({"endpoint_url": 9000}, "endpoint_url for s3:// must be a string, got 9000"),
        ({"endpoint": "http://x"}, "unknown storage option 'endpoint' for s3:// (did you mean "),
        ({"session": "x"}, "unknown storage option 'session' for s3://"),
        ({"skip_instance_cache": "false"}, "unknown storage option 'skip_instance_cache'"),
    ],
)
def test_bad_s3fs_options_are_refused_one_message_each(
    options: dict[str, Any], expected: str
) -> None:
    message = refusal("s3://bucket/prefix", {**options, "client": "s3fs"})
    assert expected in message
    if "unknown" in expected:
        assert "; known: anon, cache_regions, client, client_kwargs," in message
        assert "endpoint_url" in message and "region_name" in message


@pytest.mark.s3
@pytest.mark.parametrize("client", ["obstore", "s3fs"])
def test_string_options_work_against_a_real_s3_server(
    s3_server: seaweedfs.S3Server, client: str
) -> None:
    """Everything as strings, as the CLI and Spark pass them: the server enforces
    auth, so ``anon="false"`` must really be False for this to write anything."""
    options = {
        "client": client,
        "key": s3_server.access_key,
        "secret": s3_server.secret_key,
        "endpoint_url": s3_server.endpoint,
        "anon": "false",
        "use_ssl": "false",
        "client_kwargs": '{"region_name": "us-east-1"}',
    }
    if client == "s3fs":
        options["max_concurrency"] = "2"
    url = s3_server.url(f"string-options-{client}")
    schema = pa.schema([("x", pa.int64())])
    with arrowlog.connect(url, options) as log:
        log.create_topic("t", schema)
        log.append("t", pa.record_batch({"x": [1, 2]}, schema=schema), expected_offset=0)
    with (
        arrowlog.connect(url, {**options, "anon": "true"}) as anonymous,
        pytest.raises(arrowlog.StoreError, match=r"AccessDenied|403 Forbidden"),
    ):
        anonymous.read("t")
    with arrowlog.connect(url, options) as log:
        assert log.read("t")["x"].to_pylist() == [1, 2]


# --- the unsafe fsspec stores ------------------------------------------------------------


def test_unsafe_fsspec_options_come_from_the_filesystem_signature(tmp_path: Path) -> None:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        store = open_store(
            f"local://{tmp_path}/log", {"auto_mkdir": "false"}, allow_unsafe_store=True
        )
    assert store._fs.auto_mkdir is False  # type: ignore[attr-defined]
    message = refusal(f"local://{tmp_path}/never", {"auto_mkdirs": "1"}, allow_unsafe_store=True)
    assert message == (
        "unknown storage option 'auto_mkdirs' for local:// (did you mean 'auto_mkdir'?); "
        "known: auto_mkdir"
    )
    assert "auto_mkdir for local:// must be true or false" in refusal(
        f"local://{tmp_path}/never", {"auto_mkdir": "sometimes"}, allow_unsafe_store=True
    )
    assert not (tmp_path / "never").exists()
