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
    import arrowlog.spark.jvm

    builder = arrowlog.spark.configure(builder)
spark = builder.getOrCreate()
if args["register"]:
    import arrowlog.spark

    arrowlog.spark.register(spark)


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
if args["jvm"]:
    result["jar"] = str(arrowlog.spark.jvm.jar_path())
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
    cache: Path | None = None,
    register: bool = False,
    worker_python: Path | None = None,
) -> dict[str, Any]:
    """Run :data:`SCRIPT` with ``python`` in ``cwd``; the store's options reach
    Spark only as ``storage.*`` options. No AWS_* variable, no PYTHONPATH (unless
    given), no Spark configuration."""
    env = {
        k: v
        for k, v in os.environ.items()
        if not k.startswith(("AWS_", "PYSPARK_", "SPARK_")) and k != "PYTHONPATH"
    }
    env |= {"PYSPARK_PYTHON": str(worker_python or python), "SPARK_LOCAL_IP": "127.0.0.1"}
    if pythonpath is not None:
        env["PYTHONPATH"] = pythonpath
    if cache is not None:
        env["ARROWLOG_CACHE_DIR"] = str(cache)
    (cwd / "job.py").write_text(SCRIPT)
    args = {
        "url": url,
        "storage": storage or {},
        "master": master,
        "options": spark_storage_options(storage or {}),
        "jvm": jvm,
        "register": register,
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
    return {"arrowlog": lines["ARROWLOG"], "stderr": done.stderr, **json.loads(lines["READ"])}


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
    result.pop("stderr")
    assert result == {"arrowlog": str(source), "ok": True, "rows": 100, "jvm": False}


def wheel_venv(tmp_path: Path, *, clean_clone: bool = False) -> Path:
    """A fresh virtualenv holding arrowlog from a wheel built from this checkout,
    and the running interpreter's packages (pyspark, pyarrow, ...) through a
    ``.pth`` file, so that nothing is downloaded. A ``.pth`` file inside a path
    added that way is not processed: the running environment's own (editable)
    arrowlog stays invisible, which the test checks.

    The wheel is built from the package as ``make setup`` left it (the jar
    inside), or with ``clean_clone`` from the files a clean clone has (what
    git tracks; no jar) by ``python -m build --wheel``, as a pip user's is."""
    source = tmp_path / "src"
    wheels = tmp_path / "wheels"
    pip = [sys.executable, "-m", "pip", "--disable-pip-version-check", "-q"]
    if clean_clone:
        copy_clean_clone(source)
        build = [sys.executable, "-m", "build", "--wheel", "--outdir", str(wheels), str(source)]
        subprocess.run(build, check=True, capture_output=True)
    else:
        source.mkdir()
        for name in ("pyproject.toml", "README.md", "pyspark_arrowlog.py"):
            shutil.copy(ROOT / name, source)
        for license_file in ROOT.glob("LICENSE*"):
            shutil.copy(license_file, source)
        shutil.copytree(
            ROOT / "arrowlog", source / "arrowlog", ignore=shutil.ignore_patterns("__pycache__")
        )
        subprocess.run([*pip, "wheel", "--no-deps", "-w", str(wheels), str(source)], check=True)
    [wheel] = wheels.glob("arrowlog-*.whl")
    venv = bare_venv(tmp_path / "venv")
    python = venv / "bin" / "python"
    subprocess.run([*pip, "--python", str(python), "install", "--no-deps", str(wheel)], check=True)
    return venv


def copy_clean_clone(dest: Path) -> Path:
    """The files a clean clone of this checkout has (what git tracks, and new
    files it does not ignore), copied into ``dest``: no jar, no venv."""
    tracked = subprocess.run(
        ["git", "ls-files", "--cached", "--others", "--exclude-standard", "-z"],
        cwd=ROOT,
        capture_output=True,
        check=True,
    ).stdout.decode()
    for name in filter(None, tracked.split("\0")):
        if (ROOT / name).is_file():
            (dest / name).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(ROOT / name, dest / name)
    assert not (dest / "arrowlog" / "spark" / "jars").exists()
    return dest


def bare_venv(venv: Path) -> Path:
    """A fresh virtualenv that imports the running interpreter's packages
    (pyspark, pyarrow, ...) but not arrowlog: see :func:`wheel_venv`."""
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(venv)], check=True)
    python = venv / "bin" / "python"
    purelib = subprocess.run(
        [str(python), "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
        capture_output=True,
        text=True,
        check=True,
    ).stdout.strip()
    # the running interpreter's site-packages directories, and not the
    # checkout (an editable install puts it on sys.path)
    packages = [e for e in sys.path if Path(e).name in ("site-packages", "dist-packages")]
    Path(purelib, "zz_dev_packages.pth").write_text("".join(f"{e}\n" for e in packages))
    return venv


@pytest.fixture(scope="module")
def setup_wheel_venv(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """:func:`wheel_venv` of the package as ``make setup`` left it, built once
    for the tests that only run it."""
    return wheel_venv(tmp_path_factory.mktemp("setup-wheel"))


@pytest.mark.spark
@pytest.mark.slow
def test_a_wheel_built_after_setup_carries_the_jvm_reader(
    tmp_path: Path, setup_wheel_venv: Path
) -> None:
    venv = setup_wheel_venv
    work = tmp_path / "work"
    work.mkdir()
    cache = tmp_path / "cache"
    result = run_script(
        venv / "bin" / "python", work, url=f"file://{work / 'log'}", jvm=True, cache=cache
    )
    assert Path(result["arrowlog"]).resolve().is_relative_to(venv.resolve())
    assert (result["ok"], result["rows"], result["jvm"]) == (True, 100, True)
    # the wheel carries the jar: configure finds it there, and compiles nothing
    assert Path(result["jar"]).resolve().is_relative_to(venv.resolve())
    assert not cache.exists()


@pytest.mark.spark
@pytest.mark.slow
def test_a_wheel_from_a_clean_clone_compiles_the_jvm_reader_on_first_use(tmp_path: Path) -> None:
    """No make: ``python -m build --wheel`` of what git tracks. The wheel holds
    the reader's sources; ``configure`` compiles them against the installed
    pyspark into the user's cache, and the session reads on the JVM."""
    venv = wheel_venv(tmp_path, clean_clone=True)
    work = tmp_path / "work"
    work.mkdir()
    cache = tmp_path / "cache"
    result = run_script(
        venv / "bin" / "python", work, url=f"file://{work / 'log'}", jvm=True, cache=cache
    )
    assert Path(result["arrowlog"]).resolve().is_relative_to(venv.resolve())
    assert (result["ok"], result["rows"], result["jvm"]) == (True, 100, True)
    assert Path(result["jar"]).is_relative_to(cache)
    # make test-spark-min runs this under the lowest pyspark the spark extra allows
    import pyspark

    assert f"JVM reader against pyspark {pyspark.__version__} into" in result["stderr"]


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


@pytest.mark.spark
@pytest.mark.slow
def test_a_default_editable_install_is_found_from_outside_the_checkout(tmp_path: Path) -> None:
    """``pip install -e <checkout>`` with setuptools' default editable mode:
    Spark's lookup of Python data sources sees ``pyspark_arrowlog`` (an
    editable install served through an import hook hid it: the session then
    failed with DATA_SOURCE_NOT_FOUND)."""
    source = copy_clean_clone(tmp_path / "checkout")
    venv = bare_venv(tmp_path / "venv")
    python = venv / "bin" / "python"
    pip = [sys.executable, "-m", "pip", "--disable-pip-version-check", "-q"]
    subprocess.run(
        [*pip, "--python", str(python), "install", "--no-deps", "-e", str(source)], check=True
    )
    work = tmp_path / "work"
    work.mkdir()
    assert installed_arrowlog(python, work).is_relative_to(source.resolve())
    result = run_script(python, work, url=f"file://{work / 'log'}")
    assert (result["ok"], result["rows"], result["jvm"]) == (True, 100, False)


@pytest.mark.spark
@pytest.mark.slow
def test_register_runs_a_local_sessions_workers_on_an_interpreter_that_has_arrowlog(
    tmp_path: Path, setup_wheel_venv: Path
) -> None:
    """The workers' interpreter (``PYSPARK_PYTHON``, here one with pyspark
    but not arrowlog, as ``python3`` on the PATH often is) cannot import
    arrowlog: ``register`` points the local session's workers at the
    driver's interpreter, and says so. They failed with ``No module named
    'arrowlog'`` before."""
    venv = setup_wheel_venv
    other = bare_venv(tmp_path / "other") / "bin" / "python"
    work = tmp_path / "work"
    work.mkdir()
    result = run_script(
        venv / "bin" / "python",
        work,
        url=f"file://{work / 'log'}",
        register=True,
        worker_python=other,
    )
    assert (result["ok"], result["rows"], result["jvm"]) == (True, 100, False)
    assert (
        f"Spark's Python workers would run {other}, which cannot import arrowlog"
        in (result["stderr"])
    )


# A session on a cluster whose executors run an interpreter without arrowlog.
REGISTER_ON_A_CLUSTER = """
import arrowlog.spark
from arrowlog.errors import MissingDependencyError
from pyspark.sql import SparkSession

spark = SparkSession.builder.master("local-cluster[1,1,1024]").getOrCreate()
try:
    arrowlog.spark.register(spark)
except MissingDependencyError as e:
    print("REFUSED", str(e).replace(chr(10), "|"), flush=True)
spark.stop()
"""


@pytest.mark.spark
@pytest.mark.slow
def test_register_on_a_cluster_whose_executors_lack_arrowlog_says_so_in_one_line(
    tmp_path: Path,
) -> None:
    other = bare_venv(tmp_path / "other") / "bin" / "python"
    env = {k: v for k, v in os.environ.items() if not k.startswith(("PYSPARK_", "SPARK_"))}
    env |= {"PYSPARK_PYTHON": str(other), "SPARK_LOCAL_IP": "127.0.0.1"}
    env.pop("PYTHONPATH", None)
    done = subprocess.run(
        [sys.executable, "-c", REGISTER_ON_A_CLUSTER],
        cwd=tmp_path,
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
    )
    refused = [line for line in done.stdout.splitlines() if line.startswith("REFUSED ")]
    assert done.returncode == 0 and refused, done.stdout + done.stderr[-3000:]
    [line] = refused
    assert f"Spark's executors run {other}, which cannot import arrowlog" in line
    assert "spark.pyspark.python" in line and "|" not in line
