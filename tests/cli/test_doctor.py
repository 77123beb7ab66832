"""``arrowlog doctor URL``: a table of checks and its exit codes (0 safe, 1
unsafe, 2 usage, 3 not a store), ``--output json``, ``--record`` and
``topics create``'s refusal of a store recorded unsafe. From issue 28."""

from __future__ import annotations

import json
import re
import socket
from collections.abc import Iterator
from pathlib import Path

import pytest

from arrowlog.cli import main
from arrowlog.storage.doctor import VERDICT_KEY
from arrowlog.storage.registry import register_store, unregister_store
from arrowlog.storage.url import open_store
from arrowlog.testing.seaweedfs import S3Server
from arrowlog.testing.unconditional import TARGET
from tests.support.cli import fails, files, run

CHECKS = ["put-if-absent", "race", "list-after-put", "ranged-get", "presigned-get", "delete",
          "clock"]  # fmt: skip

pytestmark = pytest.mark.slow  # the race starts processes


@pytest.fixture
def unsafe_scheme() -> Iterator[str]:
    """``unsafe+file://``: a local directory whose put-if-absent ignores the condition."""
    register_store("unsafe+file", TARGET)
    try:
        yield "unsafe+file"
    finally:
        unregister_store("unsafe+file")


def test_a_local_directory_is_judged_safe(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    (tmp_path / "kept").write_bytes(b"the user's")
    before = files(tmp_path)

    out = run(capsys, "doctor", str(tmp_path))

    lines = out.splitlines()
    assert lines[0].split() == ["CHECK", "STATUS", "REASON"]
    rows = {line.split()[0]: line.split()[1] for line in lines[1:8]}
    assert list(rows) == CHECKS
    assert rows == {**dict.fromkeys(CHECKS, "safe"), "presigned-get": "unknown"}
    assert lines[-1] == f"file://{tmp_path}: safe"
    after = files(tmp_path)
    assert after is not None
    # the local store's hidden directory for writes in progress stays, empty
    assert {k: v for k, v in after.items() if k != ".arrowlog-tmp"} == before


@pytest.mark.s3
def test_seaweedfs_is_judged_safe_in_json(
    capsys: pytest.CaptureFixture[str], s3_server: S3Server
) -> None:
    url = s3_server.url("doctor")
    options = json.dumps(s3_server.storage_options)
    store = open_store(url, s3_server.storage_options)
    store.put_if_absent("kept", b"the user's")

    out = run(capsys, "doctor", url, "--storage-options", options, "--output", "json")

    found = json.loads(out)
    assert found["safe"] is True and found["failed"] == []
    assert [c["check"] for c in found["checks"]] == CHECKS
    assert {c["status"] for c in found["checks"]} == {"safe"}
    assert [info.key for info in store.list("")] == ["kept"]


def test_a_store_ignoring_the_condition_is_unsafe_and_topics_create_refuses_it(
    capsys: pytest.CaptureFixture[str], tmp_path: Path, unsafe_scheme: str
) -> None:
    code = main(["doctor", f"{unsafe_scheme}://{tmp_path}", "--record"])
    out = capsys.readouterr().out
    assert code == 1
    rows = {line.split()[0]: line for line in out.splitlines()[1:8]}
    assert rows["put-if-absent"].split()[1] == "unsafe"
    assert "a second put-if-absent of an existing key succeeded" in rows["put-if-absent"]
    assert rows["race"].split()[1] == "unsafe" and "all won" in rows["race"]
    assert out.splitlines()[-1].endswith(f"unsafe (put-if-absent, race); recorded in {VERDICT_KEY}")

    create = ["topics", "create", "t", "--root", str(tmp_path), "--schema", "x: int64"]
    err = fails(capsys, 2, *create)
    assert err.startswith("arrowlog: UnsafeStoreError: ")
    assert "put-if-absent:" in err and "race:" in err and "--allow-unsafe-store" in err
    assert not (tmp_path / "_arrowlog" / "topics").exists()

    run(capsys, *create, "--allow-unsafe-store")
    assert "t" in run(capsys, "topics", "list", "--root", str(tmp_path))


def _closed_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def test_a_closed_port_is_no_store(capsys: pytest.CaptureFixture[str]) -> None:
    endpoint = f"http://127.0.0.1:{_closed_port()}"
    err = fails(capsys, 3, "doctor", "s3://bucket/p", "--endpoint-url", endpoint,
                "-o", "key=k", "-o", "secret=s")  # fmt: skip
    assert err.startswith("arrowlog: StoreUnreachableError: s3://bucket/p cannot be examined")


@pytest.mark.s3
def test_a_missing_bucket_is_no_store(
    capsys: pytest.CaptureFixture[str], s3_server: S3Server
) -> None:
    options = json.dumps(s3_server.storage_options)
    err = fails(capsys, 3, "doctor", "s3://no-such-bucket/p", "--storage-options", options)
    assert "StoreUnreachableError" in err and "NoSuchBucket" in err


def test_a_missing_directory_is_no_store_and_is_not_created(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    err = fails(capsys, 3, "doctor", str(tmp_path / "missing"))
    assert "no such directory" in err
    assert not (tmp_path / "missing").exists()
    (tmp_path / "a-file").write_text("not a store")
    err = fails(capsys, 3, "doctor", str(tmp_path / "a-file"))
    assert "a file, not a directory" in err
    assert (tmp_path / "a-file").read_text() == "not a store"


def test_the_clock_check_says_times_as_dates(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    out = run(capsys, "doctor", str(tmp_path))
    clock = next(line for line in out.splitlines() if line.startswith("clock"))
    assert re.search(r"store write time \d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z", clock), clock


def test_usage_errors_exit_2(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    fails(capsys, 2, "doctor", str(tmp_path), "--max-clock-skew", "soon")
    fails(capsys, 2, "doctor", "http://127.0.0.1:1/x")  # a URL naming no store
    assert files(tmp_path) == {}


def test_help_says_what_it_writes_and_the_exit_codes(capsys: pytest.CaptureFixture[str]) -> None:
    out = " ".join(run(capsys, "doctor", "--help").split())
    assert "_arrowlog/doctor/<uuid>/, and is deleted at the end, also when it fails" in out
    for code in ("0 no check found the store unsafe", "1 a check found the store unsafe",
                 "2 usage", "3 not a store"):  # fmt: skip
        assert code in out
