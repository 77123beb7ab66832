"""Structured Streaming from and to arrowlog: a query SIGKILLed mid-run and
restarted from its checkpoint yields every record exactly once downstream."""

from __future__ import annotations

import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pyarrow as pa
import pytest

from tests.conftest import StoreSpec

ROOT = Path(__file__).resolve().parents[2]
FIELDS: list[pa.Field[Any]] = [pa.field("id", pa.int64())]
SCHEMA = pa.schema(FIELDS)
RECORDS = 3000


@pytest.mark.spark
@pytest.mark.slow
def test_a_killed_streaming_query_restarts_exactly_once(tmp_path: Path) -> None:
    spec = StoreSpec("local", str(tmp_path / "log"), {"fsync": False})
    log = spec.connect()
    log.create_topic("src", SCHEMA, partitions=2)
    log.create_topic("dst", SCHEMA, partitions=2)
    producer = log.producer()
    for i in range(0, RECORDS, 50):
        batch = pa.record_batch({"id": list(range(i, i + 50))}, schema=SCHEMA)
        producer.send("src", batch, partition=(i // 50) % 2)
    checkpoint = str(tmp_path / "checkpoint")
    argv = [sys.executable, "-m", "tests.workers", "stream_copy", *spec.argv(), "--out", checkpoint]
    consumer = log.consumer()

    def copied() -> int:
        return sum(consumer.stable_offset("dst", p) for p in (0, 1))

    with subprocess.Popen(
        [*argv, "--action", "run"], cwd=ROOT, stdout=subprocess.PIPE, text=True
    ) as run:
        assert run.stdout is not None and run.stdout.readline().strip() == "STARTED"
        give_up = time.monotonic() + 240
        while copied() < 600 and time.monotonic() < give_up:  # a few micro-batches in
            time.sleep(0.1)
        run.send_signal(signal.SIGKILL)
        run.wait()
    assert 0 < copied() < RECORDS + 4, "killed before any, or after every, micro-batch"
    producer.send("src", pa.record_batch({"id": [RECORDS]}, schema=SCHEMA), partition=0)
    subprocess.run([*argv, "--action", "drain"], cwd=ROOT, check=True, timeout=300)
    ids = sorted(
        int(i or 0) for p in (0, 1) for i in consumer.read("dst", p).column("id").to_pylist()
    )
    assert ids == list(range(RECORDS + 1))  # every record once: none lost, none twice
    assert list(log.store.list("_arrowlog/staging/")) == []  # staged files swept
