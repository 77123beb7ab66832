"""A representative set of commands against a real S3 server (SeaweedFS):
endpoint from ARROWLOG_ENDPOINT_URL, credentials as s3fs reads them (AWS_*)."""

from __future__ import annotations

import functools
import http.server
import json
import threading
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest

from arrowlog.jobs.export_iceberg import CatalogConfig, read_iceberg
from arrowlog.testing.seaweedfs import S3Server
from tests.support.cli import build_mixed_log, fails, load_then_backfill, run

pytestmark = pytest.mark.s3


@pytest.fixture
def s3_root(s3_server: S3Server, monkeypatch: pytest.MonkeyPatch) -> str:
    url = s3_server.url(f"cli-{uuid.uuid4().hex[:10]}")
    monkeypatch.setenv("ARROWLOG_ROOT", url)
    monkeypatch.setenv("ARROWLOG_ENDPOINT_URL", s3_server.endpoint)
    monkeypatch.setenv("AWS_ACCESS_KEY_ID", s3_server.access_key)
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", s3_server.secret_key)
    monkeypatch.setenv("AWS_DEFAULT_REGION", "us-east-1")
    return url


def bucket_listing(server: S3Server) -> dict[str, int]:
    import boto3

    client = boto3.client(
        "s3", endpoint_url=server.endpoint, aws_access_key_id=server.access_key,
        aws_secret_access_key=server.secret_key, region_name="us-east-1",
    )  # fmt: skip
    out = {}
    for page in client.get_paginator("list_objects_v2").paginate(Bucket=server.bucket):
        out.update({o["Key"]: o["Size"] for o in page.get("Contents", [])})
    return out


def test_commands_against_s3(
    s3_root: str, s3_server: S3Server, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    log = build_mixed_log(s3_root, s3_server.storage_options)
    got = [
        json.loads(line) for line in run(capsys, "consume", "t", "--output", "json").splitlines()
    ]
    assert [r["offset"] for r in got] == [0, 1, 2, 6, 7, 9]
    run(capsys, "topics", "create", "e", "--schema", "id: int64 not null", "--partitions", "2")
    data = tmp_path / "in.jsonl"
    data.write_text("".join(f'{{"id": {i}}}\n' for i in range(10)))
    run(capsys, "produce", "e", "--input", str(data), "--key", "id")
    offsets = json.loads(run(capsys, "get-offsets", "e", "--output", "json"))
    assert sum(r["offset"] for r in offsets) == 10
    run(capsys, "groups", "reset-offsets", "g", "--topic", "t", "--to-offset", "6", "--execute")
    [lag] = json.loads(run(capsys, "groups", "describe", "g", "--output", "json"))
    assert (lag["current_offset"], lag["log_end_offset"], lag["lag"]) == (6, 10, 4)
    assert log.consumer(group_id="g").committed("t", 0) == 6
    # read-only commands leave the whole bucket as it was; an unknown id creates nothing
    before = bucket_listing(s3_server)
    for line in ("topics list", "topics describe", "consume t --max-records 2", "groups list",
                 "transactions list", "transactions find-hanging --all", "producers t",
                 "dump --topic t --offset 6", "metrics"):  # fmt: skip
        run(capsys, *line.split())
    assert "unknown transactional id 'nope'" in fails(capsys, 3, "transactions", "abort", "nope")
    assert fails(capsys, 3, "consume", "missing")
    assert bucket_listing(s3_server) == before


def test_a_missing_bucket_is_one_line(s3_root: str, capsys: pytest.CaptureFixture[str]) -> None:
    err = fails(
        capsys, 3, "topics", "list", "--root", f"s3://no-such-bucket-{uuid.uuid4().hex[:8]}/x"
    )
    assert "NoSuchBucket" in err


class _Quiet(http.server.SimpleHTTPRequestHandler):
    def log_message(self, format: str, *args: object) -> None:
        pass  # its access log would land in the command's captured stderr


@pytest.fixture
def http_404(tmp_path: Path) -> Iterator[str]:
    """A plain HTTP server on 127.0.0.1 that answers 404 to everything S3 asks."""
    handler = functools.partial(_Quiet, directory=str(tmp_path))
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}"
    finally:
        server.shutdown()
        server.server_close()


def test_a_404_endpoint_is_one_clear_line(
    s3_root: str, http_404: str, capsys: pytest.CaptureFixture[str]
) -> None:
    err = fails(capsys, 3, "topics", "list", "--endpoint-url", http_404)
    assert "check the endpoint URL and that the bucket exists" in err


def test_write_commands_against_s3(
    s3_root: str, s3_server: S3Server, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Every command that writes, on S3 as on a directory: bulk loads resume,
    alter and delete change the topic, abort ends a hanging transaction."""
    import pyarrow as pa

    import arrowlog

    table = load_then_backfill(capsys, "l", tmp_path)
    log = arrowlog.connect(s3_root, s3_server.storage_options)
    assert log.read("l", 0).equals(table)
    assert "now has 3 partition(s)" in run(capsys, "topics", "alter", "l", "--partitions", "3")
    assert log.topic("l", refresh=True).partitions == 3
    at = ("--time", "earliest", "--partition", "0", "--output", "json")
    [first] = json.loads(run(capsys, "get-offsets", "l", *at))
    assert first["offset"] == 0

    hanging = log.producer(transactional_id="stuck")
    hanging.init_transactions()
    hanging.begin_transaction()
    hanging.send("l", pa.record_batch({"x": [1]}), partition=1)  # and it never ends
    assert "stuck" in run(capsys, "transactions", "describe", "stuck")
    run(capsys, "transactions", "abort", "stuck")
    # aborted by the fence (its epoch skipped); no marker: no entry named l/1
    assert log.stable_offsets("l") == log.end_offsets("l") == {0: 1000, 1: 1, 2: 0}

    log.consumer(group_id="g").commit({("l", 0): 10})
    run(capsys, "groups", "delete", "g")
    assert "g" not in run(capsys, "groups", "list").split()
    topic_prefix = s3_root.split("/", 3)[3] + "/l/"

    def segments() -> list[str]:
        return [k for k in bucket_listing(s3_server) if k.startswith(topic_prefix)
                and k.endswith(".arrow")]  # fmt: skip

    assert len(segments()) == 5  # 4 loaded and a record (its abort needed no marker)
    assert "deleted topic l" in run(capsys, "topics", "delete", "l")
    assert segments() == []
    assert fails(capsys, 3, "consume", "l")


def test_export_iceberg_from_a_log_on_s3(
    s3_root: str, s3_server: S3Server, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """export-iceberg from a log on S3 into a local warehouse: the bucket is
    only read."""
    build_mixed_log(s3_root, s3_server.storage_options)
    before = bucket_listing(s3_server)
    warehouse = str(tmp_path / "warehouse")
    out = run(capsys, "export-iceberg", "t", "lake.t", "--warehouse", warehouse, "--no-progress")
    assert "exported 6 rows of t to lake.t" in out
    out = run(capsys, "export-iceberg", "t", "lake.t", "--warehouse", warehouse, "--no-progress")
    assert "exported 0 rows of t to lake.t (no new snapshot)" in out
    table = read_iceberg(CatalogConfig.sqlite(warehouse), "lake.t")
    offsets: list[int] = table.column("offset").to_pylist()  # type: ignore[assignment]
    xs: list[int] = table.column("x").to_pylist()  # type: ignore[assignment]
    assert sorted(zip(offsets, xs, strict=True)) == [(o, o) for o in (0, 1, 2, 6, 7, 9)]
    assert bucket_listing(s3_server) == before
