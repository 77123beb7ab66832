"""The JVM's encoder of staged data objects against the Python library, which
holds the format.

The Java self-test (``jvm/src/test/java/io/arrowlog/spark/WriterSelfTest.java``)
turns the rows of a spec (``WriterRows.java``; :func:`spec_row` here computes
the same values) into Arrow with Spark's own ``ArrowWriter``, encodes them with
``io.arrowlog.spark.format.SegmentWriter`` (codec none and ZSTD, a small batch
and one large enough for a column table), reads each back with the JVM reader's
classes and writes it where its key says. Here the Python reader must read
each one as a staged data object Python would have written: checksum, header
(to the byte), name, schema (pyspark's ``to_arrow_schema``, a topic made from a
DataFrame), rows, column statistics and column table."""

from __future__ import annotations

import dataclasses
import decimal
import functools
import json
import os
import struct
from pathlib import Path
from typing import Any

import crc32c
import numpy as np
import pyarrow as pa
import pytest

from arrowlog.format.segment import decode_segment
from arrowlog.format.segment.column_table import TABLE_MIN_BYTES
from arrowlog.format.segment.header import (
    HEAD_BYTES,
    HEADER_CRC_KEY,
    HEADER_KEY,
    STATS_KEY,
    SegmentHeader,
    WriterIdentity,
    hex8,
    read_header,
    stats_metadata,
)
from arrowlog.format.segment.projection import decode_columns
from arrowlog.format.stats import column_stats
from arrowlog.format.topic import StagedName, parse_staged_name, staged_at
from tests.jvm.jdk import run_java

pytestmark = [
    pytest.mark.spark,
    pytest.mark.skipif(
        bool(os.environ.get("ARROWLOG_SPARK_MIN")),
        reason="the JVM writer is built for the pyspark of make setup, not the lowest one",
    ),
]

#: WriterSelfTest.CASES: name -> (compressed, rows, append id, writer ms)
CASES = {
    "none-small": (False, 50, f"{0xABCDEF01:032x}", 1_700_000_000_123),
    "zstd-small": (True, 50, f"{0xABCDEF02:032x}", 1_700_000_009_999),
    "none-big": (False, 50_000, f"{0xABCDEF03:032x}", 1_700_000_010_000),
    "zstd-big": (True, 50_000, f"{0xABCDEF04:032x}", 1_712_345_678_901),
}
#: WriterSelfTest's writer: the identity every object's header names
IDENTITY = WriterIdentity(
    producer_id=42, producer_epoch=7, base_sequence=-1, transactional=True,
    transactional_id='spark-write-"é"-1',
)  # fmt: skip
_ZSTD_FRAME = b"\x28\xb5\x2f\xfd"


@pytest.fixture(scope="module")
def self_test(jvm_classes: Path, tmp_path_factory: pytest.TempPathFactory) -> tuple[int, str, Path]:
    """The Java self-test run: its exit code, its output and the directory it
    wrote its objects into (each is written before the JVM reads it back, so
    a failure there leaves the Python reader its say too)."""
    out = tmp_path_factory.mktemp("jvm-writer")
    ran = run_java(jvm_classes, "io.arrowlog.spark.WriterSelfTest", str(out))
    return ran.returncode, ran.stdout + ran.stderr, out


@pytest.fixture
def written(self_test: tuple[int, str, Path]) -> Path:
    return self_test[2]


def test_the_jvm_reader_reads_back_every_object_the_jvm_wrote(
    self_test: tuple[int, str, Path],
) -> None:
    """Whole through SegmentFile (checksum, header against the plan, the topic's
    schema, every column equal to the vectors written), and a large object's two
    columns by the column table (ColumnRanges); wrong input refused."""
    code, output, _ = self_test
    assert code == 0 and " 0 failed" in output, output
    assert output.count("ok     case ") == len(CASES), output
    assert "ok     a batch of another count than its header's is refused" in output


def _object(written: Path, case: str) -> tuple[str, bytes]:
    """The case's one object: its key relative to the partition, its bytes."""
    found = sorted((written / case).rglob("*.arrow"))
    assert len(found) == 1, found
    return str(found[0].relative_to(written / case)), found[0].read_bytes()


@pytest.mark.parametrize("case", sorted(CASES))
def test_the_python_reader_reads_each_object_as_python_wrote_it(written: Path, case: str) -> None:
    """Checksum and header (the bytes Python writes for it), then the schema a
    topic made from the DataFrame has, and exactly the spec's rows."""
    compressed, rows, append_id, ms = CASES[case]
    at, data = _object(written, case)
    header, batch = decode_segment(data, key=at)
    expected = SegmentHeader(
        base_offset=0, record_count=rows, timestamp_ms=ms, append_id=append_id,
        identity=IDENTITY, staged=True,
    )  # fmt: skip
    assert header == expected
    metadata = pa.ipc.open_file(pa.py_buffer(data)).schema.metadata
    assert metadata[HEADER_KEY] == expected.to_json()
    assert metadata[HEADER_CRC_KEY] == hex8(crc32c.crc32c(expected.to_json()))
    want = expected_batch(rows)
    assert batch.schema.equals(want.schema), f"{batch.schema}\n!=\n{want.schema}"
    for name in want.schema.names:
        assert _same_column(batch.column(name), want.column(name)), name
    # the codec asked for: ZSTD frames in the body, and fewer bytes for the same rows
    assert (_ZSTD_FRAME in data) is compressed


@pytest.mark.parametrize("case", sorted(CASES))
def test_a_large_object_gives_two_columns_by_ranged_reads_of_its_column_table(
    written: Path, case: str
) -> None:
    """Python's column path (the head, then the frame and the two columns'
    byte ranges, each checked against the table's CRCs) reads a large object's
    columns without the rest; a small one has no table and is read whole."""
    _, rows, _, _ = CASES[case]
    at, data = _object(written, case)
    fetched: list[tuple[int, int]] = []

    def fetch(ranges: list[tuple[int, int]]) -> list[bytes]:
        fetched.extend(ranges)
        return [data[lo:hi] for lo, hi in ranges]

    head = data[:HEAD_BYTES]
    got = decode_columns(head, len(data), ["bin", "l"], fetch, key=at)
    if case.endswith("small"):
        assert expected_batch(rows).nbytes < TABLE_MIN_BYTES
        assert got is None and fetched == []
        return
    assert got is not None, "no usable column table"
    header, batch = got
    assert header.record_count == rows and batch.schema.names == ["bin", "l"]
    want = expected_batch(rows)
    assert batch.column("bin").equals(want.column("bin"))
    assert batch.column("l").equals(want.column("l"))
    assert len(head) + sum(hi - lo for lo, hi in fetched) < len(data) / 2


@pytest.mark.parametrize("case", sorted(CASES))
def test_each_object_carries_the_column_statistics_python_computes(
    written: Path, case: str
) -> None:
    """``column_stats`` of the same rows (no dictionaries: strings and binaries
    a null count alone), as the same JSON bytes; nested columns none."""
    _, rows, _, _ = CASES[case]
    at, data = _object(written, case)
    want = column_stats(expected_batch(rows))
    assert want is not None and {"f", "dec", "ts", "s"} <= want.keys()
    header = read_header(data, key=at)
    assert isinstance(header, SegmentHeader)
    assert header.stats == want
    metadata = pa.ipc.open_file(pa.py_buffer(data)).schema.metadata
    expected = stats_metadata(dataclasses.replace(header, stats=want))
    assert {k: metadata[k] for k in expected} == expected
    # and handed to the caller, for the ref that commits the object
    assert (written / case / "stats.json").read_bytes() == expected[STATS_KEY]


def test_numbers_in_statistics_are_written_as_python_writes_them(written: Path) -> None:
    """Doubles (Python's shortest repr, its switch to exponents, floats widened,
    powers of two) and decimals (str of a Decimal of the column's scale, as
    pyarrow gives it) as the JVM's statistics write them."""
    probes = json.loads((written / "probes.json").read_text())
    assert len(probes["doubles"]) > 5000
    for bits, text in probes["doubles"]:
        value = struct.unpack(">d", bytes.fromhex(bits))[0]
        assert text == json.dumps(value), (bits, value)
    assert len(probes["decimals"]) > 20
    for unscaled, scale, text in probes["decimals"]:
        value = pa.array([decimal.Decimal(f"{unscaled}E{-scale}")], pa.decimal128(38, scale))
        assert text == str(value[0].as_py()), (unscaled, scale)


def test_compression_makes_the_same_rows_smaller(written: Path) -> None:
    for size in ("small", "big"):
        plain, zstd = _object(written, f"none-{size}")[1], _object(written, f"zstd-{size}")[1]
        assert len(zstd) < len(plain)


@pytest.mark.parametrize("case", sorted(CASES))
def test_each_object_is_named_as_python_names_a_transactional_staged_batch(
    written: Path, case: str
) -> None:
    _, rows, append_id, ms = CASES[case]
    at, _ = _object(written, case)
    assert at == staged_at(StagedName(ms, append_id, rows, transactional=True))
    assert parse_staged_name(at) == StagedName(ms, append_id, rows, transactional=True)


def test_headers_and_names_are_the_bytes_python_writes(written: Path) -> None:
    """Headers of other identities, transactional ids to escape (control
    characters, DEL, non-ASCII, a surrogate pair, none at all) and clocks at
    folder bounds: the JSON and the key Java gives each are Python's."""
    probes = json.loads((written / "probes.json").read_text())["headers"]
    assert len(probes) >= 4
    for p in probes:
        identity = WriterIdentity(
            producer_id=p["producer_id"], producer_epoch=p["producer_epoch"],
            transactional=True, transactional_id=p["transactional_id"],
        )  # fmt: skip
        header = SegmentHeader(
            base_offset=0, record_count=p["record_count"], timestamp_ms=p["timestamp_ms"],
            append_id=p["append_id"], identity=identity, staged=True,
        )  # fmt: skip
        assert p["json"].encode() == header.to_json(), p
        name = StagedName(p["timestamp_ms"], p["append_id"], p["record_count"], transactional=True)
        assert p["at"] == staged_at(name), p


# --- the spec of WriterRows.java --------------------------------------------------------

_MASK = (1 << 64) - 1


def splitmix64(x: int) -> int:
    z = (x + 0x9E3779B97F4A7C15) & _MASK
    z = ((z ^ (z >> 30)) * 0xBF58476D1CE4E5B9) & _MASK
    z = ((z ^ (z >> 27)) * 0x94D049BB133111EB) & _MASK
    return z ^ (z >> 31)


def _signed(value: int, bits: int) -> int:
    value &= (1 << bits) - 1
    return value - (1 << bits) if value >> (bits - 1) else value


def spark_schema() -> Any:
    from pyspark.sql import types as T

    def f(name: str, t: Any, nullable: bool = True) -> Any:
        return T.StructField(name, t, nullable)

    return T.StructType([
        f("id", T.LongType(), False), f("flag", T.BooleanType()), f("tiny", T.ByteType()),
        f("small", T.ShortType()), f("i", T.IntegerType()), f("l", T.LongType()),
        f("f", T.FloatType()), f("d", T.DoubleType()), f("s", T.StringType()),
        f("bin", T.BinaryType()), f("dec", T.DecimalType(10, 2)), f("big", T.DecimalType(38, 10)),
        f("day", T.DateType()), f("ts", T.TimestampType()), f("ntz", T.TimestampNTZType()),
        f("arr", T.ArrayType(T.IntegerType())),
        f("st", T.StructType([f("a", T.IntegerType()), f("b", T.StringType())])),
        f("m", T.MapType(T.StringType(), T.IntegerType())),
        f("blank", T.StringType()), f("nothing", T.NullType()),
    ])  # fmt: skip


def _float(i: int) -> float:
    if i % 17 == 8:
        return float("nan")
    if i == 1:
        return -float(np.finfo(np.float32).max)
    return (i % 1000) * 0.37 - 100.5


def _bytes(i: int) -> bytes:
    return b"".join(struct.pack("<Q", splitmix64(4 * i + k)) for k in range(4))


def _big(i: int, r: int) -> decimal.Decimal:
    unscaled = i - 5 if i in (5, 6) else _signed(r, 64) * 1_000_003 + i
    return decimal.Decimal(f"{unscaled}E-10")  # exact: scaleb rounds to 28 digits


def spec_row(i: int) -> list[Any]:
    """Row ``i`` of WriterRows.row: temporal values as integers of their unit."""
    r = splitmix64(i)
    signed = _signed(r, 64)
    four = 4_000_000_000_000_000
    return [
        i,
        None if i % 7 == 3 else r & 1 == 1,
        None if i % 11 == 5 else (i * 37) % 256 - 128,
        None if i % 13 == 6 else (i * 1009) % 65536 - 32768,
        None if i % 5 == 0 else _signed(r, 32),
        None if i % 9 == 4 else signed,
        None if i % 19 == 2 else _float(i),
        None if i % 23 == 7 else float(r % 2_000_001 - 1_000_000) * 1.0e-7,
        None if i % 6 == 1 else f"row {i}" + (" é€😀" if i % 4 == 0 else ""),
        None if i % 8 == 7 else _bytes(i),
        None if i % 10 == 9 else decimal.Decimal(f"{r % 19_999_999_999 - 9_999_999_999}E-2"),
        None if i % 12 == 11 else _big(i, r),
        None if i % 14 == 13 else (i * 37) % 40_000 - 10_000,
        None if i % 15 == 14 else r % (2 * four + 1) - four,
        None if i % 16 == 15 else splitmix64(i + 1_000_000) % (2 * four + 1) - four,
        None if i % 9 == 8 else [None if j == 2 else j * i - 5 for j in range(i % 4)],
        None if i % 10 == 3 else {"a": None if i % 3 == 0 else i * 3, "b": f"b{i}"},
        None if i % 11 == 10 else [(f"k{k}", None if k == 1 else i + k) for k in range(i % 3)],
        None if i % 2 == 0 else "",
        None,
    ]  # fmt: skip


@functools.cache
def expected_batch(rows: int) -> pa.RecordBatch:
    """The spec's first ``rows`` rows under the schema pyspark gives the Spark schema."""
    from pyspark.sql.pandas.types import to_arrow_schema

    schema = to_arrow_schema(spark_schema(), timezone="UTC")
    columns = list(zip(*(spec_row(i) for i in range(rows)), strict=True))
    arrays = []
    for field, values in zip(schema, columns, strict=True):
        if pa.types.is_temporal(field.type):
            width = pa.int32() if field.type.bit_width == 32 else pa.int64()
            arrays.append(pa.array(values, width).cast(field.type))
        else:
            arrays.append(pa.array(values, field.type))
    return pa.RecordBatch.from_arrays(arrays, schema=schema)


def _same_column(got: pa.Array[Any], want: pa.Array[Any]) -> bool:
    """Equal values, a NaN equal to a NaN (Arrow's equality has NaN unequal to all)."""
    if not pa.types.is_floating(want.type):
        return bool(got.equals(want))
    nulls = got.is_null().equals(want.is_null())
    a, b = got.fill_null(0).to_numpy(), want.fill_null(0).to_numpy()
    return bool(nulls and np.array_equal(a, b, equal_nan=True) and a.dtype == b.dtype)
