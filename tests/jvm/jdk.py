"""The JVM reader's sources compiled and its Java self-tests run (no Spark
session: ``javac`` and ``java`` against pyspark's jars)."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

from arrowlog.spark.jvm import SOURCES, spark_jars

#: the self-tests' sources (the reader's own are in the package: SOURCES)
TESTS = Path(__file__).resolve().parents[2] / "jvm" / "src" / "test"


def compile_sources(classes: Path) -> None:
    """The reader's sources compiled into ``classes`` as ``make setup``
    compiles the jar, with the self-tests' sources beside them."""
    javac = shutil.which("javac")
    assert javac, "the JVM reader's contract needs a JDK (javac, java)"
    sources = sorted(str(p) for d in (SOURCES, TESTS) for p in d.rglob("*.java"))
    compiled = subprocess.run(
        [
            *(javac, "--release", "17", "-Xlint:all,-path,-serial,-classfile", "-Werror"),
            *("-encoding", "UTF-8", "-cp", f"{spark_jars()}/*", "-d", str(classes), *sources),
        ],
        capture_output=True,
        text=True,
        check=False,
    )
    assert compiled.returncode == 0, compiled.stdout + compiled.stderr


def run_java(classes: Path, main: str, *args: str) -> subprocess.CompletedProcess[str]:
    """The self-test ``main`` (a class name) run on ``args``: its output and exit code."""
    java = shutil.which("java")
    assert java, "the JVM reader's contract needs a JDK (javac, java)"
    return subprocess.run(
        [
            *(java, "--add-opens=java.base/java.nio=ALL-UNNAMED"),
            *("-cp", f"{classes}:{spark_jars()}/*", main, *args),
        ],
        capture_output=True,
        text=True,
        check=False,
    )
