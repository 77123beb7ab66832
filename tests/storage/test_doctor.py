"""The doctor (:mod:`arrowlog.storage.doctor`) judges every backend safe, a store
that ignores put-if-absent's condition unsafe, leaves nothing behind, and its
recorded verdict keeps ``create_topic`` off an unsafe store unless overridden.
From issue 28 ("a doctor for the store a user brings")."""

from __future__ import annotations

import http.server
import os
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pyarrow as pa
import pytest

import arrowlog
from arrowlog.errors import StoreError, StoreUnreachableError, UnsafeStoreError
from arrowlog.storage import Blob, Store
from arrowlog.storage.doctor import VERDICT_KEY, Check, examine
from arrowlog.storage.memory import MemoryStore
from arrowlog.storage.url import open_store
from arrowlog.storage.wrappers import CountingStore
from arrowlog.testing.unconditional import IgnoresConditionStore
from tests.support.stores import StoreSpec

SCHEMA = pa.schema([("x", pa.int64())])
#: the backends whose objects have pre-signed URLs (the JVM reader's way in)
SIGNS_URLS = {"s3", "s3fs", "azure", "gcs"}


def keys(store: Store) -> list[str]:
    return [info.key for info in store.list("")]


@pytest.mark.slow
def test_every_backend_is_judged_safe_and_left_as_found(store_spec: StoreSpec) -> None:
    store = store_spec.open()
    store.put_if_absent("data/kept", b"the user's")
    before = keys(store)

    diagnosis = examine(store)

    statuses = {check.name: check.status for check in diagnosis.checks}
    presigned = "safe" if store_spec.kind in SIGNS_URLS else "unknown"
    race = next(c for c in diagnosis.checks if c.name == "race")
    if store_spec.kind == "memory" and race.status == "unknown":
        # threads under the GIL mostly take turns: a race that tested nothing says so
        assert "took turns" in race.reason, race.reason
        statuses["race"] = "safe"
    assert statuses == {
        "put-if-absent": "safe",
        "race": "safe",
        "list-after-put": "safe",
        "ranged-get": "safe",
        "presigned-get": presigned,
        "delete": "safe",
        "clock": "safe",
    }, diagnosis.checks
    assert diagnosis.safe and diagnosis.failed == ()
    racers = "threads" if store_spec.kind == "memory" else "processes"
    assert f"4 {racers}" in race.reason
    if store_spec.kind != "memory":
        assert "one winner each" in race.reason and "had puts in flight at once" in race.reason
    assert keys(store) == before and diagnosis.left_behind == ()


@pytest.mark.slow
@pytest.mark.parametrize("inner", ["local", "memory"])
def test_a_store_ignoring_the_condition_is_judged_unsafe(inner: str, tmp_path: Path) -> None:
    base = open_store(str(tmp_path / "store") if inner == "local" else "memory://")
    store = IgnoresConditionStore(base)

    diagnosis = examine(store)

    assert not diagnosis.safe
    assert diagnosis.failed == ("put-if-absent", "race")
    reasons = {c.name: c.reason for c in diagnosis.checks}
    assert "a second put-if-absent of an existing key succeeded" in reasons["put-if-absent"]
    assert "64 keys went wrong" in reasons["race"] and "0, 1, 2, 3 all won" in reasons["race"]
    assert keys(base) == []


class _ChecksThenWrites(IgnoresConditionStore):
    """A put-if-absent that looks, then writes: a second put of a key is
    refused, but two puts of one key in flight at once both win."""

    def __reduce__(self) -> tuple[Any, ...]:
        return (_ChecksThenWrites, (self.inner,))

    def put_if_absent(self, key: str, data: Blob) -> None:
        try:
            self.inner.head(key)
        except FileNotFoundError:
            super().put_if_absent(key, data)
            return
        raise FileExistsError(key)


class _InvertsTheCondition(IgnoresConditionStore):
    """If-None-Match inverted (as a Ceph RGW backend had it): a put-if-absent
    of a new key is refused, one of an existing key overwrites it."""

    def __reduce__(self) -> tuple[Any, ...]:
        return (_InvertsTheCondition, (self.inner,))

    def put_if_absent(self, key: str, data: Blob) -> None:
        try:
            self.inner.head(key)
        except FileNotFoundError:
            raise FileExistsError(key) from None  # the 412 an existing key should get
        super().put_if_absent(key, data)


def test_a_store_inverting_the_condition_is_judged_unsafe_not_unreachable(
    tmp_path: Path,
) -> None:
    base = open_store(str(tmp_path))
    store = _InvertsTheCondition(base)

    diagnosis = examine(store)

    assert diagnosis.failed == ("put-if-absent",)
    assert "refused as if it existed" in diagnosis.checks[0].reason
    assert {c.status for c in diagnosis.checks[1:]} == {"unknown"}
    assert keys(base) == [] and list(tmp_path.iterdir()) == []


_HELD_DOCTOR = """
import pathlib, sys, time
from arrowlog.storage.doctor import examine
from arrowlog.storage.local import LocalStore

class Holds(LocalStore):
    def put_if_absent(self, key, data):
        super().put_if_absent(key, data)
        if key.endswith("/claim"):
            pathlib.Path(sys.argv[2]).touch()
            time.sleep(600)

examine(Holds(sys.argv[1]))
"""


def test_a_killed_runs_objects_are_removed_by_a_later_run_once_stale(tmp_path: Path) -> None:
    root, held = tmp_path / "store", tmp_path / "held"
    root.mkdir()
    env = {**os.environ, "PYTHONPATH": str(Path(__file__).resolve().parents[2])}
    doctor = subprocess.Popen([sys.executable, "-c", _HELD_DOCTOR, str(root), str(held)], env=env)
    try:
        for _ in range(600):  # until the run is held after its put-if-absent check's put
            if held.exists() or doctor.poll() is not None:
                break
            time.sleep(0.1)
        assert held.exists(), "the doctor never reached its hold"
    finally:
        doctor.send_signal(signal.SIGKILL)
        doctor.wait()
    store = open_store(str(root))
    left = keys(store)
    assert left and all(key.startswith("_arrowlog/doctor/") for key in left), left

    examine(store)
    assert keys(store) == left  # fresh: it could be a doctor still running

    old = time.time() - 2 * 3600
    for path in root.rglob("*"):
        os.utime(path, (old, old))
    diagnosis = examine(store)

    assert keys(store) == [] and diagnosis.left_behind == ()
    # what stays is the hidden directory every writer of a local store makes
    assert [p.name for p in root.iterdir()] == [".arrowlog-tmp"]


@pytest.fixture
def threads_take_turns() -> Iterator[None]:
    """No thread switch inside a put: the doctor's racing threads take turns."""
    before = sys.getswitchinterval()
    sys.setswitchinterval(1000.0)
    yield
    sys.setswitchinterval(before)


@pytest.mark.usefixtures("threads_take_turns")
def test_a_race_whose_puts_never_overlapped_is_unknown_not_safe() -> None:
    store = _ChecksThenWrites(MemoryStore())

    diagnosis = examine(store)

    race = next(c for c in diagnosis.checks if c.name == "race")
    assert race.status == "unknown", race
    assert "no two puts of one key were in flight at once" in race.reason
    assert diagnosis.checks[0] == Check(
        "put-if-absent",
        "safe",
        "a second put-if-absent of an existing key was refused; the first object kept",
    )


@pytest.mark.slow
def test_create_topic_refuses_a_store_recorded_unsafe_unless_overridden(tmp_path: Path) -> None:
    examine(IgnoresConditionStore(open_store(str(tmp_path))), record=True)
    log = arrowlog.connect(str(tmp_path))

    with pytest.raises(UnsafeStoreError) as refused:
        log.create_topic("t", SCHEMA)

    assert refused.value.failed == ("put-if-absent", "race")
    assert not refused.value.retriable
    message = str(refused.value)
    assert "put-if-absent: a second put-if-absent" in message
    assert "allow_unsafe_store=True" in message and "--allow-unsafe-store" in message
    assert keys(log.store) == [VERDICT_KEY]  # nothing written

    log.create_topic("t", SCHEMA, allow_unsafe_store=True)
    assert log.list_topics() == ["t"]


def test_a_safe_verdict_replaces_an_unsafe_one() -> None:
    store = MemoryStore()
    examine(IgnoresConditionStore(store), record=True)
    with pytest.raises(UnsafeStoreError):
        arrowlog.connect(store).create_topic("t", SCHEMA)

    assert examine(store, record=True).safe

    arrowlog.connect(store).create_topic("t", SCHEMA)
    assert keys(store).count(VERDICT_KEY) == 1


class _Asked(CountingStore):
    """Counts the GETs of each key, found or not."""

    def __init__(self, inner: Store) -> None:
        super().__init__(inner)
        self.asked: list[str] = []

    def get(self, key: str) -> bytes | memoryview:
        self.asked.append(key)
        return super().get(key)


def test_a_store_never_examined_costs_create_topic_one_get_and_nothing_else() -> None:
    store = _Asked(MemoryStore())
    log = arrowlog.connect(store)

    log.create_topic("t", SCHEMA)
    assert store.asked.count(VERDICT_KEY) == 1
    log.partition("t", 0).append(pa.record_batch({"x": [1, 2]}, schema=SCHEMA))
    assert log.consumer().read("t", partition=0).num_rows == 2

    assert store.asked.count(VERDICT_KEY) == 1


class _Interrupting(CountingStore):
    """A store whose ranged reads fail with an error the doctor does not expect."""

    def get_range(self, key: str, start: int, end: int) -> bytes:
        raise RuntimeError("interrupted mid-check")


def test_what_the_doctor_wrote_is_removed_when_it_fails() -> None:
    store = _Interrupting(MemoryStore())

    with pytest.raises(RuntimeError, match="interrupted mid-check"):
        examine(store)

    assert store.counts["put_if_absent"] > 1  # it had written, and removed
    assert keys(store) == []


@pytest.fixture
def web_server() -> Iterator[tuple[str, list[str]]]:
    """A plain HTTP server (no object store): its URL and the methods it was sent."""
    seen: list[str] = []

    class Handler(http.server.BaseHTTPRequestHandler):
        def log_message(self, format: str, *args: object) -> None:
            pass

        def _answer(self) -> None:
            seen.append(self.command)
            self.send_response(404)
            self.send_header("Content-Length", "0")
            self.end_headers()

        do_GET = do_PUT = do_POST = do_HEAD = do_DELETE = _answer

    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}", seen
    finally:
        server.shutdown()
        server.server_close()


def test_a_web_server_is_no_store_and_gets_no_write(web_server: tuple[str, list[str]]) -> None:
    endpoint, seen = web_server
    store = open_store("s3://bucket/p", {"endpoint_url": endpoint, "key": "k", "secret": "s"})

    with pytest.raises(StoreUnreachableError, match="is the endpoint an object store"):
        examine(store)

    assert seen and set(seen) == {"GET"}  # a listing; no PUT, no DELETE


@pytest.mark.s3
def test_a_missing_bucket_is_no_store(s3_server: object) -> None:
    from arrowlog.testing.seaweedfs import S3Server

    assert isinstance(s3_server, S3Server)
    store = open_store("s3://no-such-bucket-here/p", s3_server.storage_options)

    with pytest.raises(StoreUnreachableError, match="NoSuchBucket") as raised:
        examine(store)

    assert isinstance(raised.value, StoreError)


_UNSAFE_CHECK = {"check": "race", "status": "unsafe", "reason": "two winners"}


@pytest.mark.parametrize(
    "verdict",
    [
        pytest.param(
            b'{"safe": false, "checks": [], "checked_ms": 100000000000000000000}', id="far-future"
        ),
        pytest.param(b'{"safe": false, "checks": [], "checked_ms": 1e400}', id="infinite-time"),
        pytest.param(b"[" * 100_000, id="nested-too-deep"),
        pytest.param(b"\xff\xfe not json", id="not-utf8"),
        pytest.param(
            b'{"safe": true, "checked_ms": 0, "checks": [{"check": "race", "status": "unsafe", '
            b'"reason": "two winners"}]}',
            id="safe-yet-a-check-unsafe",
        ),
    ],
)
def test_a_corrupt_or_contradictory_verdict_refuses_create_topic_with_unsafe_store_error(
    verdict: bytes,
) -> None:
    store = MemoryStore()
    store.put_if_absent(VERDICT_KEY, verdict)

    with pytest.raises(UnsafeStoreError) as refused:
        arrowlog.connect(store).create_topic("t", SCHEMA)

    assert "allow_unsafe_store=True" in str(refused.value)
    assert keys(store) == [VERDICT_KEY]  # nothing written
    arrowlog.connect(store).create_topic("t", SCHEMA, allow_unsafe_store=True)
