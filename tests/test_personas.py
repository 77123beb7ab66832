"""Three new users' first hour, each as a program run the way that user runs it:
a fresh interpreter (the virtualenv's python by its path, the virtualenv not
activated), started in an empty directory outside the repository, with no
PYTHONPATH and no Spark or PySpark variables. Each path is what issue 27 found
broken for that user, now expected to work.

- A data engineer coming from Spark's Kafka source: ``format("arrowlog")`` is
  found, reads committed data with Kafka's options through the JVM reader, says
  what is wrong in one line, refuses what Kafka refuses, writes a DataFrame read
  from a topic of more partitions into one of fewer, and a stream reports how
  far behind it is.
- A Kafka operator at the command line: units in ``--config``, CSV in and out,
  a consumer group that resumes and commits, offsets reset by duration and from
  a file, transactions described with dates.
- A Python analyst: a topic's committed records, every partition, from pyarrow,
  DuckDB, Polars (the filter reaching the scan) and pandas.
"""

from __future__ import annotations

import csv
import io
import json
import os
import re
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

BIN = Path(sys.executable).parent


def clean_env(**extra: str) -> dict[str, str]:
    """This process's environment as a user's shell has it: no PYTHONPATH, no
    Spark or PySpark settings, the virtualenv's bin/ off the PATH (not
    activated). Spark binds loopback only."""
    env = {
        k: v
        for k, v in os.environ.items()
        if k != "PYTHONPATH" and not k.startswith(("PYSPARK_", "SPARK_", "VIRTUAL_ENV"))
    }
    path = [p for p in env.get("PATH", "").split(os.pathsep) if Path(p) != BIN]
    env["PATH"] = os.pathsep.join(path)
    return {**env, "SPARK_LOCAL_IP": "127.0.0.1", **extra}


def run_program(program: str, cwd: Path, *args: str) -> dict[str, Any]:
    """``program`` run as ``<venv>/bin/python program.py args`` in ``cwd``; the
    JSON it prints last."""
    (cwd / "program.py").write_text(program)
    done = subprocess.run(
        [sys.executable, "program.py", *args],
        cwd=cwd,
        env=clean_env(),
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-5000:]
    result: dict[str, Any] = json.loads(done.stdout.strip().splitlines()[-1])
    return result


# A topic "orders" of 4 partitions: 40 committed records and a 500-row aborted
# transaction; then Spark as the Kafka source's user runs it.
SPARK_USER = r"""
import json, sys
import pyarrow as pa
import arrowlog, arrowlog.spark
from pyspark.sql import SparkSession

root = sys.argv[1]
log = arrowlog.connect(root)
schema = pa.schema([("user", pa.string()), ("amount", pa.int64())])
log.create_topic("orders", schema, partitions=4)
log.create_topic("totals", schema, partitions=2)
producer = log.producer()
for i in range(40):
    row = pa.record_batch({"user": [f"u{i % 5}"], "amount": [i]}, schema=schema)
    producer.send("orders", row, partition=i % 4)
producer.flush()
t = log.producer(transactional_id="loader")
t.init_transactions()
t.begin_transaction()
big = pa.record_batch({"user": ["x"] * 500, "amount": list(range(500))}, schema=schema)
t.send("orders", big, partition=0)
t.abort_transaction()

spark = arrowlog.spark.configure(SparkSession.builder.master("local[2]")).getOrCreate()
out = {}
df = (spark.read.format("arrowlog").option("subscribe", "orders")
      .option("startingOffsets", "earliest").option("endingOffsets", "latest").load(root))
out["rows"] = df.count()
out["jvm"] = "JVM reader" in df._jdf.queryExecution().executedPlan().toString()
out["partitions"] = sorted({r.partition for r in df.select("partition").collect()})

def error_of(call):
    try:
        call()
    except Exception as e:  # AnalysisException before the job; a task's error in it
        return str(e)
    return None

out["typo"] = error_of(lambda: spark.read.format("arrowlog").option("subscribe", "orders")
                        .option("startingOffset", "earliest").load(root).count())
out["earliest_end"] = error_of(lambda: spark.read.format("arrowlog").option("subscribe", "orders")
                                .option("endingOffsets", "earliest").load(root).count())
out["missing"] = error_of(lambda: spark.read.format("arrowlog").option("subscribe", "order")
                           .load(root).count())
# a DataFrame read from 4 partitions, written back into a topic of 2: its
# partition column is refused, saying what to do; without it, keyed
out["repartition"] = error_of(lambda: df.write.format("arrowlog").mode("append")
                               .option("topic", "totals").save(root))
out["after_refusal"] = log.read("totals").num_rows
df.select("user", "amount").write.format("arrowlog").mode("append") \
    .option("topic", "totals").option("keyColumn", "user").save(root)
out["written"] = log.read("totals").num_rows
stream = (spark.readStream.format("arrowlog").option("subscribe", "orders")
          .option("startingOffsets", "earliest").option("maxOffsetsPerTrigger", "20").load(root))
query = (stream.writeStream.format("memory").queryName("copy")
         .option("checkpointLocation", root + "/../checkpoint").trigger(availableNow=True).start())
query.awaitTermination()
out["metrics"] = [p["sources"][0]["metrics"] for p in query.recentProgress]
out["streamed"] = spark.table("copy").count()
spark.stop()
print(json.dumps(out))
"""


@pytest.mark.spark
@pytest.mark.slow
def test_a_spark_user_from_the_kafka_source(tmp_path: Path) -> None:
    home = tmp_path / "home"
    home.mkdir()
    out = run_program(SPARK_USER, home, str(tmp_path / "log"))
    assert out["rows"] == 40 and out["jvm"] and out["partitions"] == [0, 1, 2, 3]
    for key, says in [
        ("typo", "did you mean 'startingOffsets'?"),
        ("earliest_end", "endingOffsets"),
        ("missing", "unknown topic 'order'"),
    ]:
        assert out[key] is not None and says in out[key], key
        assert "\n" not in out[key] and "Traceback" not in out[key], out[key]
    assert "(it holds orders, totals)" in out["missing"]
    assert 'df.drop("partition")' in out["repartition"]  # the fix, named
    assert out["after_refusal"] == 0
    assert out["written"] == 40
    assert out["streamed"] == 40
    first, *_, last = out["metrics"]
    assert int(first["maxOffsetsBehindLatest"]) > 0 and last["maxOffsetsBehindLatest"] == "0"


def test_a_kafka_operator_at_the_command_line(tmp_path: Path) -> None:
    env = clean_env(ARROWLOG_ROOT=str(tmp_path / "log"))  # as --bootstrap-server, once

    def run(*args: str, stdin: str = "") -> str:
        done = subprocess.run(
            [str(BIN / "arrowlog"), *args],  # the entry point by its path
            cwd=tmp_path,
            env=env,
            input=stdin,
            capture_output=True,
            text=True,
            timeout=120,
        )
        assert done.returncode == 0, f"arrowlog {' '.join(args)}: {done.stdout}{done.stderr}"
        return done.stdout

    def names(out: str) -> list[str]:
        return [r["who"] for r in csv.DictReader(io.StringIO(out))]

    run(
        "topics",
        "create",
        "payments",
        "--schema",
        "id: int64, who: string",
        "--partitions",
        "2",
        "--config",
        "retention_ms=7d",
        "--config",
        "retention_bytes=10GiB",
    )
    [described] = json.loads(run("topics", "describe", "payments", "--output", "json"))
    assert described["config"]["retention_ms"] == 7 * 24 * 3600 * 1000
    assert described["config"]["retention_bytes"] == 10 * 1024**3
    rows = 'id,who\n1,ann\n2,"bob, jr"\n3,cy\n'
    run("produce", "payments", "--format", "csv", "--partition", "0", stdin=rows)
    consume = ("consume", "payments", "--group", "audit", "--output", "csv")
    assert names(run(*consume, "--max-records", "2")) == ["ann", "bob, jr"]
    assert names(run(*consume)) == ["cy"]  # resumed where the group committed
    lags = json.loads(run("groups", "describe", "audit", "--output", "json"))
    assert [g["lag"] for g in lags] == [0, None]
    exported = run(
        "groups", "reset-offsets", "audit", "--topic", "payments", "--to-earliest", "--export"
    )
    assert exported.splitlines() == ["payments,0,0", "payments,1,0"]
    assert names(run(*consume)) == []  # the export was a dry run
    (tmp_path / "plan.csv").write_text(exported)
    run("groups", "reset-offsets", "audit", "--from-file", "plan.csv", "--execute")
    assert names(run(*consume)) == ["ann", "bob, jr", "cy"]
    run(
        "groups",
        "reset-offsets",
        "audit",
        "--topic",
        "payments",
        "--by-duration",
        "1h",
        "--execute",
    )
    assert names(run(*consume)) == ["ann", "bob, jr", "cy"]
    # an application's transaction, as the operator then finds it
    app = (
        "import sys, arrowlog, pyarrow as pa\n"
        "t = arrowlog.connect(sys.argv[1]).producer(transactional_id='billing')\n"
        "t.init_transactions()\n"
        "with t.transaction():\n"
        "    t.send('payments', pa.record_batch({'id': [9], 'who': ['zed']}), partition=1)\n"
        "t.close()\n"
    )
    subprocess.run([sys.executable, "-c", app, env["ARROWLOG_ROOT"]], env=env, check=True)
    described = run("transactions", "describe", "billing")
    assert "COMPLETE_COMMIT" in described and "payments/1" in described
    assert re.search(r"started\s+20\d\d-\d\d-\d\dT", described), described  # a date
    [listed] = csv.DictReader(io.StringIO(run("transactions", "list", "--output", "csv")))
    assert listed["transactional_id"] == "billing" and listed["state"] == "COMPLETE_COMMIT"


# The analyst's topic: 3 partitions of committed records, and an open and an
# aborted transaction that no default read may show.
ANALYST = r"""
import json, sys
import duckdb
import polars as pl
import pyarrow as pa
import pyarrow.compute as pc
import arrowlog

log = arrowlog.connect(sys.argv[1])
schema = pa.schema([("sensor", pa.int64()), ("reading", pa.float64())])
log.create_topic("src", schema, partitions=3)
for p in range(3):
    for i in range(10):
        log.append("src", pa.record_batch({"sensor": [p], "reading": [float(i)]}, schema=schema),
                   partition=p)
t = log.producer(transactional_id="bad")
t.init_transactions()
t.begin_transaction()
t.send("src", pa.record_batch({"sensor": [9] * 500, "reading": [0.0] * 500}, schema=schema),
       partition=0)
t.abort_transaction()
t.begin_transaction()
t.send("src", pa.record_batch({"sensor": [8] * 7, "reading": [1.0] * 7}, schema=schema),
       partition=1)  # left open
out = {}
out["read"] = log.read("src").num_rows
out["consumer"] = log.consumer().read("src").num_rows
scan = log.scan("src", metadata=True, filter=pc.field("reading") >= 5)
out["duckdb"] = duckdb.sql("select partition, count(*) from scan group by 1 order by 1").fetchall()
lazy = log.scan("src", metadata=True).to_polars()
out["polars"] = (lazy.filter(pl.col("sensor") == 2).select("offset").collect()
                 .get_column("offset").to_list())
out["pandas"] = int(log.scan("src", columns=["sensor"]).to_pandas()["sensor"].sum())
out["uncommitted"] = log.read("src", isolation_level="read_uncommitted").num_rows
print(json.dumps(out))
"""


def test_a_python_analyst_reads_committed_data_from_every_engine(tmp_path: Path) -> None:
    home = tmp_path / "home"
    home.mkdir()
    out = run_program(ANALYST, home, str(tmp_path / "log"))
    assert out["read"] == out["consumer"] == 30  # every partition, nothing aborted or open
    assert out["duckdb"] == [[0, 5], [1, 5], [2, 5]]
    assert out["polars"] == list(range(10))
    assert out["pandas"] == 0 * 10 + 1 * 10 + 2 * 10
    assert out["uncommitted"] == 30 + 500 + 7
