"""The soak, short: client processes killed, skewed and fed scheduled faults on
the local store, on SeaweedFS (beside the Spark writer) and on the Azure and GCS
emulators, exporters racing to Delta and Iceberg while the exported topic is
re-created, then the history checker. Zero anomalies is the bar; the counts prove the run did
something worth checking. A run goes on past its seconds (at most runner.OVERTIME) until
its clients have committed a transaction, read, exported, staged a batch and been killed,
with only the roles doing what is lacking running: on a slow machine every transaction of
12 s may be killed before its commit.

A failure prints the seed; replay it with ``python -m tests.soak --store KIND
--seconds N --seed S`` (ARROWLOG_SOAK_SEED and ARROWLOG_SOAK_SECONDS set them
here). ``make soak`` runs a longer soak on both stores, with the Spark writer.
"""

from __future__ import annotations

import os
import random
from pathlib import Path

import pytest

from tests.soak.checker import Report
from tests.soak.runner import run
from tests.support.stores import CLOUD_KINDS, SHARED_STORE_KINDS, spec_for

SECONDS = float(os.environ.get("ARROWLOG_SOAK_SECONDS", "20"))
#: on the local directory and the emulators, whose requests take microseconds
#: to a millisecond, 12 s reach every count asserted several times over (on
#: Azurite: 7 transactions committed, 45 kills, 7 exports)
SHORT_SECONDS = float(os.environ.get("ARROWLOG_SOAK_SECONDS", "12"))


#: the plain soak's stores: on SeaweedFS it runs inside the soak with the Spark
#: writer (the same clients for the same SECONDS, and its counts asserted there)
PLAIN_KINDS = [k for k in [*SHARED_STORE_KINDS, *CLOUD_KINDS] if k.values[0] != "s3"]


def assert_the_clients_did_their_work(report: Report, text: str) -> None:
    """The counts that prove the run did something worth checking, and no anomaly."""
    counts = report.counts
    assert counts.get("txn_committed", 0) > 0, text
    assert counts.get("kills", 0) > 0, text
    assert sum(report.faults.values()) > 0, text
    assert counts.get("reads", 0) > 0, text
    assert counts.get("exports_ok", 0) > 0, text
    assert counts.get("exp_recreated", 0) == 1, text
    assert counts.get("staged_batches", 0) > 0, text
    assert report.ok, text


@pytest.mark.slow
@pytest.mark.parametrize("kind", PLAIN_KINDS)
def test_a_soak_finds_no_anomaly(kind: str, tmp_path: Path, request: pytest.FixtureRequest) -> None:
    seed = int(os.environ.get("ARROWLOG_SOAK_SEED") or random.SystemRandom().randrange(10**6))
    lines: list[str] = []
    spec = spec_for(kind, tmp_path, request)
    report = run(spec, seconds=SHORT_SECONDS, seed=seed, workdir=tmp_path, say=lines.append)
    assert_the_clients_did_their_work(report, "\n".join(lines))


@pytest.mark.slow
def test_a_soak_of_no_seconds_goes_on_until_its_clients_did_their_work(
    tmp_path: Path, request: pytest.FixtureRequest
) -> None:
    """Seconds too short for any commit (a slow machine's 12 s, here 0): the run
    goes on past them, its clients living longer and the roles whose work is
    done resting, until every count is there."""
    seed = int(os.environ.get("ARROWLOG_SOAK_SEED") or random.SystemRandom().randrange(10**6))
    lines: list[str] = []
    report = run(spec_for("local", tmp_path, request), seconds=0, seed=seed, workdir=tmp_path,
                 say=lines.append)  # fmt: skip
    text = "\n".join(lines)
    assert "went on" in text and "still lacked" not in text, text
    assert_the_clients_did_their_work(report, text)


@pytest.mark.slow
@pytest.mark.spark
@pytest.mark.s3
def test_a_soak_with_a_spark_writer_finds_no_anomaly(
    tmp_path: Path, request: pytest.FixtureRequest
) -> None:
    """The soak with the Spark writer (tests.soak.spark_writer): its instances
    are killed at steps of the JVM writer's commit (each start of a Spark
    session costs 10-30 s here, so the writer runs on after the soak until
    it was killed twice, then once more to write two versions; 70-100 s in
    all on a busy 2-core machine); every version it ran is committed exactly
    once or not at all. On SeaweedFS only, where executors upload through
    URLs the driver signs (the suite's time: ``make soak`` runs it on the
    local directory too). The plain soak's clients run beside it for SECONDS,
    as test_a_soak_finds_no_anomaly runs them elsewhere: their counts are
    asserted here, the plain soak's one run on SeaweedFS."""
    seed = int(os.environ.get("ARROWLOG_SOAK_SEED") or random.SystemRandom().randrange(10**6))
    lines: list[str] = []
    report = run(
        spec_for("s3", tmp_path, request), seconds=SECONDS, seed=seed, workdir=tmp_path, spark=True,
        say=lines.append,
    )  # fmt: skip
    text = "\n".join(lines)
    assert_the_clients_did_their_work(report, text)  # the plain soak on SeaweedFS
    counts = report.counts
    assert counts.get("spark_kills", 0) >= 2, text
    assert sum(v for k, v in counts.items() if k.startswith("spark_kills_at_")) > 0, text
    assert counts.get("spark_versions_committed", 0) > 0, text
    assert counts.get("spark_reruns", 0) > 0, text
    assert counts.get("spark_rows_staged", 0) > 0, text  # the JVM writer wrote them
    assert counts.get("spark_rows_plain", 0) == 0, text
