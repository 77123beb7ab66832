"""The plan wire: the JSON lines the JVM reader and its Python planner exchange.

The JVM runs ``python -m arrowlog.spark.jvm_planner`` and writes one request
per line to its stdin; the planner writes one answer per line to its stdout.
docs/plan-wire.md says what each field means. The names live here and, for the
JVM, in ``arrowlog/spark/java/io/arrowlog/spark/planning/PlanWire.java``; the
golden files that ``tests/jvm/golden.py`` writes with this module, and that the
Java self-test reads, fail the suite when the two drift apart.

Every request and every answer carries ``version`` (:data:`VERSION`). The
planner refuses a request of another version with
:class:`~arrowlog.errors.UnsupportedVersionError`, and the JVM refuses an
answer of another version: a jar and a Python package from different builds
fail with both versions named instead of misreading each other. A change to any
field's name or meaning is a new version.
"""

from __future__ import annotations

import base64
import datetime
import decimal
import json
from collections.abc import Callable, Mapping, Sequence
from typing import Any, Final, Literal, TypedDict, cast

from arrowlog.errors import UnsupportedVersionError
from arrowlog.read.scan import ScanTask

VERSION: Final = 1

WriteKind = Literal["write_check", "write_begin", "write_sign", "write_commit", "write_abort"]
Kind = Literal["plan", "check", "relocate"] | WriteKind
#: what a request asks: a read's tasks, whether the JVM can read its topic,
#: where a segment removed since the plan lies now, or a batch write's steps
KINDS: Final[tuple[Kind, ...]] = (
    "plan", "check", "relocate",
    "write_check", "write_begin", "write_sign", "write_commit", "write_abort",
)  # fmt: skip
#: the kinds of a batch write's requests (:mod:`arrowlog.spark.jvm_writing` answers them)
WRITE_KINDS: Final = ("write_check", "write_begin", "write_sign", "write_commit", "write_abort")

#: the Spark filters a plan request may carry (pyspark.sql.datasource's names);
#: the JVM leaves out any other, and any value of a type without a tag below
FILTER_OPS: Final = (
    "EqualTo",
    "GreaterThan",
    "GreaterThanOrEqual",
    "LessThan",
    "LessThanOrEqual",
    "In",
    "IsNull",
    "IsNotNull",
)
#: the tags of a filter's typed values (``{"type": tag, "value": ...}``)
VALUE_TYPES: Final = ("bool", "int", "float", "str", "decimal", "binary", "date", "timestamp_us")


class TypedValue(TypedDict):
    type: str
    value: Any


class _FilterRequired(TypedDict):
    op: str
    attribute: list[str]


class FilterSpec(_FilterRequired, total=False):
    #: one value, a list of them (``In``), or none (``IsNull``, ``IsNotNull``)
    value: TypedValue | list[TypedValue]


class PlanRequest(TypedDict):
    version: int
    kind: Literal["plan"]
    #: the read's options as Spark passed them (``path`` included)
    options: dict[str, str]
    #: the topic columns Spark needs, in order; null for all of them
    columns: list[str] | None
    filters: list[FilterSpec]


class CheckRequest(TypedDict):
    version: int
    kind: Literal["check"]
    options: dict[str, str]


class RelocatedWanted(TypedDict):
    key: str
    base: int
    end: int


class RelocateRequest(TypedDict):
    version: int
    kind: Literal["relocate"]
    options: dict[str, str]
    relocate: RelocatedWanted


class _WriteRequired(TypedDict):
    version: int
    kind: WriteKind
    #: the write's options as Spark passed them (``path`` included)
    options: dict[str, str]


class WriteRequest(_WriteRequired, total=False):
    #: the DataFrame's Spark schema as JSON (check, begin)
    schema: str
    #: what ``write_begin`` answered (sign, commit, abort)
    begun: dict[str, Any]
    #: the staged objects to pre-sign uploads of (sign): ``[partition, at]`` each
    keys: list[list[Any]]
    #: the staged objects of the task attempts Spark committed (commit, abort):
    #: ``[partition, at, records, bytes, timestamp_ms, append_id, stats]`` each
    #: (stats: the column statistics' JSON, or null)
    refs: list[list[Any]]


Request = PlanRequest | CheckRequest | RelocateRequest | WriteRequest


class _SegmentRequired(TypedDict):
    #: a local path or a pre-signed GET URL: what an executor fetches
    location: str
    key: str
    #: the offsets the segment holds, ``[base, end)``, and those to keep, ``[lo, hi)``
    base: int
    end: int
    lo: int
    hi: int
    #: bytes of the object at ``key``
    size: int


class SegmentWire(_SegmentRequired, total=False):
    #: the append id the index gives the segment (absent: not known)
    append_id: str
    #: ``[start, end]``: ``key`` is the compacted object of those offsets
    compacted: list[int]
    #: present (true) when the compacted object may leave the records out
    droppable: bool


class TaskWire(TypedDict):
    topic: str
    partition: int
    bytes: int
    rows: int
    segments: list[SegmentWire]


class _PlanAnswerRequired(TypedDict):
    version: int
    tasks: list[TaskWire]
    #: the names of the read schema's columns, in order
    columns: list[str]
    #: each planned topic's Arrow schema, an IPC schema message in base64
    schemas: dict[str, str]
    #: the metadata columns' names by role (see :data:`arrowlog.read.scan.METADATA_COLUMNS`)
    metadata_columns: dict[str, str]


class PlanAnswer(_PlanAnswerRequired, total=False):
    #: milliseconds the planner spent on the request
    plan_ms: float


class CheckAnswer(TypedDict):
    version: int
    #: why the JVM reader cannot read the topic (a column type), or null
    unreadable: str | None
    #: as in a plan answer; null when the planner could not open the read
    metadata_columns: dict[str, str] | None


class RelocatedSegment(TypedDict):
    location: str
    key: str
    size: int
    compacted: list[int]


class RelocateAnswer(TypedDict):
    version: int
    #: the compacted object holding the segment's records, or null
    segment: RelocatedSegment | None


class ErrorBody(TypedDict):
    #: the Python error's class name (``InvalidConfigError``)
    type: str
    message: str


class ErrorAnswer(TypedDict):
    version: int
    error: ErrorBody


#: a write request's answer: ``version`` and what :mod:`arrowlog.spark.jvm_writing` says
WriteAnswer = dict[str, Any]

Answer = PlanAnswer | CheckAnswer | RelocateAnswer | ErrorAnswer | WriteAnswer


def read_request(line: str) -> Request:
    """One request line, its version and kind checked.

    Raises:
        UnsupportedVersionError: another version than :data:`VERSION` (or none),
            or a kind this version does not have.
        ValueError: not JSON.
    """
    message = json.loads(line)
    version = message.get("version") if isinstance(message, dict) else None
    if version != VERSION:
        sent = "none (a reader from before versions)" if version is None else repr(version)
        raise UnsupportedVersionError(
            f"a plan request of wire version {sent}; this planner speaks version {VERSION}: "
            "the JVM reader's jar and the arrowlog package come from different builds "
            "(rebuild the jar: make setup)"
        )
    kind = message.get("kind")
    if kind not in KINDS:
        raise UnsupportedVersionError(
            f"plan wire version {VERSION} has no request kind {kind!r} (it has {', '.join(KINDS)})"
        )
    return cast(Request, message)


def options_of(request: Mapping[str, Any]) -> dict[str, str]:
    """A request's read options, as strings."""
    return {str(k): str(v) for k, v in request["options"].items()}


def plan_answer(
    tasks: list[TaskWire],
    *,
    columns: Sequence[str],
    schemas: Mapping[str, str],
    metadata_columns: Mapping[str, str],
) -> PlanAnswer:
    return {
        "version": VERSION,
        "tasks": tasks,
        "columns": list(columns),
        "schemas": dict(schemas),
        "metadata_columns": dict(metadata_columns),
    }


def check_answer(unreadable: str | None, metadata_columns: Mapping[str, str] | None) -> CheckAnswer:
    names = None if metadata_columns is None else dict(metadata_columns)
    return {"version": VERSION, "unreadable": unreadable, "metadata_columns": names}


def relocate_answer(segment: RelocatedSegment | None) -> RelocateAnswer:
    return {"version": VERSION, "segment": segment}


def error_answer(error: BaseException) -> ErrorAnswer:
    """The answer to a request that failed: the error's class name and message
    (the JVM raises it as the Python source's planning error)."""
    return {"version": VERSION, "error": {"type": type(error).__name__, "message": f"{error}"}}


def encode(answer: Answer) -> str:
    """One answer as its line (without the newline)."""
    return json.dumps(answer, separators=(",", ":"))


def task_wire(task: ScanTask, location: Callable[[str], str]) -> TaskWire:
    """A planned task as the JVM reads it; ``location`` turns a key into what
    an executor fetches."""
    segments: list[SegmentWire] = []
    for s in task.segments:
        segment: SegmentWire = {
            "location": location(s.key),
            "key": s.key,
            "base": s.base,
            "end": s.end,
            "lo": s.lo,
            "hi": s.hi,
            "size": s.size,
        }
        if s.append_id is not None:
            segment["append_id"] = s.append_id
        if s.compacted is not None:
            segment["compacted"] = list(s.compacted)
        if s.droppable:
            segment["droppable"] = True
        segments.append(segment)
    return {
        "topic": task.topic,
        "partition": task.partition,
        "bytes": task.bytes,
        "rows": task.rows,
        "segments": segments,
    }


def encode_schema(message: bytes) -> str:
    """A topic's Arrow IPC schema message as a plan answer carries it."""
    return base64.b64encode(message).decode()


def spark_filter(spec: Mapping[str, Any]) -> Any:
    """A filter of a plan request as the pyspark object the Python source takes
    (None for an op it does not take)."""
    from pyspark.sql import datasource as ds

    op = spec.get("op", "")
    if op not in FILTER_OPS:
        return None
    kind = getattr(ds, op)
    attribute = tuple(spec["attribute"])
    if op in ("IsNull", "IsNotNull"):
        return kind(attribute)
    if op == "In":
        return kind(attribute, tuple(filter_value(v) for v in spec["value"]))
    return kind(attribute, filter_value(spec["value"]))


def filter_value(typed: Mapping[str, Any]) -> Any:
    """A filter's typed value as Python holds it: ``date`` and ``timestamp_us``
    are days and microseconds since the epoch (UTC), ``decimal`` a plain
    string, ``binary`` base64."""
    kind, v = typed["type"], typed["value"]
    if kind == "date":
        return datetime.date.fromordinal(datetime.date(1970, 1, 1).toordinal() + int(v))
    if kind == "timestamp_us":
        try:
            return datetime.datetime(1970, 1, 1) + datetime.timedelta(microseconds=int(v))
        except OverflowError:  # beyond Python's years 1-9999: the source takes micros too
            return int(v)
    if kind == "decimal":
        return decimal.Decimal(v)
    if kind == "binary":
        return base64.b64decode(v)
    return v
