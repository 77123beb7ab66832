"""The contract between arrowlog and its JVM reader, checked in both languages
without a Spark session.

Python writes golden files (:mod:`tests.jvm.golden`: segments of every codec,
nested and dictionary-encoded columns, a compacted object, staged data objects
and the commit object naming them, plan, check, relocate and error answers,
the names both sides share); the Java self-test
(``jvm/src/test/java/io/arrowlog/spark/GoldenSelfTest.java``), compiled
with ``javac`` together with the reader's (``arrowlog/spark/java``) against pyspark's jars and run
with ``java``, reads them with the JVM reader's own classes and must read the
rows the Python reader reads. A change on either side that the other does not
follow fails here: the committed goldens must be what the library writes now,
and the JVM must read them."""

from __future__ import annotations

import datetime
import decimal
import json
import os
import shutil
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pyarrow as pa
import pytest

from arrowlog.format.segment import CRC_KEY, decode_segment
from arrowlog.spark import plan_wire
from tests.jvm import golden
from tests.jvm.jdk import run_java

pytestmark = [
    pytest.mark.spark,
    pytest.mark.skipif(
        bool(os.environ.get("ARROWLOG_SPARK_MIN")),
        reason="the JVM reader is built for the pyspark of make setup, not the lowest one",
    ),
]

#: the layers of the JVM reader's packages: each may use only those below it
LAYERS = {
    "io.arrowlog.spark.errors": 0,
    "io.arrowlog.spark.format": 1,
    "io.arrowlog.spark.vectors": 1,
    "io.arrowlog.spark.planning": 2,
    "io.arrowlog.spark": 3,
}


def test_the_committed_golden_files_are_what_the_library_writes_now(tmp_path: Path) -> None:
    """A change of the segment format, the plan wire or a shared name changes
    the goldens: they must be written again (the command is in
    tests/jvm/golden.py) and the Java self-test must still read them."""
    golden.write(tmp_path)
    fresh = _files(tmp_path)
    committed = _files(golden.GOLDEN)
    stale = "run `PYTHONPATH=$PWD .venv/bin/python -m tests.jvm.golden` and commit the result"
    assert sorted(fresh) == sorted(committed), stale
    for name in sorted(fresh):
        new, old = (tmp_path / name).read_bytes(), (golden.GOLDEN / name).read_bytes()
        if new != old:
            # a compressor of another version may write other bytes for the same values
            assert name.endswith(".arrow") and _same_segment(new, old), f"{name}: {stale}"


def _files(root: Path) -> list[str]:
    return [str(p.relative_to(root)) for p in root.rglob("*") if p.is_file()]


def _same_segment(a: bytes, b: bytes) -> bool:
    """The same segment but for its compressed bytes: header and every other
    metadata entry, columns, and values (each checked first, by its CRC)."""

    def content(data: bytes) -> tuple[dict[bytes, bytes], pa.Schema, pa.Table]:
        decode_segment(data, key="<golden>")
        reader = pa.ipc.open_file(pa.py_buffer(data))
        metadata = dict(reader.schema.metadata or {})
        metadata.pop(CRC_KEY)  # a CRC of the stored bytes
        return metadata, reader.schema.remove_metadata(), reader.read_all()

    (meta_a, schema_a, rows_a), (meta_b, schema_b, rows_b) = content(a), content(b)
    return meta_a == meta_b and schema_a.equals(schema_b) and bool(rows_a.equals(rows_b))


@pytest.fixture(scope="module")
def self_test(
    jvm_classes: Path, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[tuple[int, str, Path]]:
    """The Java self-test (compiled with the main sources, see
    tests/jvm/conftest.py) run on the committed goldens: its exit code, its
    output and the directory it wrote its requests into."""
    out = tmp_path_factory.mktemp("jvm-self-test") / "out"
    out.mkdir()
    ran = run_java(jvm_classes, "io.arrowlog.spark.GoldenSelfTest", str(golden.GOLDEN), str(out))
    yield ran.returncode, ran.stdout + ran.stderr, out


def test_the_jvm_reader_reads_the_golden_files_as_the_python_reader_does(
    self_test: tuple[int, str, Path],
) -> None:
    """Every case's rows through the JVM reader's classes, every answer, the
    shared names, and the refusal of an answer of another wire version (see
    the self-test's checks in its output)."""
    code, output, _ = self_test
    assert code == 0, output
    assert "0 failed" in output and "case compacted reads as Python reads it" in output
    # staged data objects at the offsets their commit gives, each wrong plan of them refused
    assert "case staged reads as Python reads it" in output
    # Spark's Python tracebacks read as the arrowlog error's line (Tracebacks.java)
    assert "ok     a Python traceback reads as its arrowlog error's line" in output
    assert output.count("ok     staged objects: ") == 6, output


def test_the_planner_parses_the_requests_the_jvm_sends(self_test: tuple[int, str, Path]) -> None:
    from pyspark.sql import datasource as ds

    _, output, out = self_test
    lines = (out / "requests.jsonl").read_text().splitlines()
    requests = [plan_wire.read_request(line) for line in lines]
    assert [r["kind"] for r in requests] == ["plan", "plan", "check", "relocate"], output
    assert all(r["options"] == {"path": "/golden/log", "topic": "t"} for r in requests)
    first, second, _, relocate = requests
    assert first["kind"] == "plan" and second["kind"] == "plan"
    assert relocate["kind"] == "relocate"
    assert first["columns"] == ["i", "s"] and second["columns"] is None
    assert second["filters"] == []
    # the JVM's filters (Contract.EVERY_FILTER) as the Python source takes them
    assert [plan_wire.spark_filter(f) for f in first["filters"]] == [
        ds.EqualTo(("b",), True),
        ds.EqualTo(("i",), 3),
        ds.GreaterThan(("l",), 7),
        ds.GreaterThanOrEqual(("f",), 1.5),
        ds.LessThan(("s",), "m"),
        ds.LessThanOrEqual(("dec",), decimal.Decimal("12.34")),
        ds.EqualTo(("bin",), b"\x00\x01\xff"),
        ds.GreaterThan(("d",), datetime.date(2024, 1, 2)),
        ds.LessThan(("ts",), datetime.datetime(2024, 1, 2, 3, 4, 5, 123456)),
        ds.In(("partition",), (0, 2)),
        ds.IsNull(("x",)),
        ds.IsNotNull(("y",)),
    ]
    assert relocate["relocate"] == {"key": "t/0/segments/5.arrow", "base": 5, "end": 8}


def test_the_jvm_packages_use_only_the_layers_below_them(jvm_classes: Path) -> None:
    """errors, then format and vectors, then planning, then the DSv2 glue in
    io.arrowlog.spark: jdeps over the compiled classes finds no other edge."""
    jdeps = shutil.which("jdeps")
    assert jdeps, "the JVM reader's contract needs a JDK (jdeps)"
    found = subprocess.run(
        [jdeps, "-verbose:package", "-filter:none", "-e", r"io\.arrowlog\..*", str(jvm_classes)],
        capture_output=True,
        text=True,
        check=True,
    ).stdout
    edges = set()
    for line in found.splitlines():
        parts = line.split()
        if len(parts) >= 3 and parts[1] == "->" and parts[0] in LAYERS:
            edges.add((parts[0], parts[2]))
    assert ("io.arrowlog.spark.planning", "io.arrowlog.spark.format") in edges, found
    upward = sorted((a, b) for a, b in edges if a != b and LAYERS[b] >= LAYERS[a])
    assert upward == [], json.dumps(upward)
