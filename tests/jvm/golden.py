"""The golden files of the contract between arrowlog and its JVM reader.

Python writes them with the library's own segment encoder and plan wire; the
Java self-test (``jvm/src/test/java/io/arrowlog/spark/GoldenSelfTest.java``)
reads them with the JVM reader's classes and compares what it reads with what
the Python reader reads (each case's ``expected.json``, written here by
:func:`arrowlog.read.scan.read_task`). ``tests/jvm/test_golden_contract.py`` writes
them again into a temporary directory, fails if they differ from the committed
ones, and runs the self-test.

After a deliberate change of the segment format, the plan wire or an option
name, write them again and commit them::

    PYTHONPATH=$PWD .venv/bin/python -m tests.jvm.golden

Layout (``DIR``: ``jvm/src/test/resources/golden``):

``contract.json``
    the names both sides must agree on: wire version, metadata column roles,
    filter ops and value types, option names, readers, the planner setting.
``<case>/plan.json``
    a plan answer line, as the planner writes it (locations relative to DIR);
``<case>/expected.json``
    the Spark schema of the read and its rows as the Python reader reads them
    (one JSON array per row: see :func:`json_value`);
``<case>/<partition>/...``
    the segments, compacted objects, staged data objects and commit objects
    of the case (a commit object is never planned: its staged objects are).
``wire/*.json``
    a check, relocate and error answer, and ``expected.json``: what each says.
"""

from __future__ import annotations

import base64
import decimal
import json
import sys
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pyarrow as pa

from arrowlog.config import Compression
from arrowlog.errors import InvalidConfigError
from arrowlog.format.checkpoint import SegmentSummary
from arrowlog.format.segment import (
    DICTIONARY_KEY,
    FORMAT_VERSION,
    STAGED_VERSION,
    Compaction,
    Ref,
    SegmentHeader,
    WriterIdentity,
    empty_batch,
    encode,
)
from arrowlog.format.topic import (
    StagedName,
    batch_key,
    compacted_key,
    partition_dir,
    segment_key,
    staged_at,
)
from arrowlog.read.scan import METADATA_COLUMNS, ScanSegment, ScanTask, metadata_names, read_task
from arrowlog.spark import plan_wire
from arrowlog.spark.jvm import PYTHON_CONF
from arrowlog.spark.options import BATCH_READ_OPTIONS, READ_OPTIONS, READERS, STREAM_READ_OPTIONS
from arrowlog.spark.schema import arrow_schema, spark_read_schema
from arrowlog.storage.local import LocalStore

GOLDEN = Path(__file__).resolve().parents[2] / "jvm" / "src" / "test" / "resources" / "golden"
#: every append time of the goldens (a fixed one: the files are compared byte for byte)
TIMESTAMP_MS = 1_750_000_000_000
UTC_US = pa.timestamp("us", tz="UTC")

PRIMITIVE_FIELDS: list[pa.Field[Any]] = [
    pa.field("i8", pa.int8()),
    pa.field("i16", pa.int16()),
    pa.field("i32", pa.int32()),
    pa.field("i64", pa.int64(), nullable=False),
    pa.field("f32", pa.float32()),
    pa.field("f64", pa.float64()),
    pa.field("b", pa.bool_()),
    pa.field("s", pa.string()),
    pa.field("bin", pa.binary()),
    pa.field("dec", pa.decimal128(10, 2)),
    pa.field("d", pa.date32()),
    pa.field("ts", UTC_US),
    pa.field("ts_ms", pa.timestamp("ms")),  # converted to microseconds on the JVM
    pa.field("ts_ns", pa.timestamp("ns", tz="UTC")),
]
PRIMITIVES = pa.schema(PRIMITIVE_FIELDS)
NESTED_FIELDS: list[pa.Field[Any]] = [
    pa.field("offset", pa.int64()),  # a topic column named as a metadata one
    pa.field("st", pa.struct([pa.field("a", pa.int32()), pa.field("b", pa.string())])),
    pa.field("li", pa.list_(pa.int64())),
    pa.field("m", pa.map_(pa.string(), pa.int32())),
    pa.field("ls", pa.list_(pa.struct([pa.field("x", pa.int16()), pa.field("t", UTC_US)]))),
]
NESTED = pa.schema(NESTED_FIELDS)
WORD_FIELDS: list[pa.Field[Any]] = [pa.field("word", pa.string()), pa.field("raw", pa.binary())]
WORDS = pa.schema(WORD_FIELDS)
KEYED_FIELDS: list[pa.Field[Any]] = [pa.field("k", pa.string()), pa.field("v", pa.int64())]
KEYED = pa.schema(KEYED_FIELDS)


@dataclass(frozen=True)
class Stored:
    """An object of a case: a segment, a compacted object, a staged data
    object or a commit object."""

    key: str
    batch: pa.RecordBatch
    header: SegmentHeader
    compression: Compression
    #: whether the header gets column statistics (a commit object's has none)
    stats: bool = True


@dataclass(frozen=True)
class Case:
    """One read: its topic's schema, the objects it reads and its plan's tasks."""

    name: str
    schema: pa.Schema
    objects: tuple[Stored, ...]
    #: per task: (partition, [(key, base, end, lo, hi, compacted span, droppable)]);
    #: a planned segment's append id is its object's (none for a compacted object)
    tasks: tuple[tuple[int, tuple[tuple[Any, ...], ...]], ...]
    #: objects that must hold a dictionary-encoded column (else the case tests less)
    dictionaries: tuple[str, ...] = field(default=())


def primitives(start: int, n: int) -> pa.RecordBatch:
    idx = range(start, start + n)
    nanos = [(1_700_000_000_000_000 + i * 7_000_001) * 1000 for i in idx]
    return pa.record_batch(
        {
            "i8": pa.array([i % 100 - 50 for i in idx], pa.int8()),
            "i16": pa.array([i * 300 - 2000 for i in idx], pa.int16()),
            "i32": pa.array([None if i % 4 == 1 else i * 1000 - 3 for i in idx], pa.int32()),
            "i64": pa.array([i * 10**12 - 7 for i in idx], pa.int64()),
            "f32": pa.array([i / 4 for i in idx], pa.float32()),
            "f64": pa.array([None if i % 5 == 2 else i * 1.5 - 3 for i in idx], pa.float64()),
            "b": pa.array([None if i % 6 == 5 else i % 3 == 0 for i in idx], pa.bool_()),
            "s": pa.array([None if i % 7 == 3 else f"s{i % 3}" for i in idx], pa.string()),
            "bin": pa.array([bytes([i % 2, 255 - i, 0]) for i in idx], pa.binary()),
            "dec": pa.array(
                [decimal.Decimal(i * 37 - 100).scaleb(-2) for i in idx], pa.decimal128(10, 2)
            ),
            "d": pa.array([19_000 + i for i in idx], pa.date32()),
            "ts": pa.array([1_700_000_000_000_000 + i * 1_000_001 for i in idx], UTC_US),
            "ts_ms": pa.array([1_700_000_000_000 + i for i in idx], pa.timestamp("ms")),
            "ts_ns": pa.array(nanos, pa.timestamp("ns", tz="UTC")),
        },
        schema=PRIMITIVES,
    )


def nested(start: int, n: int) -> pa.RecordBatch:
    idx = range(start, start + n)
    return pa.record_batch(
        {
            "offset": pa.array([-i for i in idx], pa.int64()),
            "st": pa.array(
                [None if i % 5 == 4 else {"a": i, "b": None if i % 3 else f"b{i}"} for i in idx],
                NESTED.field("st").type,
            ),
            "li": pa.array(
                [None if i % 4 == 3 else [i * j for j in range(i % 3)] for i in idx],
                NESTED.field("li").type,
            ),
            "m": pa.array(
                [[(f"k{j}", None if j == 1 else i + j) for j in range(i % 3)] for i in idx],
                NESTED.field("m").type,
            ),
            "ls": pa.array(
                [[{"x": i, "t": 1_700_000_000_000_000 + i}, None] for i in idx],
                NESTED.field("ls").type,
            ),
        },
        schema=NESTED,
    )


def words(start: int, n: int) -> pa.RecordBatch:
    idx = range(start, start + n)
    return pa.record_batch(
        {
            "word": pa.array([None if i % 9 == 4 else f"word-{i % 3}" for i in idx]),
            "raw": pa.array([b"\x00\x01" * (i % 2 + 1) for i in idx], pa.binary()),
        },
        schema=WORDS,
    )


def keyed(start: int, n: int) -> pa.RecordBatch:
    idx = range(start, start + n)
    return pa.record_batch(
        {"k": [f"key{i}" for i in idx], "v": [None if i % 4 == 2 else i * 11 for i in idx]},
        schema=KEYED,
    )


def segment(
    case: str, base: int, batch: pa.RecordBatch, compression: Compression, partition: int = 0
) -> Stored:
    header = SegmentHeader(
        base_offset=base,
        record_count=batch.num_rows,
        timestamp_ms=TIMESTAMP_MS + base,
        append_id=f"golden-{case}-{partition}-{base}",
    )
    return Stored(segment_key(case, partition, base), batch, header, compression)


def codec_case(name: str, compression: Compression) -> Case:
    """Two segments of every primitive type, the plan starting and ending
    inside them."""
    one = segment(name, 0, primitives(0, 6), compression)
    two = segment(name, 6, primitives(6, 6), compression)
    planned = ((one.key, 0, 6, 1, 6, None, False), (two.key, 6, 12, 6, 11, None, False))
    dictionaries = () if compression is Compression.NONE else (one.key, two.key)
    return Case(name, PRIMITIVES, (one, two), ((0, planned),), dictionaries)


def nested_case() -> Case:
    """Structs, lists and maps (nulls at every level) in a ZSTD segment, with
    a topic column named ``offset``: the metadata column is ``_offset``."""
    one = segment("nested", 0, nested(0, 9), Compression.ZSTD)
    return Case("nested", NESTED, (one,), ((0, ((one.key, 0, 9, 0, 9, None, False),)),))


def dictionary_case() -> Case:
    """Repeated strings and binaries, stored dictionary-encoded, in two
    partitions (a task each)."""
    one = segment("dictionary", 0, words(0, 12), Compression.ZSTD)
    two = segment("dictionary", 0, words(20, 12), Compression.LZ4, partition=1)
    tasks = (
        (0, ((one.key, 0, 12, 2, 12, None, False),)),
        (1, ((two.key, 0, 12, 0, 7, None, False),)),
    )
    return Case("dictionary", WORDS, (one, two), tasks, (one.key, two.key))


def compacted_case() -> Case:
    """A compacted LZ4 object of ``[0, 7)`` holding the records of two
    segments (``[0, 3)`` and ``[5, 7)``: offset 3 was aborted, 4 a marker),
    then a segment after it; the plan reads ``[1, 9)`` with the aborted
    segment droppable (read_uncommitted)."""
    runs = ((0, 3, TIMESTAMP_MS + 1), (5, 2, TIMESTAMP_MS + 5))
    batch = pa.concat_tables(
        [pa.Table.from_batches([keyed(0, 3)]), pa.Table.from_batches([keyed(5, 2)])]
    ).combine_chunks()
    header = SegmentHeader(
        base_offset=0,
        record_count=batch.num_rows,
        timestamp_ms=TIMESTAMP_MS + 10,
        append_id="compact-golden",
        compaction=Compaction(0, 7, runs),
    )
    key = compacted_key("compacted", 0, 0, 7)
    whole = Stored(key, batch.to_batches()[0], header, Compression.LZ4)
    after = segment("compacted", 7, keyed(7, 3), Compression.LZ4)
    planned = (
        (key, 0, 3, 1, 3, (0, 7), False),
        (key, 3, 4, 3, 4, (0, 7), True),
        (key, 5, 7, 5, 7, (0, 7), False),
        (after.key, 7, 10, 7, 9, None, False),
    )
    return Case("compacted", KEYED, (whole, after), ((0, planned),))


def staged_case() -> Case:
    """Staged appends: a segment ``[0, 3)``, then a commit object at 3 naming
    two staged data objects (a plain batch of 4 records and an idempotent
    producer's of 3, ZSTD; their headers say offset 0), then a segment at 10.
    The plan reads ``[1, 12)``: the staged batches from their own objects at
    the offsets the commit gives them (the commit object itself is stored for
    the self-test, which must refuse it planned as records)."""
    first = segment("staged", 0, keyed(0, 3), Compression.LZ4)
    producer = WriterIdentity(producer_id=7, producer_epoch=0, base_sequence=0)
    plain = _staged(TIMESTAMP_MS + 3, keyed(3, 4), WriterIdentity(), 0xA)
    idempotent = _staged(TIMESTAMP_MS + 4, keyed(7, 3), producer, 0xB)
    refs = (_ref(plain), _ref(idempotent))
    header = SegmentHeader(
        base_offset=3, record_count=7, timestamp_ms=TIMESTAMP_MS + 5,
        append_id=f"{0xC:032x}", refs=refs,
    )  # fmt: skip
    commit = Stored(
        segment_key("staged", 0, 3), empty_batch(KEYED), header, Compression.NONE, False
    )
    last = segment("staged", 10, keyed(10, 2), Compression.LZ4)
    # the staged batches as the index gives them (the planner's source)
    batches = SegmentSummary.of(header, 0).batches()
    planned = (
        (first.key, 0, 3, 1, 3, None, False),
        *((batch_key("staged", 0, b.base, b.at), b.base, b.end, b.base, b.end, None, False)
          for b in batches),
        (last.key, 10, 12, 10, 12, None, False),
    )  # fmt: skip
    return Case("staged", KEYED, (first, plain, idempotent, commit, last), ((0, planned),))


def _ref(staged: Stored) -> Ref:
    """The ref a commit object names ``staged`` by, as a staging writer makes it."""
    data, header = encode(staged.batch, staged.header, staged.compression, stats=staged.stats)
    return Ref(
        at=staged.key[len(partition_dir("staged", 0)) :], record_count=header.record_count,
        size=len(data), timestamp_ms=header.timestamp_ms, append_id=header.append_id,
        identity=header.identity, stats=header.stats,
    )  # fmt: skip


def _staged(writer_ms: int, batch: pa.RecordBatch, identity: WriterIdentity, tag: int) -> Stored:
    """A staged data object of topic ``staged``, partition 0."""
    append_id = f"{tag:032x}"
    name = StagedName(
        writer_ms, append_id, batch.num_rows, identity.producer_id, identity.producer_epoch,
        identity.base_sequence,
    )  # fmt: skip
    header = SegmentHeader(
        base_offset=0, record_count=batch.num_rows, timestamp_ms=writer_ms,
        append_id=append_id, identity=identity, staged=True,
    )  # fmt: skip
    key = partition_dir("staged", 0) + staged_at(name)
    return Stored(key, batch, header, Compression.ZSTD)


def cases() -> list[Case]:
    return [
        codec_case("codec-none", Compression.NONE),
        codec_case("codec-lz4", Compression.LZ4),
        codec_case("codec-zstd", Compression.ZSTD),
        nested_case(),
        dictionary_case(),
        compacted_case(),
        staged_case(),
    ]


def contract() -> dict[str, Any]:
    """The names both languages must agree on."""
    return {
        "plan_wire_version": plan_wire.VERSION,
        "segment_format_version": FORMAT_VERSION,
        "staged_format_version": STAGED_VERSION,
        "metadata_roles": list(METADATA_COLUMNS),
        "filter_ops": list(plan_wire.FILTER_OPS),
        "value_types": list(plan_wire.VALUE_TYPES),
        "read_options": sorted({*READ_OPTIONS, *BATCH_READ_OPTIONS, *STREAM_READ_OPTIONS}),
        "readers": list(READERS),
        "python_conf": PYTHON_CONF,
    }


def write(target: Path) -> None:
    """Write every golden file into ``target``."""
    target.mkdir(parents=True, exist_ok=True)
    (target / "contract.json").write_text(_dumps(contract()) + "\n")
    for case in cases():
        write_case(target, case)
    write_wire(target / "wire")


def write_case(target: Path, case: Case) -> None:
    sizes: dict[str, int] = {}
    for stored in case.objects:
        data, _ = encode(stored.batch, stored.header, stored.compression, stats=stored.stats)
        path = target / stored.key
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(bytes(data))
        sizes[stored.key] = len(data)
        if stored.key in case.dictionaries:
            schema = pa.ipc.open_file(pa.py_buffer(bytes(data))).schema
            assert DICTIONARY_KEY in (schema.metadata or {}), f"{stored.key}: no dictionary"
    append_ids = {s.key: s.header.append_id for s in case.objects}
    tasks = [
        _task(case, partition, planned, sizes, append_ids) for partition, planned in case.tasks
    ]
    spark = spark_read_schema(case.schema)
    answer = plan_wire.plan_answer(
        [plan_wire.task_wire(t, location=lambda key: key) for t in tasks],
        columns=[f.name for f in spark.fields],
        schemas={case.name: plan_wire.encode_schema(case.schema.serialize().to_pybytes())},
        metadata_columns=metadata_names(case.schema),
    )
    (target / case.name / "plan.json").write_text(plan_wire.encode(answer) + "\n")
    store = LocalStore(target, fsync=False)
    rows = [row for t in tasks for row in json_rows(read_task(store, t, arrow_schema(spark)))]
    expected = {"spark_schema": json.loads(spark.json()), "rows": rows}
    (target / case.name / "expected.json").write_text(_dumps(expected) + "\n")


def _task(
    case: Case,
    partition: int,
    planned: tuple[tuple[Any, ...], ...],
    sizes: dict[str, int],
    append_ids: dict[str, str],
) -> ScanTask:
    segments = []
    for key, base, end, lo, hi, span, droppable in planned:
        append_id = None if span is not None else append_ids[key]
        segments.append(ScanSegment(key, base, end, lo, hi, sizes[key], span, append_id, droppable))
    size = sum(sizes[k] for k in {s.key for s in segments})
    return ScanTask(case.name, partition, tuple(segments), size, case.schema)


def write_wire(target: Path) -> None:
    """A check, relocate and error answer, and what the JVM must read in them."""
    target.mkdir(parents=True, exist_ok=True)
    names = metadata_names(NESTED)
    relocated: plan_wire.RelocatedSegment = {
        "location": "compacted/0/compacted.arrow",
        "key": "compacted/0/compacted.arrow",
        "size": 4242,
        "compacted": [0, 7],
    }
    error = InvalidConfigError("option endingOffsets: expected earliest, latest or JSON")
    answers: dict[str, plan_wire.Answer] = {
        "check": plan_wire.check_answer("column 't' of type time64[us]", names),
        "check-failed": plan_wire.check_answer(None, None),
        "relocate": plan_wire.relocate_answer(relocated),
        "relocate-none": plan_wire.relocate_answer(None),
        "error": plan_wire.error_answer(error),
    }
    for name, answer in answers.items():
        (target / f"{name}.json").write_text(plan_wire.encode(answer) + "\n")
    expected = {
        "check": {"unreadable": "column 't' of type time64[us]", "metadata_columns": names},
        "check-failed": {"unreadable": None, "metadata_columns": None},
        "relocate": relocated,
        "relocate-none": None,
        "error": {"type": "InvalidConfigError", "message": str(error)},
    }
    (target / "expected.json").write_text(_dumps(expected) + "\n")


def json_rows(batches: Iterator[pa.RecordBatch]) -> list[list[Any]]:
    """The rows of ``batches`` as JSON arrays (:func:`json_value`)."""
    rows: list[list[Any]] = []
    for batch in batches:
        plain: list[Any] = [c.cast(_json_type(c.type)) for c in batch.columns]
        columns = [json_value(c.to_pylist()) for c in plain]
        rows.extend([list(r) for r in zip(*columns, strict=True)])
    return rows


def _json_type(t: pa.DataType) -> pa.DataType:
    """Dates as days and timestamps as microseconds since the epoch (the
    batches are cast to Spark's types first: every timestamp is in us)."""
    if pa.types.is_timestamp(t):
        return pa.int64()
    if pa.types.is_date32(t):
        return pa.int32()
    if isinstance(t, pa.StructType):
        return pa.struct(
            [t.field(i).with_type(_json_type(t.field(i).type)) for i in range(t.num_fields)]
        )
    if isinstance(t, pa.MapType):
        return pa.map_(_json_type(t.key_type), _json_type(t.item_type))
    if isinstance(t, pa.ListType):
        return pa.list_(t.value_field.with_type(_json_type(t.value_type)))
    return t


def json_value(v: Any) -> Any:
    """A value as the self-test renders Spark's: a decimal as its plain string,
    binary as base64, a struct as the array of its fields, a map as an array
    of ``[key, value]``."""
    if isinstance(v, decimal.Decimal):
        return format(v, "f")
    if isinstance(v, bytes):
        return base64.b64encode(v).decode()
    if isinstance(v, dict):
        return [json_value(x) for x in v.values()]
    if isinstance(v, list | tuple):
        return [json_value(x) for x in v]
    return v


def _dumps(value: dict[str, Any]) -> str:
    """JSON with each top-level field on a line of its own, and each row of
    ``rows`` (a diff of a golden file shows which rows changed)."""
    lines = []
    for name, v in value.items():
        if name == "rows":
            rows = ",\n  ".join(json.dumps(r, separators=(",", ":")) for r in v)
            lines.append(f'"rows": [\n  {rows}\n ]')
        else:
            lines.append(f"{json.dumps(name)}: {json.dumps(v, separators=(',', ':'))}")
    return "{\n " + ",\n ".join(lines) + "\n}"


if __name__ == "__main__":
    write(Path(sys.argv[1]) if len(sys.argv) > 1 else GOLDEN)
