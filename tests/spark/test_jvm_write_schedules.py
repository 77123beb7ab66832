"""The JVM writer under schedules: something else happens to the topic between
the job's begin (the driver's ``write_begin``, before any task runs) and its
commit. Each schedule is driven from inside the job's only task, a Python UDF
upstream of the write that acts on its first row (once: a flag file), so the
step lands exactly between begin and commit. Whatever the job's outcome, the
topic's readers must keep reading it: nothing of the job may become a commit
that names objects the topic does not hold."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
from pathlib import Path
from typing import Any

import pyarrow as pa
import pytest

import arrowlog
from tests.support.spark import MASTER
from tests.support.spark_write import fresh_name
from tests.support.stores import StoreSpec

pytestmark = pytest.mark.spark

COLUMNS: list[tuple[str, pa.DataType]] = [("id", pa.int64()), ("s", pa.string())]
SCHEMA = pa.schema(COLUMNS)
ROWS = 100
REPOSITORY = Path(__file__).resolve().parents[2]


def local(tmp_path: Path) -> StoreSpec:
    return StoreSpec("local", str(tmp_path / "log"), {"fsync": False})


def write(df: Any, spec: StoreSpec, topic: str, **options: str) -> None:
    w = df.write.format("arrowlog").mode("append").option("topic", topic)
    for key, value in {**options, "storage.fsync": "false"}.items():
        w = w.option(key, value)
    w.save(spec.url)


def staged_batches(log: arrowlog.ArrowLog, topic: str) -> int:
    return sum(
        s.at is not None
        for p in range(log.topic(topic).partitions)
        for s in log.partition(topic, p).summaries()
    )


def read_ids(log: arrowlog.ArrowLog, topic: str) -> list[int]:
    """Every id of ``topic`` under read_committed, sorted."""
    consumer = log.consumer()
    ids = []
    for p in range(log.topic(topic).partitions):
        ids += [i for i in consumer.read(topic, p).column("id").to_pylist() if isinstance(i, int)]
    return sorted(ids)


def test_a_topic_created_anew_during_a_jvm_write_stays_readable(spark: Any, tmp_path: Path) -> None:
    """Schedule: write_begin (incarnation 0), the task's first row deletes the
    topic and creates it anew (same name, same schema), the task uploads its
    rows and the driver commits. The job fails with a typed error, and the
    new incarnation reads, holding nothing of it."""
    from pyspark.sql.functions import udf
    from pyspark.sql.types import LongType

    spec = local(tmp_path)
    log = spec.connect()
    topic = fresh_name()
    log.create_topic(topic, SCHEMA, partitions=2)
    root, flag = spec.url, str(tmp_path / "recreated")

    def recreate_on_first_row(i: int) -> int:
        import os

        import arrowlog as al

        if i == 0 and not os.path.exists(flag):
            open(flag, "w").close()
            again = al.connect(root, {"fsync": False})
            again.delete_topic(topic)
            again.create_topic(topic, SCHEMA, partitions=2)
        return i

    step = udf(lambda i: recreate_on_first_row(i), LongType())  # no hints: not a pandas UDF
    df = spark.range(0, ROWS, 1, 1).select(step("id").alias("id"))
    df = df.selectExpr("id", "concat('k', id) as s")
    with pytest.raises(Exception, match=r"UnknownTopicOrPartitionError: .* created again"):
        write(df, spec, topic, keyColumn="s")
    assert Path(flag).exists(), "the schedule did not run"
    log = spec.connect()
    assert log.topic(topic).incarnation > 0
    assert read_ids(log, topic) == []


def test_a_jvm_write_shows_its_rows_once_beside_a_producer_appending_to_the_same_partitions(
    spark: Any, tmp_path: Path
) -> None:
    """Schedule: write_begin, then the task's first row has another producer
    append (and a transactional producer commit) to every partition, then the
    task uploads and the driver commits after them: every row of both, once."""
    from pyspark.sql.functions import udf
    from pyspark.sql.types import LongType

    spec = local(tmp_path)
    log = spec.connect()
    topic = fresh_name()
    log.create_topic(topic, SCHEMA, partitions=2)
    root, flag = spec.url, str(tmp_path / "appended")

    def append_on_first_row(i: int) -> int:
        import os

        import arrowlog as al

        if i == 0 and not os.path.exists(flag):
            open(flag, "w").close()
            other = al.connect(root, {"fsync": False})
            for p in range(2):
                batch = pa.record_batch({"id": [-1 - p], "s": ["other"]}, schema=SCHEMA)
                other.partition(topic, p).append(batch)
        return i

    step = udf(lambda i: append_on_first_row(i), LongType())  # no hints: not a pandas UDF
    df = spark.range(0, ROWS, 1, 1).select(step("id").alias("id"))
    write(df.selectExpr("id", "concat('k', id) as s"), spec, topic, keyColumn="s")
    assert staged_batches(log, topic) > 0, "not written by the JVM writer"
    assert read_ids(log, topic) == [-2, -1, *range(ROWS)]


#: run in the planner process of a driver of its own (as sitecustomize): the
#: planner kills itself (SIGKILL, the JVM lives on) right after the call
#: KILL_PLANNER_AFTER names returns, before it answers the driver; the planner
#: the JVM starts next (the mark exists) runs as it is
PLANNER_HOOK = """
import os, signal

def _hold():
    mark = os.environ.get("KILL_PLANNER_MARK")
    if not mark or os.path.exists(mark):
        return
    with open("/proc/self/cmdline", "rb") as f:
        if b"arrowlog.spark.jvm_planner" not in f.read():
            return
    from arrowlog.partition.log import PartitionLog
    from arrowlog.spark import sink

    owner, name = {
        "commit_refs": (PartitionLog, "commit_refs"),
        "transaction_commit": (sink.JobTransaction, "commit"),
    }[os.environ["KILL_PLANNER_AFTER"]]
    call = getattr(owner, name)

    def call_then_die(*args, **kwargs):
        call(*args, **kwargs)
        open(mark, "w").close()
        os.kill(os.getpid(), signal.SIGKILL)

    setattr(owner, name, call_then_die)

_hold()
"""

#: the driver: one JVM write of ids 0..99 in two tasks (five rows a staged
#: object), then what became of it
DRIVER = """
import sys
import arrowlog.spark
from pyspark.sql import SparkSession

master, root, topic = sys.argv[1:4]
builder = SparkSession.builder.master(master).config("spark.ui.enabled", "false")
spark = arrowlog.spark.configure(builder).getOrCreate()
spark.sparkContext.setLogLevel("OFF")
df = spark.range(0, 100, 1, 2).selectExpr("id", "concat('k', id) as s")
try:
    (df.write.format("arrowlog").mode("append").option("topic", topic)
       .option("keyColumn", "s").option("rowsPerBatch", "5")
       .option("storage.fsync", "false").save(root))
    print("JOB SUCCEEDED")
except Exception as e:
    lines = str(e).splitlines()
    print("JOB FAILED", next((x for x in lines if "Error:" in x), lines[0])[:300])
spark.stop()
"""


def run_with_planner_killed(tmp_path: Path, after: str) -> tuple[str, list[int]]:
    """One JVM write of ids 0..99 to topic t (2 partitions) by a driver of its
    own whose planner dies right after ``after`` (see PLANNER_HOOK): what the
    driver saw, and the ids then visible."""
    spec = local(tmp_path)
    spec.connect().create_topic("t", SCHEMA, partitions=2)
    hooks = tmp_path / "hooks"
    hooks.mkdir()
    (hooks / "sitecustomize.py").write_text(textwrap.dedent(PLANNER_HOOK))
    (tmp_path / "driver.py").write_text(textwrap.dedent(DRIVER))
    mark = tmp_path / "planner-killed"
    # the hook first; then this checkout's arrowlog, for the driver and its planner
    paths = [str(hooks), str(REPOSITORY), *os.environ.get("PYTHONPATH", "").split(os.pathsep)]
    env = {
        **os.environ,
        "KILL_PLANNER_MARK": str(mark),
        "KILL_PLANNER_AFTER": after,
        "PYTHONPATH": os.pathsep.join(paths),
    }
    done = subprocess.run(
        [sys.executable, str(tmp_path / "driver.py"), MASTER, spec.url, "t"],
        env=env, cwd=tmp_path, capture_output=True, text=True, timeout=300,
    )  # fmt: skip
    assert mark.exists(), f"the schedule did not run: {done.stdout} {done.stderr[-2000:]}"
    assert "JOB " in done.stdout, done.stderr[-2000:]
    return done.stdout.strip(), read_ids(spec.connect(), "t")


def test_a_jvm_write_whose_planner_dies_after_a_commit_object_shows_each_row_once(
    tmp_path: Path,
) -> None:
    """Schedule (its own driver, real processes): write_commit puts the
    commit object of partition 0, then its planner process is SIGKILLed;
    the JVM sends write_commit to a new planner. Each row must be visible
    once, or (the job failed) none."""
    outcome, ids = run_with_planner_killed(tmp_path, "commit_refs")
    if "JOB SUCCEEDED" in outcome:
        assert ids == list(range(ROWS)), f"{len(ids)} rows visible of {ROWS}"
    else:
        assert ids == [], f"the job failed ({outcome}) with its rows visible"


def test_a_jvm_write_whose_planner_dies_after_committing_does_not_fail_with_its_rows_visible(
    tmp_path: Path,
) -> None:
    """Schedule (its own driver, real processes): write_commit commits the
    job's transaction, then its planner process is SIGKILLed before it
    answers. The job must either succeed, its rows visible once, or fail
    with nothing visible: never fail with its rows committed."""
    outcome, ids = run_with_planner_killed(tmp_path, "transaction_commit")
    if "JOB SUCCEEDED" in outcome:
        assert ids == list(range(ROWS))
    else:
        assert ids == [], f"the job failed ({outcome}) with its rows visible"
