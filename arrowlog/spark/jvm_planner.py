"""The planner of the JVM reader: ``python -m arrowlog.spark.jvm_planner``.

The JVM driver runs it with the read's options, the columns Spark needs and the
filters it offers as JSON on stdin, and takes the tasks from stdout: each
segment's location (a local path, or a pre-signed GET URL), its offsets and the
rows to keep. The rules are the Python source's own: this module only feeds
them Spark's filters and writes their tasks; the lines' format is
:mod:`arrowlog.spark.plan_wire`'s.
"""

from __future__ import annotations

import json
import sys
import time
from collections import OrderedDict
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

import pyarrow as pa

import arrowlog
from arrowlog.errors import ArrowLogError, InvalidConfigError
from arrowlog.format.topic import Topic
from arrowlog.log.client import ArrowLog
from arrowlog.log.topics import TopicVersions
from arrowlog.read.scan import metadata_names
from arrowlog.spark import plan_wire
from arrowlog.spark.plan_wire import CheckAnswer, PlanAnswer, RelocateAnswer
from arrowlog.storage import Store

if TYPE_CHECKING:
    from arrowlog.spark.options import ReadOptions

#: pre-signed URLs outlive the longest job they are planned for
URL_EXPIRY_S = 7 * 24 * 3600


class Clients:
    """The connections of one planner process, kept between the plans of its
    driver: a plan then lists each partition from the segment it last knew (one
    LIST), where a new connection reads every partition's checkpoint and the
    header of each segment after it.

    A kept connection plans only topics it knows as they are: before each plan,
    each topic's latest version is read anew, from its first (as a new
    connection reads it), and one whose version or change differs from the
    connection's (altered, deleted, created again, or a root emptied and filled
    anew) gets a new connection. Partitions list their segments at every plan,
    so a read without end offsets ends where the log ends now. Connections are
    keyed by root and storage options (credentials included: none is shared
    with other options), at most ``size`` of them.
    """

    def __init__(self, size: int = 8) -> None:
        self._size = size
        self._kept: OrderedDict[str, ArrowLog] = OrderedDict()

    def log(self, options: ReadOptions) -> tuple[ArrowLog, bool]:
        """A connection to the root of ``options``, current for its topics, and
        whether it was kept from an earlier plan (False: new)."""
        key = _key(options)
        log = self._kept.pop(key, None)
        if log is not None and not _knows_current(log, options):
            log.close()
            log = None
        kept = log is not None
        if log is None:
            log = arrowlog.connect(options.root, options.storage)
        self._kept[key] = log
        while len(self._kept) > self._size:
            self._kept.popitem(last=False)[1].close()
        return log, kept

    def forget(self, options: ReadOptions) -> None:
        """Close the connection kept for the root of ``options``, if any."""
        log = self._kept.pop(_key(options), None)
        if log is not None:
            log.close()

    def close(self) -> None:
        while self._kept:
            self._kept.popitem()[1].close()


def _key(options: ReadOptions) -> str:
    return json.dumps([options.root, options.storage], sort_keys=True, default=repr)


def _knows_current(log: ArrowLog, options: ReadOptions) -> bool:
    """Whether ``log`` knows the latest version of every topic ``options`` read."""
    from arrowlog.spark.planning import subscribed_topics

    versions = TopicVersions(log.store, log.config.retry)
    try:
        for name in subscribed_topics(log, options):
            latest = versions.latest(name)
            if not isinstance(latest, Topic):
                return False  # gone: a new connection says so as the Python source does
            known = log.topic(name)
            if (known.version, known.change_id) != (latest.version, latest.change_id):
                return False
    except ArrowLogError:
        return False
    return True


def plan(request: Mapping[str, Any], clients: Clients | None = None) -> PlanAnswer:
    """The tasks of a batch read, as the JVM reader takes them.

    ``request``: a plan request (:class:`~arrowlog.spark.plan_wire.PlanRequest`:
    the read's options, the topic columns Spark needs, Spark's filters), its
    version already checked; ``clients``: the
    connections kept between plans (None: a new one). Raises what the Python
    source would raise for the same read: a kept connection whose view of the
    log fails (the root restored from an older copy under it, say) is dropped,
    and the read planned again by a new one.
    """
    from arrowlog.spark.options import ReadOptions

    read = ReadOptions.parse(plan_wire.options_of(request), streaming=None)
    if clients is None:
        log = arrowlog.connect(read.root, read.storage)
        try:
            return _plan(request, read, log)
        finally:
            log.close()
    log, kept = clients.log(read)
    try:
        return _plan(request, read, log)
    except ArrowLogError:
        if not kept:
            raise
        clients.forget(read)
        return _plan(request, read, clients.log(read)[0])


def _plan(request: Mapping[str, Any], read: ReadOptions, log: ArrowLog) -> PlanAnswer:
    from arrowlog.spark.options import ReadOptions
    from arrowlog.spark.reader import ArrowLogFilteringReader, ScanPartition
    from arrowlog.spark.schema import read_schema

    options = plan_wire.options_of(request)
    # the schema Spark read (its metadata columns named as they are there: a
    # filter on `_offset` where the topic has a column `offset`)
    schema = read_schema(log, read)
    columns = request.get("columns")
    if columns:  # what Spark needs, as the columns option says it
        options["columns"] = ",".join(columns)
    reader = ArrowLogFilteringReader(ReadOptions.parse(options), schema)
    filters = [plan_wire.spark_filter(f) for f in request.get("filters", [])]
    list(reader.pushFilters([f for f in filters if f is not None]))
    parts = reader.partitions_of(log)
    chosen = [p.task for p in parts if isinstance(p, ScanPartition) and p.task]
    tasks = [plan_wire.task_wire(task, lambda key: location(log.store, key)) for task in chosen]
    # each topic's schema: the JVM refuses a segment holding other columns
    schemas = {
        t.topic: plan_wire.encode_schema(t.schema.serialize().to_pybytes())
        for t in chosen
        if t.schema is not None
    }
    return plan_wire.plan_answer(
        tasks,
        columns=[f.name for f in schema.fields],
        schemas=schemas,
        metadata_columns=_metadata_columns(log, read),
    )


def _metadata_columns(log: ArrowLog, read: ReadOptions) -> dict[str, str]:
    """The names of the read's metadata columns by role, as the schema Spark
    reads has them (prefixed where a topic column of the columns read clashes)."""
    from arrowlog.partition import projected
    from arrowlog.spark.planning import subscribed_topics

    first = log.topic(subscribed_topics(log, read)[0])
    return metadata_names(projected(first.schema, read.columns))


def check(request: Mapping[str, Any], clients: Clients | None = None) -> CheckAnswer:
    """Whether the JVM reader can read the topic of a read (``options``), and
    the names of its metadata columns: ``unreadable`` is the reason for a
    column type it does not hand to Spark as Spark's Python reader does (the
    read then goes to the Python reader), else None. A read the options make
    impossible is left to the plan, whose error is the Python source's: both
    fields are then None."""
    from arrowlog.spark.options import ReadOptions
    from arrowlog.spark.planning import subscribed_topics

    owned = None
    try:
        options = ReadOptions.parse(plan_wire.options_of(request))
        if clients is None:
            log = owned = arrowlog.connect(options.root, options.storage)
        else:
            log = clients.log(options)[0]
        topics = subscribed_topics(log, options)
        reasons = [r for t in topics if (r := unreadable(log.topic(t).schema)) is not None]
        try:
            names: dict[str, str] | None = _metadata_columns(log, options)
        except ArrowLogError:  # columns the topic lacks: the plan says so
            names = None
    except ArrowLogError:
        return plan_wire.check_answer(None, None)
    finally:
        if owned is not None:
            owned.close()
    return plan_wire.check_answer(reasons[0] if reasons else None, names)


def relocate(request: Mapping[str, Any]) -> RelocateAnswer:
    """Where an executor now finds a planned segment removed since the plan
    (``relocate``: its ``key``, ``base``, ``end``; ``options``: the read's):
    ``{"segment": {...}}``, the compacted object holding its records, as a task
    segment (as the Python reader's ``read_task`` falls back), or ``{"segment":
    null}`` when no compacted object holds it."""
    from arrowlog.format.topic import (
        compacted_prefix_of,
        compacted_start_after,
        parse_compacted_key,
    )
    from arrowlog.spark.options import ReadOptions
    from arrowlog.storage.url import open_store

    read = ReadOptions.parse(plan_wire.options_of(request))
    wanted = request["relocate"]
    key, base, end = str(wanted["key"]), int(wanted["base"]), int(wanted["end"])
    store = open_store(read.root, read.storage)
    try:
        prefix = compacted_prefix_of(key)
        for info in store.list(prefix, start_after=compacted_start_after(prefix, base)):
            span = parse_compacted_key(info.key)
            if span is None or span[0] > base or span[1] < end:
                break
            found: plan_wire.RelocatedSegment = {
                "location": location(store, info.key),
                "key": info.key,
                "size": info.size,
                "compacted": list(span),
            }
            return plan_wire.relocate_answer(found)
        return plan_wire.relocate_answer(None)
    finally:
        store.close()


def unreadable(schema: pa.Schema) -> str | None:
    """Why the JVM reader cannot read ``schema``'s columns, or None. It hands
    Arrow vectors to Spark as they are stored, converting only top-level
    timestamps of another unit; Spark's Python reader casts everything else."""
    for field in schema:
        if not _jvm_type(field.type, top=True):
            return f"column {field.name!r} of type {field.type}"
    return None


def _jvm_type(t: pa.DataType, *, top: bool) -> bool:
    if pa.types.is_dictionary(t):
        return _jvm_type(t.value_type, top=top)
    if pa.types.is_timestamp(t):
        return top or t.unit == "us"
    if isinstance(t, pa.ListType):  # not large, not fixed-size
        return _jvm_type(t.value_type, top=False)
    if isinstance(t, pa.MapType):
        return _jvm_type(t.key_type, top=False) and _jvm_type(t.item_type, top=False)
    if isinstance(t, pa.StructType):
        return all(_jvm_type(t.field(i).type, top=False) for i in range(t.num_fields))
    simple = (
        pa.types.is_boolean,
        pa.types.is_signed_integer,
        pa.types.is_float32,
        pa.types.is_float64,
        pa.types.is_decimal128,
        pa.types.is_string,
        pa.types.is_large_string,
        pa.types.is_string_view,
        pa.types.is_binary,
        pa.types.is_large_binary,
        pa.types.is_binary_view,
        pa.types.is_date32,
        pa.types.is_null,
    )
    return any(test(t) for test in simple)


def location(store: Store, key: str) -> str:
    """Where an executor fetches ``key`` with nothing but the location: a local
    file's path, or a pre-signed GET URL.

    Raises:
        InvalidConfigError: the store has neither (``memory://``: in one process only).
    """
    from arrowlog.storage.local import LocalStore

    if isinstance(store, LocalStore):
        return str(store.root / key)
    presign = getattr(store, "presigned_get", None)
    if presign is None:
        raise InvalidConfigError(
            f"the JVM reader cannot read {store.url}: its objects have no URL an executor "
            "could fetch; read it with the Python source (option reader=python)"
        )
    url: str = presign(key, URL_EXPIRY_S)
    return url


def write(request: plan_wire.WriteRequest) -> plan_wire.WriteAnswer:
    """A batch write's request, answered by :mod:`arrowlog.spark.jvm_writing`."""
    from arrowlog.spark import jvm_writing

    steps = {
        "write_check": jvm_writing.check,
        "write_begin": jvm_writing.begin,
        "write_sign": jvm_writing.sign,
        "write_commit": jvm_writing.commit,
        "write_abort": jvm_writing.abort,
    }
    return {"version": plan_wire.VERSION, **steps[request["kind"]](request)}


def answer(line: str, clients: Clients | None = None) -> str:
    """One request line to one answer line (:mod:`arrowlog.spark.plan_wire`):
    the plan, the check or the relocation asked for, or an error answer with
    the Python error's class name (``UnsupportedVersionError`` for a request of
    another wire version)."""
    started = time.perf_counter()
    try:
        request = plan_wire.read_request(line)
        if request["kind"] in plan_wire.WRITE_KINDS:
            return plan_wire.encode(write(request))
        if request["kind"] == "check":
            return plan_wire.encode(check(request, clients))
        if request["kind"] == "relocate":
            return plan_wire.encode(relocate(request))
        out = plan(request, clients)
        out["plan_ms"] = round((time.perf_counter() - started) * 1000, 1)
        return plan_wire.encode(out)
    except Exception as e:  # noqa: BLE001 - every failure reaches the JVM as such
        return plan_wire.encode(plan_wire.error_answer(e))


def main() -> int:
    """Serve requests, one JSON line in and one out, until stdin closes: the
    driver starts one planner and keeps it, so a query pays for a plan, not for
    starting Python and importing pyarrow (about half a second)."""
    clients = Clients()
    try:
        for line in sys.stdin:
            if line.strip():
                sys.stdout.write(answer(line, clients) + "\n")
                sys.stdout.flush()
    finally:
        clients.close()
    return 0


if __name__ == "__main__":
    sys.exit(main())
