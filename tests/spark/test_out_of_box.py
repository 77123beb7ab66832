"""Spark as users run it: a default-configured session in a directory outside the
repository, with no PYTHONPATH, finds ``format("arrowlog")`` and writes and reads
through it — with arrowlog installed as ``make setup`` installs it, from a wheel
in a fresh virtualenv, and against SeaweedFS with executors in JVMs of their own.

Each case runs :data:`SCRIPT` in a child process: a SparkContext per process, and
the child's environment is exactly what the case says.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from arrowlog.spark.options import spark_storage_options

ROOT = Path(__file__).resolve().parents[2]

# Writes 100 rows to arrowlog and reads them back, in a session with Spark's
# defaults; prints where arrowlog came from and what came back.
SCRIPT = """
import json, sys
import pyarrow as pa
import arrowlog
from pyspark.sql import SparkSession

args = json.loads(sys.argv[1])
print("ARROWLOG", arrowlog.__file__, flush=True)
log = arrowlog.connect(args["url"], args["storage"])
log.create_topic("t", pa.schema([pa.field("id", pa.int64())]), partitions=2)
builder = SparkSession.builder.master(args["master"])
if args["jvm"]:
    import arrowlog.spark

    builder = arrowlog.spark.configure(builder)
spark = builder.getOrCreate()


def configured(builder):
    for key, value in args["options"].items():
        builder = builder.option(key, value)
    return builder.option("topic", "t")


frame = spark.range(0, 100, 1, 4)
configured(frame.write.format("arrowlog").mode("append")).save(args["url"])
rows = configured(spark.read.format("arrowlog")).load(args["url"])
ids = sorted(r.id for r in rows.filter("partition >= 0").collect())
ok = ids == list(range(100))
plan = rows._jdf.queryExecution().executedPlan().toString()
if args["jvm"]:  # the Python reader of the same session reads the same rows
    python = configured(spark.read.format("arrowlog").option("reader", "python"))
    ok = ok and sorted(python.load(args["url"]).collect()) == sorted(rows.collect())
result = {"ok": ok, "rows": len(ids), "jvm": "JVM reader" in plan}
print("READ", json.dumps(result), flush=True)
spark.stop()
"""


def run_script(
    python: str | Path,
    cwd: Path,
    *,
    url: str,
    storage: dict[str, Any] | None = None,
    master: str = "local[2]",
    pythonpath: str | None = None,
    jvm: bool = False,
) -> dict[str, Any]:
    """Run :data:`SCRIPT` with ``python`` in ``cwd``; the store's options reach
    Spark only as ``storage.*`` options. No AWS_* variable, no PYTHONPATH (unless
    given), no Spark configuration."""
    env = {
        k: v
        for k, v in os.environ.items()
        if not k.startswith(("AWS_", "PYSPARK_", "SPARK_")) and k != "PYTHONPATH"
    }
    env |= {"PYSPARK_PYTHON": str(python), "SPARK_LOCAL_IP": "127.0.0.1"}
    if pythonpath is not None:
        env["PYTHONPATH"] = pythonpath
    (cwd / "job.py").write_text(SCRIPT)
    args = {
        "url": url,
        "storage": storage or {},
        "master": master,
        "options": spark_storage_options(storage or {}),
        "jvm": jvm,
    }
    done = subprocess.run(
        [str(python), "job.py", json.dumps(args)],
        cwd=cwd,
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
    )
    lines = dict(line.split(" ", 1) for line in done.stdout.splitlines() if " " in line)
    assert done.returncode == 0 and "READ" in lines, done.stdout + done.stderr[-4000:]
    return {"arrowlog": lines["ARROWLOG"], **json.loads(lines["READ"])}


def installed_arrowlog(python: str | Path, cwd: Path) -> Path:
    """Where ``python`` imports arrowlog from, outside the repository, with no
    PYTHONPATH."""
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    out = subprocess.run(
        [str(python), "-c", "import arrowlog; print(arrowlog.__file__)"],
        cwd=cwd,
        env=env,
        capture_output=True,
        text=True,
        check=True,
    )
    return Path(out.stdout.strip()).resolve()


@pytest.mark.spark
@pytest.mark.slow
def test_a_default_session_outside_the_repository_finds_the_format(tmp_path: Path) -> None:
    """arrowlog installed as ``make setup`` installs it (editable): Spark's data
    source lookup must see ``pyspark_arrowlog`` from any directory."""
    source = installed_arrowlog(sys.executable, tmp_path)
    if not source.is_relative_to(ROOT):
        pytest.skip(f"{sys.executable} imports arrowlog from {source}, not from {ROOT}")
    result = run_script(sys.executable, tmp_path, url=f"file://{tmp_path / 'log'}")
    # no arrowlog.spark.configure: the Python source reads
    assert result == {"arrowlog": str(source), "ok": True, "rows": 100, "jvm": False}


def wheel_venv(tmp_path: Path) -> Path:
    """A fresh virtualenv holding arrowlog from a wheel built from this checkout,
    and the running interpreter's packages (pyspark, pyarrow, ...) through a
    ``.pth`` file, so that nothing is downloaded. A ``.pth`` file inside a path
    added that way is not processed: the running environment's own (editable)
    arrowlog stays invisible, which the test checks."""
    source = tmp_path / "src"
    source.mkdir()
    for name in ("pyproject.toml", "README.md", "pyspark_arrowlog.py"):
        shutil.copy(ROOT / name, source)
    for license_file in ROOT.glob("LICENSE*"):
        shutil.copy(license_file, source)
    shutil.copytree(
        ROOT / "arrowlog", source / "arrowlog", ignore=shutil.ignore_patterns("__pycache__")
    )
    wheels = tmp_path / "wheels"
    pip = [sys.executable, "-m", "pip", "--disable-pip-version-check", "-q"]
    subprocess.run([*pip, "wheel", "--no-deps", "-w", str(wheels), str(source)], check=True)
    [wheel] = wheels.glob("arrowlog-*.whl")
    venv = tmp_path / "venv"
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(venv)], check=True)
    python = venv / "bin" / "python"
    subprocess.run([*pip, "--python", str(python), "install", "--no-deps", str(wheel)], check=True)
    purelib = subprocess.run(
        [str(python), "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
        capture_output=True,
        text=True,
        check=True,
    ).stdout.strip()
    # the running interpreter's site-packages directories, and not the
    # checkout (a compat editable install puts it on sys.path)
    packages = [e for e in sys.path if Path(e).name in ("site-packages", "dist-packages")]
    Path(purelib, "zz_dev_packages.pth").write_text("".join(f"{e}\n" for e in packages))
    return venv


@pytest.mark.spark
@pytest.mark.slow
def test_a_wheel_in_a_fresh_virtualenv_finds_the_format(tmp_path: Path) -> None:
    venv = wheel_venv(tmp_path)
    work = tmp_path / "work"
    work.mkdir()
    result = run_script(venv / "bin" / "python", work, url=f"file://{work / 'log'}", jvm=True)
    assert Path(result["arrowlog"]).resolve().is_relative_to(venv.resolve())
    # the wheel carries the jar: configure finds it there
    assert (result["ok"], result["rows"], result["jvm"]) == (True, 100, True)


@pytest.mark.spark
@pytest.mark.slow
@pytest.mark.s3
def test_local_cluster_against_seaweedfs_with_credentials_as_options(
    tmp_path: Path, s3_server: Any
) -> None:
    """Two executors in JVMs (and Python workers) of their own: the JVM reader's
    reach the store through pre-signed URLs, the Python reader's and the writer's
    with the credentials given as ``storage.*`` options, and nothing else."""
    result = run_script(
        sys.executable,
        tmp_path,
        url=s3_server.url("local-cluster"),
        storage=s3_server.storage_options,
        master="local-cluster[2,1,1024]",
        pythonpath=str(ROOT),
        jvm=True,
    )
    # executors with no credentials read pre-signed URLs; the Python reader agrees
    assert (result["ok"], result["rows"], result["jvm"]) == (True, 100, True)
