"""Transactions across real OS processes: the zombie scenario (SIGSTOP), and
SIGKILL at every step of commit and abort, recovered by the next instance or by
expiry."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from pathlib import Path

import pyarrow as pa
import pytest

from arrowlog import TxnState
from tests.support.stores import (  # noqa: F401  (fixtures: these schedules run on the clouds' emulators too)
    StoreSpec,
    shared_store_spec_on_clouds_too,
    store_spec_on_clouds_too,
)
from tests.support.workers import CRASH_STEPS, TXN_SCHEMA

ROOT = Path(__file__).resolve().parents[2]


def worker(spec: StoreSpec, *args: str) -> list[str]:
    return [sys.executable, "-m", "tests.support.workers", *args, *spec.argv()]


@pytest.mark.slow
@pytest.mark.parametrize("early", [False, True], ids=["pause-before-output", "pause-after-output"])
def test_a_paused_zombie_is_fenced_and_its_work_is_never_seen(
    shared_store_spec: StoreSpec, early: bool
) -> None:
    log = shared_store_spec.connect()
    log.create_topic("in", TXN_SCHEMA)
    log.create_topic("out", TXN_SCHEMA)
    log.append("in", pa.record_batch({"v": [7]}, schema=TXN_SCHEMA))

    one = subprocess.Popen(
        worker(shared_store_spec, "zombie", "--writer", "1", *(["--early"] if early else [])),
        cwd=ROOT, stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True,
    )  # fmt: skip
    assert one.stdout is not None and one.stdin is not None
    assert one.stdout.readline().strip() == "READY"  # begun, offsets sent
    os.kill(one.pid, signal.SIGSTOP)  # a long GC pause
    try:
        two = subprocess.run(
            worker(shared_store_spec, "zombie", "--writer", "2"),
            cwd=ROOT, capture_output=True, text=True, timeout=300,
        )  # fmt: skip
        assert two.returncode == 0, two.stderr
        assert two.stdout.strip() == "COMMITTED"
    finally:
        os.kill(one.pid, signal.SIGCONT)
    one.stdin.write("go\n")
    one.stdin.flush()
    out, _ = one.communicate(timeout=300)
    assert one.returncode == 0
    assert out.strip() == "FENCED"

    reader = shared_store_spec.connect()
    assert reader.consumer().read("out", 0)["v"].to_pylist() == [70]  # once, worker 2's
    everything = reader.consumer(isolation_level="read_uncommitted").read("out", 0)
    # Paused after producing, the zombie had registered out/0: its first write
    # there stays in the log, never visible. Its second one loses the race for
    # the offset it knew as the end; re-checked against what is there, worker 2's
    # newer epoch of the same producer id refuses it. Paused before producing,
    # its first send met the coordinator and was refused.
    assert everything["v"].to_pylist() == ([70, 70] if early else [70])
    assert reader.stable_offsets("out") == reader.end_offsets("out")
    assert reader.consumer(group_id="copier").committed("in", 0) == 1


CASES = [(step, "commit") for step in CRASH_STEPS] + [
    (step, "abort") for step in ("after_prepare", "after_some_markers", "before_complete")
]


@pytest.mark.slow
@pytest.mark.parametrize("recovery", ["init", "expiry"])
@pytest.mark.parametrize("step,action", CASES, ids=[f"{a}-{s}" for s, a in CASES])
def test_a_transaction_killed_at_any_step_ends_all_or_nothing(
    shared_store_spec: StoreSpec, step: str, action: str, recovery: str
) -> None:
    log = shared_store_spec.connect()
    log.create_topic("in", TXN_SCHEMA)
    log.create_topic("out", TXN_SCHEMA, partitions=3)
    run = subprocess.run(
        worker(shared_store_spec, "txn_crash", "--step", step, "--action", action),
        cwd=ROOT, capture_output=True, text=True, timeout=300,
    )  # fmt: skip
    assert run.returncode == -signal.SIGKILL, run.stderr

    reader = shared_store_spec.connect()
    before = reader.admin.list_transactions()[0].state
    if recovery == "init":
        reader.producer(transactional_id="crashy").init_transactions()
    else:
        reader.admin.expire_transactions(now_ms=2**62)  # long past any timeout
    # the worker died exactly where asked: before or after the point of no return
    # (after_data: its records need no entry, it had written none; after_begin:
    # its first entry, the ONGOING one that registers the consumer offsets)
    prepared = step not in ("after_begin", "after_data")
    assert before is (
        TxnState.EMPTY
        if step == "after_data"
        else TxnState.ONGOING
        if not prepared
        else TxnState.PREPARE_COMMIT
        if action == "commit"
        else TxnState.PREPARE_ABORT
    )
    prepared_commit = prepared and action == "commit"

    [info] = reader.admin.list_transactions()
    if step == "after_data" and recovery == "init":
        # the fence moved the log past its epoch: aborted, with no entry of its own
        assert info.state is TxnState.EMPTY and info.producer_epoch == 1
    else:
        want_state = TxnState.COMPLETE_COMMIT if prepared_commit else TxnState.COMPLETE_ABORT
        assert info.state is want_state
    consumer = reader.consumer(group_id="crashy-group")
    for p in range(3):
        want = [p, p + 100] if prepared_commit else []
        assert consumer.read("out", p)["v"].to_pylist() == want, (p, step)
    assert reader.stable_offsets("out") == reader.end_offsets("out")
    assert consumer.committed("in", 0) == (3 if prepared_commit else None)
