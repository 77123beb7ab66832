"""Several OS processes appending to one partition at once (invariants 1 and 3):
offsets are exactly 0..N-1 and every acknowledged batch is present once, intact,
at the offset it was told, also when a fifth of all replies are lost."""

from __future__ import annotations

import itertools
import json
import subprocess
import sys
import time
from collections import Counter
from pathlib import Path

import pyarrow as pa
import pytest

from arrowlog import TopicConfig
from tests.support.stores import (  # noqa: F401  (fixtures: these schedules run on the clouds' emulators too)
    StoreSpec,
    shared_store_spec_on_clouds_too,
    store_spec_on_clouds_too,
)
from tests.support.workers import RACE_SCHEMA, race_batch

ROOT = Path(__file__).resolve().parents[2]
WRITERS = 4
APPENDS = 100


def run_race(
    spec: StoreSpec,
    out: Path,
    *,
    lose_ack: float,
    staged: bool = False,
    modes: tuple[str, ...] | None = None,
) -> Counter[str]:
    """Each of the WRITERS processes appends APPENDS batches to partition 0 of
    "race"; with ``modes``, writer w appends as ``modes[w]`` says (see
    ``tests.support.workers.append_race``). The writers' stats, summed."""
    spec.connect().create_topic("race", RACE_SCHEMA, config=TopicConfig(checkpoint_interval=25))
    start_at = time.time() + 3  # every process has imported and connected by then
    procs = [
        subprocess.Popen(
            [
                sys.executable,
                "-m",
                "tests.support.workers",
                "append_race",
                *spec.argv(),
                "--writer",
                str(w),
                "--count",
                str(APPENDS),
                "--out",
                str(out),
                "--start-at",
                str(start_at),
                "--lose-ack",
                str(lose_ack),
                *(["--staged"] if staged else []),
                *(["--mode", modes[w]] if modes else []),
            ],
            cwd=ROOT,
            stdout=subprocess.PIPE,
        )
        for w in range(WRITERS)
    ]
    stats: Counter[str] = Counter()
    for proc in procs:
        report, _ = proc.communicate(timeout=600)
        assert proc.returncode == 0
        stats.update(json.loads(report))
    return stats


def check_log(spec: StoreSpec, out: Path) -> None:
    acked = [json.loads(line) for line in out.read_text().splitlines()]
    assert len(acked) == WRITERS * APPENDS
    assert len({(w, s) for w, s, _, _ in acked}) == len(acked)

    part = spec.connect().partition("race", 0)
    segments = part.segments()
    total = sum(n for _, _, _, n in acked)
    # contiguous: each segment starts where the previous one ended, from 0 to N
    assert [s.base for s in segments] == sorted(off for _, _, off, _ in acked)
    assert all(a.end == b.base for a, b in itertools.pairwise(segments))
    assert segments[0].base == 0 and segments[-1].end == total == part.end_offset()

    table = part.read()
    assert table.num_rows == total
    for writer, seq, offset, count in acked:
        got = table.slice(offset, count)
        assert got.equals(pa.Table.from_batches([race_batch(writer, seq)])), (writer, seq, offset)
    # each writer's batches are in the log in the order it sent them
    for w in range(WRITERS):
        offsets = [off for writer, _, off, _ in sorted(acked, key=lambda a: a[1]) if writer == w]
        assert offsets == sorted(offsets)


@pytest.mark.slow
@pytest.mark.parametrize("lose_ack", [0.0, 0.2], ids=["clean", "lose-20pct-acks"])
def test_concurrent_processes_append_exactly_once(
    shared_store_spec: StoreSpec, tmp_path: Path, lose_ack: float
) -> None:
    out = tmp_path / "acked.jsonl"
    stats = run_race(shared_store_spec, out, lose_ack=lose_ack)
    check_log(shared_store_spec, out)
    assert stats["appends"] == WRITERS * APPENDS
    assert stats["conflicts"] > 0, "the writers never raced: the test proved nothing"
    if lose_ack:
        assert stats["ambiguous"] > 0.1 * WRITERS * APPENDS


@pytest.mark.slow
@pytest.mark.parametrize("lose_ack", [0.0, 0.2], ids=["clean", "lose-20pct-acks"])
def test_concurrent_processes_staging_appends_append_exactly_once(
    shared_store_spec: StoreSpec, tmp_path: Path, lose_ack: float
) -> None:
    """The same race with staged appends: batches that lose are uploaded to
    keys of their own and committed by whoever wins, theirs or another's."""
    out = tmp_path / "acked.jsonl"
    stats = run_race(shared_store_spec, out, lose_ack=lose_ack, staged=True)
    check_log(shared_store_spec, out)
    assert stats["staged"] > 0, "no append was staged: the test proved nothing"
    assert stats["appends"] + stats["staged"] == WRITERS * APPENDS


@pytest.mark.slow
def test_clients_of_every_kind_on_one_partition_append_exactly_once(
    shared_store_spec: StoreSpec, tmp_path: Path
) -> None:
    """The writers an application runs side by side, each in its process: a
    client with staged appends on (the default), one with them off, an
    idempotent producer (default config), and a loader that appends each
    batch at the end it asked for (KIP-27: exactly there, never staged, or
    OffsetMismatchError and it asks again). Every acknowledged batch is in
    the log once, at the offset it was told, in each writer's order."""
    out = tmp_path / "acked.jsonl"
    stats = run_race(
        shared_store_spec, out, lose_ack=0.0, modes=("staged", "plain", "producer", "expected")
    )
    check_log(shared_store_spec, out)
    assert stats["appends"] + stats["staged"] == WRITERS * APPENDS
    assert stats["conflicts"] > 0, "the writers never raced: the test proved nothing"
