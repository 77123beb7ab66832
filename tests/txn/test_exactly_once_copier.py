"""The exactly-once copier, shaped like Kafka's own system test: three
transactional consume-transform-produce processes, each SIGKILLed and restarted
at random moments, while a read_committed reader checks the output as it grows.
At the end the output equals the input, once, in order per partition."""

from __future__ import annotations

import random
import subprocess
import sys
import threading
import time
from pathlib import Path

import pyarrow as pa
import pytest

from arrowlog import TopicConfig, TxnState
from arrowlog.txn.coordinator import CoordinatorLog
from tests.support.stores import StoreSpec
from tests.support.workers import COPY_SCHEMA

ROOT = Path(__file__).resolve().parents[2]
PARTITIONS = 3
RECORDS = 21_000
BATCH = 150  # records per input batch
TXN_RECORDS = 50  # records per copier transaction: batches are split across transactions
KILLS = 3  # per copier


def seed(spec: StoreSpec) -> None:
    log = spec.connect()
    config = TopicConfig(checkpoint_interval=40)
    log.create_topic("in", COPY_SCHEMA, partitions=PARTITIONS, config=config)
    log.create_topic("out", COPY_SCHEMA, partitions=PARTITIONS, config=config)
    producer = log.producer()  # idempotent
    for start in range(0, RECORDS, BATCH):
        source = (start // BATCH) % PARTITIONS
        ids = pa.array(range(start, start + BATCH), pa.int64())
        batch = pa.record_batch([ids, pa.array([source] * BATCH, pa.int32())], schema=COPY_SCHEMA)
        producer.send("in", batch, partition=source)


class Checker(threading.Thread):
    """Reads the output under read_committed while the copiers run: each
    partition must grow as an exact, gap-free, duplicate-free prefix of its input."""

    def __init__(self, spec: StoreSpec, expected: dict[int, list[int]]) -> None:
        super().__init__(daemon=True)
        self.spec = spec
        self.expected = expected
        self.stop = threading.Event()
        self.failure: BaseException | None = None
        self.reads = 0
        self.seen = dict.fromkeys(range(PARTITIONS), 0)  # records verified so far
        self.positions = dict.fromkeys(range(PARTITIONS), 0)

    def check_once(self, consumer: object) -> None:
        from arrowlog import Consumer

        assert isinstance(consumer, Consumer)
        for p in range(PARTITIONS):
            lso = consumer.stable_offset("out", p)
            table = consumer.read("out", p, self.positions[p], lso)
            ids = table.column("id").to_pylist()
            want = self.expected[p][self.seen[p] : self.seen[p] + len(ids)]
            assert ids == want, f"out/{p}: read {ids[:5]}... expected {want[:5]}..."
            self.seen[p] += len(ids)
            self.positions[p] = lso
            self.reads += 1

    def run(self) -> None:
        consumer = self.spec.connect().consumer()
        try:
            while not self.stop.is_set():
                self.check_once(consumer)
                time.sleep(0.05)
            self.check_once(consumer)
        except BaseException as e:  # noqa: BLE001 - reported by the test
            self.failure = e


def run_copier(spec: StoreSpec, source: int, rng: random.Random) -> int:
    """Run copier ``source`` to completion, SIGKILLing it KILLS times first."""
    argv = [sys.executable, "-m", "tests.support.workers", "copier", *spec.argv(),
            "--writer", str(source), "--count", str(TXN_RECORDS)]  # fmt: skip
    kills = 0
    while True:
        with subprocess.Popen(argv, cwd=ROOT, stdout=subprocess.PIPE, text=True) as proc:
            assert proc.stdout is not None
            assert proc.stdout.readline().strip() == "STARTED"
            if kills < KILLS:
                try:
                    proc.wait(timeout=rng.uniform(0.02, 0.6))
                except subprocess.TimeoutExpired:
                    proc.kill()  # SIGKILL, mid-transaction or between transactions
                    proc.wait()
                    kills += 1
                    continue
            assert proc.wait(timeout=600) == 0
            return kills


@pytest.mark.slow
def test_copiers_killed_at_random_copy_exactly_once(shared_store_spec: StoreSpec) -> None:
    seed(shared_store_spec)
    expected = {
        p: [i for i in range(RECORDS) if (i // BATCH) % PARTITIONS == p] for p in range(PARTITIONS)
    }
    checker = Checker(shared_store_spec, expected)
    checker.start()
    kills: list[int] = []
    threads = [
        threading.Thread(
            target=lambda s=s: kills.append(run_copier(shared_store_spec, s, random.Random(s)))
        )
        for s in range(PARTITIONS)
    ]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    checker.stop.set()
    checker.join(timeout=300)
    assert checker.failure is None, checker.failure
    assert sum(kills) >= PARTITIONS, "the copiers finished before they could be killed"
    assert checker.reads > 10

    log = shared_store_spec.connect()
    consumer = log.consumer(group_id="copier")
    total = 0
    for p in range(PARTITIONS):
        ids = consumer.read("out", p).column("id").to_pylist()
        assert ids == expected[p]  # all of it, once, in order
        assert consumer.committed("in", p) == log.end_offsets("in")[p]
        total += len(ids)
    assert total == RECORDS
    assert log.stable_offsets("out") == log.end_offsets("out")
    assert checker.seen == {p: len(expected[p]) for p in range(PARTITIONS)}
    # The kills interrupted transactions, which the next instance finished: rolled
    # forward after PREPARE_COMMIT, rolled back otherwise (their records stay in the
    # log, never read under read_committed). A transaction killed before its first
    # coordinator entry has none to finish: the init's entry, which grants the next
    # epoch after a complete one, aborts it for good.
    recovered = []  # the state each init found a transaction in
    for p in range(PARTITIONS):
        coordinator = CoordinatorLog(log.store, f"copier.in.{p}", log.config.retry)
        latest = coordinator.latest()
        assert latest is not None and latest.state.is_complete
        for n in range(1, latest.n + 1):
            entry, previous = coordinator.entry(n), coordinator.entry(n - 1)
            assert entry is not None and previous is not None
            if entry.reason != "init":
                continue
            if not entry.state.is_complete:
                recovered.append(entry.state)
            elif previous.state.is_complete and previous.producer_epoch == entry.producer_epoch - 1:
                recovered.append(TxnState.ONGOING)  # undecided, with no entry: aborted
    assert recovered, "no kill interrupted a transaction: the test proved nothing"
    uncommitted = log.consumer(isolation_level="read_uncommitted")
    rows = sum(uncommitted.read("out", p).num_rows for p in range(PARTITIONS))
    assert rows >= RECORDS
    if rows > RECORDS:  # extra records can only come from rolled-back transactions
        assert TxnState.PREPARE_ABORT in recovered or TxnState.ONGOING in recovered
