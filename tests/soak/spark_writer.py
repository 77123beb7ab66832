"""The soak's Spark writer: role ``spark``, one process running a real local
Spark session (``local[2]``, the JVM reader's jar: the JVM writer) that writes
DataFrames into topic ``sp``, keyed by ``key``, one job per version of
``txnAppId`` ``soak``: version v writes the rows ``sp.<v>.<i>``
(:func:`~tests.soak.model.sp_rid`), computed by Spark from ``spark.range``,
so that no Python worker takes part.

Each job is an operation of the history (``spark_write``: invoked before
``save``, acknowledged once it returned, with the LSO and high watermark of
``sp`` read right after). An instance starts at the first version no earlier
instance of its slot was told committed, and runs that version again as it was
(same rows, same ``txnVersion``): whatever a killed instance left, the JVM
writer must commit each version exactly once. Now and then a version is first
run with rows ``sp.<v>.x<i>`` of which one fails its task on purpose
(``raise_error``): that job fails, none of its rows may ever be visible, and
the version is then run again with its own rows.

Kills (:func:`plan`): the parent's timer, mostly of the whole process group
(this process, its JVM and the JVM's planner), sometimes of this process alone
(the JVM and its planner then live on until they notice: the history records
for how long); or a step of the write protocol: ``staged`` (the n-th staged
object the executors uploaded has appeared: a kill during the uploads, seen by a
thread here that lists ``sp``'s ``staged/``), or a put of the driver's planner
(:mod:`tests.soak.spark_planner`: commit objects, coordinator entries, markers).
"""

from __future__ import annotations

import contextlib
import os
import random
import signal
import stat
import sys
import threading
import time
from pathlib import Path
from typing import TYPE_CHECKING, Any

import arrowlog
from arrowlog.errors import ArrowLogError
from arrowlog.storage import Store
from tests.soak.chaos import KillPoint
from tests.soak.history import new_instance, now, pair, read_events
from tests.soak.model import (
    SP,
    SP_APP,
    SP_KEY_SQL,
    SP_PARTITIONS,
    SP_RID_SQL,
    SP_TXN_TIMEOUT_MS,
    sp_count,
    tp,
)
from tests.soak.spark_planner import ENV_DIE_AT, ENV_HISTORY, ENV_SLOT

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

    from tests.soak.clients import Client

#: the steps a Spark instance may be killed at (see the module doc)
STEPS = ("staged", "commit_object", "PREPARE_COMMIT", "marker", "COMPLETE_COMMIT")
#: how often a version is first run by a job that fails on purpose
FAILING = 0.15
#: how long the parent waits for a Spark instance to be up before its timer runs anyway
READY_TIMEOUT = 180.0


def plan(rng: random.Random, n: int, first: int) -> tuple[float, KillPoint | None, bool]:
    """How the parent ends the ``n``-th Spark instance: (timer after it is up,
    a point to die at or None, whether the timer kills this process alone).
    Two in three die at a step, the steps in turn from the ``first``; the
    third on a timer. An instance is up once its planner runs (see
    :func:`_warm_up`): a job takes about a second then, so the n-th step is
    reached within seconds."""
    if n % 3 != 2:
        step = STEPS[(first + n - n // 3) % len(STEPS)]
        nth = rng.randint(1, 12) if step == "staged" else rng.randint(1, 4)
        if step in ("PREPARE_COMMIT", "COMPLETE_COMMIT"):
            nth = rng.randint(1, 2)
        when = "after" if step == "staged" else rng.choice(["before", "after"])
        return rng.uniform(15.0, 30.0), KillPoint(step, nth, when), False
    return rng.uniform(0.5, 6.0), None, rng.random() < 0.3


def spark_writer(c: Client) -> None:
    point = KillPoint.parse(c.args.die_at) if c.args.die_at else None
    inst = new_instance()
    version = _first_unacknowledged(c)
    started = time.monotonic()
    spark = _session(c, point)
    _warm_up(c, spark)
    c.history.event("spark_up", inst=inst, seconds=round(time.monotonic() - started, 2),
                    version=version)  # fmt: skip
    c.ready()
    if point is not None and point.pattern == "staged":
        watcher = threading.Thread(target=_watch_staged, args=(c, point), daemon=True)
        watcher.start()
    budget = c.args.max_txns or 10**9
    try:
        while not c.stopping() and budget > 0:
            if c.rng.random() < FAILING:
                _job(c, spark, inst, version, failing=True)
            if _job(c, spark, inst, version, failing=False):
                version += 1
                budget -= 1
            else:
                c.pause(0.2, 1.0)
            c.pause(0.0, 0.3)
    finally:
        spark.stop()


def _first_unacknowledged(c: Client) -> int:
    """The first version no earlier instance of this slot was told committed."""
    paths = sorted(Path(c.args.history).glob(f"{c.args.slot}-*.jsonl"))
    ops, _ = pair(read_events(paths))
    acked = {op.args["version"] for op in ops if op.f == "spark_write" and op.ok}
    version = 0
    while version in acked:
        version += 1
    return version


def _session(c: Client, point: KillPoint | None) -> SparkSession:
    """A local session with the JVM writer, its planner run through
    :mod:`tests.soak.spark_planner` with this instance's kill point."""
    import arrowlog.spark
    from arrowlog.spark.jvm import PYTHON_CONF

    os.environ["SPARK_LOCAL_IP"] = "127.0.0.1"
    os.environ["PYSPARK_PYTHON"] = sys.executable
    os.environ[ENV_HISTORY] = str(c.args.history)
    os.environ[ENV_SLOT] = c.args.slot
    os.environ.pop(ENV_DIE_AT, None)
    if point is not None and point.pattern != "staged":
        os.environ[ENV_DIE_AT] = point.text()
    work = Path(c.args.history).parent / "spark"
    work.mkdir(parents=True, exist_ok=True)
    script = work / "planner.sh"
    if not script.exists():
        text = f'#!/bin/sh\nexec "{sys.executable}" -m tests.soak.spark_planner\n'
        tmp = work / f"planner.{os.getpid()}"
        tmp.write_text(text)
        tmp.chmod(tmp.stat().st_mode | stat.S_IXUSR)
        os.replace(tmp, script)
    from pyspark.sql import SparkSession

    os.chdir(work)  # the JVM keeps its directory: not the repository's
    builder = (
        SparkSession.builder.master("local[2]")
        .appName(f"arrowlog-soak-{c.args.slot}")
        .config("spark.ui.enabled", "false")
        .config("spark.sql.shuffle.partitions", "2")
    )
    builder = arrowlog.spark.configure(builder).config(PYTHON_CONF, str(script))
    spark = builder.getOrCreate()
    spark.sparkContext.setLogLevel("ERROR")
    return spark


def _warm_up(c: Client, spark: SparkSession) -> None:
    """Count ``sp`` through the JVM reader: the JVM starts its planner and loads
    the source's classes, which the first job would otherwise wait for."""
    spark.read.format("arrowlog").option("topic", SP).options(**_storage(c)).load(
        c.args.url
    ).count()


def _job(c: Client, spark: SparkSession, inst: str, version: int, *, failing: bool) -> bool:
    """Write ``version`` (or its failing attempt); whether ``save`` returned."""
    n = sp_count(version)
    key = SP_KEY_SQL.format(v=version)
    if failing:
        fail = "raise_error('soak: a task fails on purpose')"
        key = f"CASE WHEN id = {n // 2} THEN {fail} ELSE {key} END"
    rid = SP_RID_SQL.format(v=version, x="x" if failing else "")
    df = spark.range(0, n, 1, 2 + version % 2).selectExpr(f"{rid} AS rid", f"{key} AS key")
    options = {
        "topic": SP, "keyColumn": "key", "txnAppId": SP_APP, "txnVersion": str(version),
        "transactionTimeoutMs": str(SP_TXN_TIMEOUT_MS), **_storage(c),
    }  # fmt: skip
    op = c.history.invoke("spark_write", inst=inst, version=version, rows=n, failing=failing)
    try:
        df.write.format("arrowlog").mode("append").options(**options).save(c.args.url)
    except Exception as e:  # noqa: BLE001 - Spark's errors (py4j, pyspark) are outcomes here
        op.fail(e)
        return False
    op.ok(after=_state(c))
    return True


def _storage(c: Client) -> dict[str, str]:
    import json

    from arrowlog.spark.options import spark_storage_options

    return spark_storage_options(json.loads(c.args.options))


def _state(c: Client) -> dict[str, Any]:
    """``sp``'s LSO and high watermark, per partition, read right after a job."""
    out: dict[str, Any] = {"t": now()}
    try:
        log = arrowlog.connect(c.store)
        consumer = log.consumer()
        for q in range(SP_PARTITIONS):
            out[tp(SP, q)] = [consumer.stable_offset(SP, q), log.partition(SP, q).end_offset()]
    except ArrowLogError as e:
        out["error"] = f"{type(e).__name__}: {e}"
    return out


def _watch_staged(c: Client, point: KillPoint) -> None:
    """SIGKILL the process group once the ``point.nth`` staged object uploaded
    since this instance started has appeared: executors are uploading."""
    known: set[str] | None = None
    seen = 0
    while True:
        if known is None:
            with contextlib.suppress(ArrowLogError, OSError):
                known = _staged(c.store)
            time.sleep(0.02)
            continue
        with contextlib.suppress(ArrowLogError, OSError):
            for key in _staged(c.store) - known:
                known.add(key)
                seen += 1
                if seen >= point.nth:
                    c.history.event("die", key=key, step="staged", when="after", phase="tasks")
                    os.killpg(os.getpgrp(), signal.SIGKILL)
        time.sleep(0.02)


def _staged(store: Store) -> set[str]:
    return {info.key for q in range(SP_PARTITIONS) for info in store.list(f"{SP}/{q}/staged/")}
