"""What a user gets from ``pip install arrowlog``: the wheel's files and metadata,
and a core that works without the extras (and says which extra is missing).

Wheels are built from a copy of the working tree (setuptools writes ``build/`` and
``*.egg-info`` beside the sources, which the suite must not do to the checkout).
Running Spark from an installed wheel is tested in ``tests/spark``.
"""

from __future__ import annotations

import email
import json
import os
import shutil
import subprocess
import sys
import textwrap
import zipfile
from collections.abc import Iterator
from pathlib import Path

import pytest

import arrowlog
from arrowlog._extras import EXTRAS

ROOT = Path(__file__).resolve().parent.parent
#: each test builds a wheel or imports it in a fresh interpreter
pytestmark = pytest.mark.slow

# Only what the wheel is built from: the rest (venvs, caches, stores) can be large.
_NOT_SOURCES = shutil.ignore_patterns(
    ".git", ".venv*", "build", "*.egg-info", "__pycache__", ".*_cache", ".hypothesis",
    "demo-*", "results",
)  # fmt: skip


def build_wheel(dest: Path) -> Path:
    """Build arrowlog's wheel from a copy of the working tree into ``dest``."""
    src = dest / "src"
    shutil.copytree(ROOT, src, ignore=_NOT_SOURCES)
    subprocess.run(
        [sys.executable, "-m", "pip", "wheel", "--no-deps", "--quiet", "-w", str(dest), str(src)],
        check=True,
        capture_output=True,
    )
    (wheel,) = dest.glob("arrowlog-*.whl")
    return wheel


@pytest.fixture(scope="module")
def wheel(tmp_path_factory: pytest.TempPathFactory) -> Iterator[zipfile.ZipFile]:
    with zipfile.ZipFile(build_wheel(tmp_path_factory.mktemp("wheel"))) as whl:
        yield whl


def metadata(whl: zipfile.ZipFile) -> email.message.Message:
    (name,) = (n for n in whl.namelist() if n.endswith(".dist-info/METADATA"))
    return email.message_from_bytes(whl.read(name))


def test_the_wheel_carries_the_library_the_jobs_and_the_spark_entry_point(
    wheel: zipfile.ZipFile,
) -> None:
    names = set(wheel.namelist())
    for module in ("__init__", "demo", "backfill", "export_delta", "export_iceberg"):
        assert f"arrowlog/jobs/{module}.py" in names
    for name in ("pyspark_arrowlog.py", "arrowlog/py.typed", "arrowlog/spark/source.py"):
        assert name in names
    sources = {p.relative_to(ROOT).as_posix() for p in (ROOT / "arrowlog").rglob("*.py")}
    assert sources <= names  # every module of the package, none forgotten
    # the JVM reader's sources and resources, compiled on first use where no jar came
    java = {
        p.relative_to(ROOT).as_posix()
        for p in (ROOT / "arrowlog" / "spark" / "java").rglob("*")
        if p.is_file()
    }
    assert "arrowlog/spark/java/io/arrowlog/spark/ArrowLogProvider.java" in java
    assert java <= names


def test_the_wheel_holds_no_tests_benchmarks_or_infrastructure(wheel: zipfile.ZipFile) -> None:
    tops = {name.split("/")[0] for name in wheel.namelist()}
    assert tops == {"arrowlog", "pyspark_arrowlog.py", f"arrowlog-{arrowlog.__version__}.dist-info"}


def test_the_wheel_carries_the_license(wheel: zipfile.ZipFile) -> None:
    (name,) = (n for n in wheel.namelist() if n.endswith(".dist-info/licenses/LICENSE"))
    license_text = wheel.read(name)
    assert license_text == (ROOT / "LICENSE").read_bytes()
    assert b"Apache License\n                           Version 2.0, January 2004" in license_text
    assert b"END OF TERMS AND CONDITIONS" in license_text
    assert metadata(wheel)["License-Expression"] == "Apache-2.0"


def test_the_wheel_version_is_arrowlog_version(wheel: zipfile.ZipFile) -> None:
    assert metadata(wheel)["Version"] == arrowlog.__version__


def test_the_extras_and_a_core_without_them(wheel: zipfile.ZipFile) -> None:
    meta = metadata(wheel)
    assert set(meta.get_all("Provides-Extra") or []) == {
        "s3",
        "s3fs",
        "gcs",
        "azure",
        "spark",
        "delta",
        "iceberg",
        "s3-server",
        "all",
        "dev",
    }
    requires = meta.get_all("Requires-Dist") or []
    core = {r.split(";")[0].split(">")[0].split("=")[0].strip() for r in requires if ";" not in r}
    assert core == {"pyarrow", "fsspec", "crc32c", "numpy", "click", "rich"}
    assert 'arrowlog[azure,delta,gcs,iceberg,s3,s3-server,spark]; extra == "all"' in requires
    for extra, (modules, _) in EXTRAS.items():
        needed = {r.split(";")[0] for r in requires if r.endswith(f'extra == "{extra}"')}
        # the s3 extra brings botocore, pyiceberg's sql-sqlite extra SQLAlchemy
        package = {"sqlalchemy": "pyiceberg[pyarrow,sql-sqlite]"}
        if extra == "s3fs":
            package["botocore"] = "arrowlog[s3]"
        for module in modules:
            assert any(r.startswith(package.get(module, module)) for r in needed), (extra, module)
    # s3fs's aiobotocore pins botocore: only an extra of its own asks for it
    assert [r for r in requires if r.startswith(("s3fs", "aiobotocore"))] == [
        's3fs>=2025.1; extra == "s3fs"'
    ]
    assert [r for r in requires if r.startswith("botocore")] == ['botocore>=1.34; extra == "s3"']


# --- without the extras: a subprocess whose imports of them fail -----------------------

_BLOCK = """
import importlib.abc, sys
BLOCKED = {blocked!r}
class Block(importlib.abc.MetaPathFinder):
    def find_spec(self, name, path=None, target=None):
        if name.split(".")[0] in BLOCKED:
            raise ModuleNotFoundError(f"No module named {{name!r}}", name=name)
        return None
sys.meta_path.insert(0, Block())
"""


def run_without(blocked: set[str], code: str, tmp_path: Path) -> str:
    """Run ``code`` in a fresh interpreter in which ``blocked`` cannot be imported;
    return its stdout."""
    script = _BLOCK.format(blocked=sorted(blocked)) + textwrap.dedent(code)
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    done = subprocess.run(
        [sys.executable, "-c", script], cwd=tmp_path, env=env, capture_output=True, text=True
    )
    assert done.returncode == 0, done.stderr
    return done.stdout


ALL_EXTRAS = {
    "s3fs", "botocore", "aiobotocore", "boto3", "pyspark", "pandas", "deltalake", "pyiceberg",
    "sqlalchemy",
}  # fmt: skip


def test_the_core_works_on_local_and_memory_stores_without_any_extra(tmp_path: Path) -> None:
    out = run_without(
        ALL_EXTRAS,
        """
        import pyarrow as pa, arrowlog
        schema = pa.schema([("x", pa.int64())])
        for url in ("memory://", "log"):
            log = arrowlog.connect(url, {"fsync": "false"} if url == "log" else None)
            log.create_topic("t", schema)
            log.append("t", pa.record_batch({"x": [1]}, schema=schema), expected_offset=0)
            print(log.read("t")["x"].to_pylist())
        print(sorted(m for m in sys.modules if m.split(".")[0] in BLOCKED))
        """,
        tmp_path,
    )
    assert out.split("\n") == ["[1]", "[1]", "[]", ""]


def test_s3_without_s3fs_opens_through_obstore_and_client_s3fs_names_its_extra(
    tmp_path: Path,
) -> None:
    out = run_without(
        {"s3fs", "aiobotocore"},
        """
        import arrowlog
        store = arrowlog.connect("s3://bucket/prefix", {"anon": "true"}).store
        print(type(store).__name__)
        try:
            arrowlog.connect("s3://bucket/prefix", {"anon": "true", "client": "s3fs"})
        except arrowlog.ArrowLogError as e:
            print(type(e).__name__, isinstance(e, ImportError), e)
        """,
        tmp_path,
    )
    first, second = out.splitlines()
    assert first == "ObjectStore"
    assert second.startswith(
        "MissingDependencyError True an s3:// store with the storage option client=s3fs "
        "needs the 's3fs' extra: pip install 'arrowlog[s3fs]'"
    )
    assert "No module named 's3fs'" in second


def test_s3_without_obstore_names_the_extra(tmp_path: Path) -> None:
    out = run_without(
        {"obstore"},
        """
        import arrowlog
        try:
            arrowlog.connect("s3://bucket/prefix", {"anon": "true"})
        except arrowlog.ArrowLogError as e:
            print(type(e).__name__, isinstance(e, ImportError), e)
        """,
        tmp_path,
    )
    assert out.startswith(
        "MissingDependencyError True an s3:// store needs the 's3' extra: "
        "pip install 'arrowlog[s3]'"
    )
    assert "No module named 'obstore'" in out


def test_every_extra_but_s3fs_installs_beside_boto3(tmp_path: Path) -> None:
    """``pip install '<checkout>[all]' boto3==<the newest>`` resolves (pip's
    resolver, against the package index, nothing installed): aiobotocore pins
    botocore to a narrow range that lags boto3's releases, which made it
    ResolutionImpossible while the s3 extra brought s3fs."""
    versions = subprocess.run(
        [sys.executable, "-m", "pip", "index", "versions", "boto3", "--disable-pip-version-check"],
        capture_output=True,
        text=True,
        check=True,
        timeout=300,
    ).stdout
    newest = versions.split("(", 1)[1].split(")", 1)[0]
    src = tmp_path / "src"
    shutil.copytree(ROOT, src, ignore=_NOT_SOURCES)
    report = tmp_path / "report.json"
    done = subprocess.run(
        [
            *(sys.executable, "-m", "pip", "install", "--dry-run", "--ignore-installed"),
            *("--quiet", "--disable-pip-version-check", "--report", str(report)),
            f"{src}[all]",
            f"boto3=={newest}",
        ],
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    chosen = {
        item["metadata"]["name"].lower(): item["metadata"]["version"]
        for item in json.loads(report.read_text())["install"]
    }
    assert chosen["boto3"] == newest
    assert {"arrowlog", "botocore", "obstore", "pyspark", "deltalake"} <= set(chosen)
    assert "s3fs" not in chosen and "aiobotocore" not in chosen


def test_spark_without_pyspark_names_the_extra(tmp_path: Path) -> None:
    out = run_without(
        {"pyspark"},
        """
        try:
            import arrowlog.spark
        except ImportError as e:
            print(type(e).__name__, e)
        """,
        tmp_path,
    )
    assert out.startswith(
        "MissingDependencyError the Spark data source (arrowlog.spark) needs the 'spark' "
        "extra: pip install 'arrowlog[spark]'"
    )


def test_delta_without_deltalake_names_the_extra(tmp_path: Path) -> None:
    out = run_without(
        {"deltalake"},
        """
        from arrowlog._extras import require_extra
        try:
            require_extra("delta")
        except ImportError as e:
            print(type(e).__name__, e)
        """,
        tmp_path,
    )
    assert out.startswith("MissingDependencyError the Delta export needs the 'delta' extra")
    assert "pip install 'arrowlog[delta]'" in out


def test_iceberg_without_pyiceberg_names_the_extra(tmp_path: Path) -> None:
    """The export's module imports without pyiceberg; opening a catalog says
    which extra to install."""
    out = run_without(
        {"pyiceberg", "sqlalchemy"},
        """
        from arrowlog.jobs.export_iceberg import CatalogConfig
        try:
            CatalogConfig.sqlite("warehouse").open()
        except ImportError as e:
            print(type(e).__name__, e)
        """,
        tmp_path,
    )
    assert out.startswith("MissingDependencyError the Iceberg export needs the 'iceberg' extra")
    assert "pip install 'arrowlog[iceberg]'" in out
    assert not (tmp_path / "warehouse").exists()
