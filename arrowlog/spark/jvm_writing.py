"""The JVM writer's Python half: what the JVM driver asks its planner process
(:mod:`arrowlog.spark.jvm_planner`) around a batch write.

Executors turn Spark's rows into Arrow vectors with Spark's own converter,
encode them as staged data objects (``io.arrowlog.spark.format.SegmentWriter``)
and upload them; they need no Python and, for the stores they upload to, no
credentials of the log. The driver asks here, once per job:

- ``write_check``: whether the JVM can write this DataFrame to this topic (its
  columns are the topic's, in order and of the very types Spark converts to; a
  key Spark's rows give as ``send_keyed`` hashes it; a store the executors
  upload to), or why not: the Python source then writes it, as before;
- ``write_begin``: the job's transaction, begun as the Python sink begins it
  (:class:`~arrowlog.spark.sink.ArrowLogWriter`: ``txnAppId``/``txnVersion``,
  fencing an earlier attempt), a producer id for the commit, and what the
  executors need to encode and upload;
- ``write_commit``: the staged objects of the task attempts Spark committed,
  committed by the driver in each partition (commit objects naming them, as
  batches of the job's transaction), then the transaction;
- ``write_abort``: the transaction aborted, and the objects Spark reported
  removed.

The commit protocol stays implemented once, here and in
:meth:`~arrowlog.partition.PartitionLog.commit_refs`; attempts that failed or
ran speculatively upload objects no commit names (``arrowlog vacuum`` reports
them as orphans).
"""

from __future__ import annotations

import base64
import json
from collections.abc import Mapping, Sequence
from typing import Any

import pyarrow as pa

import arrowlog
from arrowlog.config import Compression
from arrowlog.errors import InvalidConfigError, UnknownTopicOrPartitionError
from arrowlog.format.segment import Ref, WriterIdentity
from arrowlog.format.topic import parse_staged_name, partition_dir, staged_at
from arrowlog.partition.sequences import MAX_REFS
from arrowlog.spark.options import WriteOptions
from arrowlog.spark.writing import segment_budget
from arrowlog.storage import Store
from arrowlog.storage.local import LocalStore
from arrowlog.txn.coordinator import CoordinatorLog, TxnState
from arrowlog.txn.distributed import join_partitions
from arrowlog.txn.finish import finish
from arrowlog.txn.producer_ids import allocate_producer_id

#: the codecs the JVM encodes with, by the topic's compression
_CODECS = {Compression.NONE: "none", Compression.ZSTD: "zstd"}


def write_options(request: Mapping[str, Any]) -> WriteOptions:
    options = {str(k): str(v) for k, v in request["options"].items()}
    return WriteOptions.parse(options)


def check(request: Mapping[str, Any]) -> dict[str, Any]:
    """``{"jvm": true}`` if the JVM can write the DataFrame of ``request``
    (its Spark schema as JSON in ``schema``) with its options, else
    ``{"jvm": false, "why": ...}``. Reads only. Options the Python sink
    refuses are left to it: its error is the one the user sees."""
    try:
        options = write_options(request)
    except InvalidConfigError as e:
        return {"jvm": False, "why": str(e)}
    if options.writer == "python":
        return {"jvm": False, "why": "option writer=python"}
    try:
        log = arrowlog.connect(options.root, options.storage)
        try:
            why = unwritable(log, options, request["schema"])
        finally:
            log.close()
    except arrowlog.ArrowLogError as e:
        return {"jvm": False, "why": str(e)}
    return {"jvm": why is None, "why": why}


def unwritable(log: arrowlog.ArrowLog, options: WriteOptions, spark_schema: str) -> str | None:
    """Why the JVM cannot write a DataFrame of ``spark_schema`` (Spark's JSON)
    to the topic of ``options``, or None."""
    if upload_kind(log.store) is None:
        return (
            f"executors cannot upload to {log.store.url} without its credentials "
            "(the JVM writer takes a local directory, or a store that pre-signs uploads)"
        )
    topic = log.topic(options.topic)
    if topic.config.compression not in _CODECS:
        return f"the JVM writer does not encode {topic.config.compression.value}"
    try:
        arrow = arrow_of(spark_schema)
    except (TypeError, ValueError) as e:  # a Spark type without an Arrow one
        return f"a column Spark does not convert to Arrow: {e}"
    width = len(topic.schema)
    if arrow.names[:width] != topic.schema.names:
        return f"columns {arrow.names} do not start with the topic's {topic.schema.names}, in order"
    extras = _extras(arrow, topic.schema)
    if extras is None:
        return f"columns {arrow.names[width:]} after the topic's are not those of a read of it"
    for ours, theirs in zip(arrow, topic.schema, strict=False):
        if not _same_type(ours.type, theirs.type):
            return f"column {ours.name!r} is {ours.type}, the topic's is {theirs.type}"
    nested = [f.name for f in topic.schema if _not_null_inside(f.type)]
    if nested:
        return f"columns {nested} have not-null fields inside (the Python sink checks those)"
    key = options.key_column
    if key is not None:
        if key not in arrow.names:
            return f"keyColumn {key!r} is not a column"
        kind = arrow.field(key).type
        if not (pa.types.is_string(kind) or pa.types.is_integer(kind) or pa.types.is_boolean(kind)):
            return f"keyColumn {key!r} of type {kind}: only strings, integers and booleans"
    return None


def arrow_of(spark_schema: str) -> pa.Schema:
    """The Arrow schema Spark's rows of ``spark_schema`` (its JSON) convert to.

    Raises:
        TypeError, ValueError: a column of a type Arrow has none for.
    """
    from pyspark.sql.pandas.types import to_arrow_schema
    from pyspark.sql.types import StructType

    return to_arrow_schema(StructType.fromJson(_json(spark_schema)), timezone="UTC")


def _extras(arrow: pa.Schema, schema: pa.Schema) -> dict[str, str] | None:
    """The columns of ``arrow`` after the topic's (``schema``'s), by their
    role: the metadata columns of a read from arrowlog (``topic``,
    ``partition``, ``offset``, ``timestamp``, under the names such a read
    gives them), which the Python sink drops too; None for any other column."""
    from arrowlog.read.scan import metadata_names
    from arrowlog.spark.conform import METADATA_TYPES

    roles = {name: role for role, name in metadata_names(schema).items()}
    found = {}
    for field in list(arrow)[len(schema) :]:
        role = roles.get(field.name)
        if role is None or role in found or not METADATA_TYPES[role](field.type):
            return None
        found[role] = field.name
    return found


def partition_column(arrow: pa.Schema, options: WriteOptions, schema: pa.Schema) -> str | None:
    """The column that routes rows, where no ``keyColumn`` does: a read's
    ``partition`` column, as the Python sink routes by it."""
    if options.key_column is not None:
        return None
    return (_extras(arrow, schema) or {}).get("partition")


def _same_type(spark: pa.DataType, topic: pa.DataType) -> bool:
    """Whether Spark's rows of Arrow type ``spark`` fill vectors of ``topic``'s
    as they are: the same type, but for a timestamp's zone (Spark's values
    are UTC instants; a zone names how to show them)."""
    if pa.types.is_timestamp(spark) and pa.types.is_timestamp(topic):
        return spark.unit == topic.unit and (spark.tz is None) == (topic.tz is None)
    return bool(spark.equals(topic))


def _not_null_inside(kind: pa.DataType) -> bool:
    """Whether a nested type has a not-null field anywhere inside it (a map's
    keys and entries are never null, in Spark as in Arrow: not those)."""
    if isinstance(kind, pa.MapType):
        item = kind.item_field
        return _not_null_inside(kind.key_type) or not item.nullable or _not_null_inside(item.type)
    children = [kind.field(i) for i in range(kind.num_fields)]
    return any(not c.nullable or _not_null_inside(c.type) for c in children)


def _json(schema: str) -> dict[str, Any]:
    parsed = json.loads(schema)
    if not isinstance(parsed, dict):
        raise ValueError("not a Spark schema")
    return parsed


def begin(request: Mapping[str, Any]) -> dict[str, Any]:
    """Begin the job's transaction (or see that its version is committed:
    ``skip``) and say how executors encode and where they upload.

    Raises:
        InvalidConfigError: the JVM cannot write it any more (the topic changed
            since the check); nothing was written.
        and what :class:`~arrowlog.spark.sink.ArrowLogWriter` raises.
    """
    from pyspark.sql.types import StructType

    from arrowlog.spark.sink import ArrowLogWriter

    options = write_options(request)
    log = arrowlog.connect(options.root, options.storage)
    try:
        why = unwritable(log, options, request["schema"])
        if why is not None:
            raise InvalidConfigError(f"the JVM writer cannot write this DataFrame: {why}")
        topic = log.topic(options.topic)
        writer = ArrowLogWriter(options, StructType.fromJson(_json(request["schema"])))
        producer_id = -1
        if not writer.skip:
            producer_id = allocate_producer_id(log, writer.transactional_id)
        answer = {
            "skip": writer.skip,
            "transactional_id": writer.transactional_id,
            "epoch": writer.epoch,
            "producer_id": producer_id,
            "partitions": topic.partitions,
            "incarnation": topic.incarnation,
            "schema": base64.b64encode(topic.schema.serialize().to_pybytes()).decode(),
            "codec": _CODECS[topic.config.compression],
            "budget": segment_budget(topic),
            "max_bytes": topic.config.max_batch_bytes,
            "rows_per_batch": options.rows_per_batch,
            "key": options.key_column,
            "partition_column": partition_column(
                arrow_of(request["schema"]), options, topic.schema
            ),
            "nullable": [f.nullable for f in topic.schema],
            "upload": upload_kind(log.store),
        }
        store = log.store
        if isinstance(store, LocalStore):
            answer["directories"] = [
                str(store.root / partition_dir(topic.prefix, p)) for p in range(topic.partitions)
            ]
            answer["temporary"] = str(store.temporary_directory())
            answer["fsync"] = store.fsync
        return answer
    finally:
        log.close()


def upload_kind(store: Store) -> str | None:
    """How executors upload to ``store`` with no credentials: ``local`` (a
    directory they write), ``presigned`` (a URL the driver signs for each
    object), or None: they cannot."""
    if isinstance(store, LocalStore):
        return "local"
    if callable(getattr(store, "presigned_put", None)):
        return "presigned"
    return None


#: a pre-signed upload URL lasts this long: an executor asks for one right
#: before it uploads
UPLOAD_EXPIRY_S = 3600


def sign(request: Mapping[str, Any]) -> dict[str, Any]:
    """Pre-signed PUT URLs for the staged objects ``keys`` (``[partition,
    at]`` each) of the job ``begun``. Only a staged object of a transaction,
    under a partition of the topic, is signed: the URL can write nothing
    else.

    Raises:
        InvalidConfigError: a key that is no such object.
    """
    options = write_options(request)
    log = arrowlog.connect(options.root, options.storage)
    try:
        topic = log.topic(options.topic)
        presign = getattr(log.store, "presigned_put", None)
        if presign is None:
            raise InvalidConfigError(f"{log.store.url} does not pre-sign uploads")
        urls = []
        for p, at in request["keys"]:
            name = parse_staged_name(str(at))
            good = name is not None and name.transactional and name.producer_id < 0
            if not (good and name and staged_at(name) == at and 0 <= int(p) < topic.partitions):
                raise InvalidConfigError(f"not a staged object of this job: {p}/{at}")
            urls.append(presign(partition_dir(topic.prefix, int(p)) + str(at), UPLOAD_EXPIRY_S))
        return {"urls": urls}
    finally:
        log.close()


def commit(request: Mapping[str, Any]) -> dict[str, Any]:
    """Commit the staged objects ``refs`` (``[partition, at, records, bytes,
    timestamp_ms, append_id, stats]`` each, stats as JSON or null, in the
    order each task wrote them, the tasks in Spark's order) in the
    transaction ``begun`` (what :func:`begin` answered), then the
    transaction. Returns the records committed by partition."""
    from arrowlog.spark.sink import JobTransaction

    options = write_options(request)
    begun = request["begun"]
    if begun["skip"]:
        return {"committed": {}}
    txn_id, epoch, pid = begun["transactional_id"], begun["epoch"], begun["producer_id"]
    by_partition = _by_partition(request["refs"])
    log = arrowlog.connect(options.root, options.storage)
    try:
        committed = {
            str(p): sum(int(row[2]) for row in rows) for p, rows in sorted(by_partition.items())
        }
        if _committed_before(log, txn_id, epoch):
            return {"committed": committed}
        if log.topic(options.topic).incarnation != begun["incarnation"]:
            # its objects are under the deleted incarnation's prefix: a commit
            # in the new topic would name objects that are not there
            raise UnknownTopicOrPartitionError(
                f"topic {options.topic!r} was deleted (and created again) during the write: "
                "nothing of it is committed"
            )
        if by_partition:
            targets = [(options.topic, p) for p in sorted(by_partition)]
            join_partitions(log, txn_id, epoch, targets)
        for p, rows in sorted(by_partition.items()):
            partition = log.partition(options.topic, p)
            refs = _not_named(partition, _refs(rows, pid, epoch, txn_id))
            for start in range(0, len(refs), MAX_REFS):
                partition.commit_refs(refs[start : start + MAX_REFS])
    finally:
        log.close()
    JobTransaction(options, txn_id, epoch).commit([pid] if by_partition else [])
    return {"committed": committed}


def _committed_before(log: arrowlog.ArrowLog, txn_id: str, epoch: int) -> bool:
    """Whether this very commit ran before, up to its decision (the JVM sends
    a request again to a new planner when the one it asked died before it
    answered): then it is carried to its end, and nothing is written twice."""
    coordinator = CoordinatorLog(log.store, txn_id, log.config.retry)
    latest = coordinator.latest()
    if latest is None or latest.txn_epoch != epoch:
        return False
    if latest.state is TxnState.PREPARE_COMMIT:
        finish(log, coordinator, latest, reason="commit")
    return latest.state in (TxnState.PREPARE_COMMIT, TxnState.COMPLETE_COMMIT)


def _not_named(partition: arrowlog.PartitionLog, refs: list[Ref]) -> list[Ref]:
    """``refs`` but those an earlier sending of this commit named already:
    the commit's producer id is the job's own, and its sequences follow the
    refs' order, which a request sent again keeps."""
    if not refs:
        return refs
    who = refs[0].identity
    latest = partition.state()[1].producers.get(who.producer_id)
    if latest is None or latest.producer_epoch != who.producer_epoch:
        return refs
    return [r for r in refs if r.identity.base_sequence > latest.last_sequence]


def abort(request: Mapping[str, Any]) -> dict[str, Any]:
    """Abort the transaction ``begun`` and remove those of the staged objects
    ``refs`` that no commit object names (a commit that failed part way named
    some: they stay, as the aborted batches of the log). Best effort: a task
    still running may upload more, which vacuum reports as orphans."""
    from arrowlog.spark.sink import JobTransaction

    options = write_options(request)
    begun = request["begun"]
    if begun["skip"]:
        return {"removed": 0}
    JobTransaction(options, begun["transactional_id"], begun["epoch"]).abort()
    removed = 0
    log = arrowlog.connect(options.root, options.storage)
    try:
        topic = log.topic(options.topic)
        for p, rows in sorted(_by_partition(request["refs"]).items()):
            named = {s.at for s in log.partition(options.topic, p).summaries() if s.at}
            for _, at, *_ in rows:
                if str(at) in named:
                    continue
                try:
                    log.store.delete(partition_dir(topic.prefix, p) + str(at))
                    removed += 1
                except (FileNotFoundError, arrowlog.ArrowLogError):
                    pass
    finally:
        log.close()
    return {"removed": removed}


def _by_partition(rows: Sequence[Sequence[Any]]) -> dict[int, list[Sequence[Any]]]:
    out: dict[int, list[Sequence[Any]]] = {}
    for row in rows:
        out.setdefault(int(row[0]), []).append(row)
    return out


def _refs(rows: Sequence[Sequence[Any]], pid: int, epoch: int, txn_id: str) -> list[Ref]:
    """The refs of one partition's staged objects, in sequence from 0 (the
    commit's producer id is new to the job: its sequences start anew in each
    partition)."""
    refs = []
    sequence = 0
    for _, at, records, size, timestamp_ms, append_id, *rest in rows:
        stats = json.loads(rest[0]) if rest and rest[0] is not None else None
        who = WriterIdentity(
            producer_id=pid, producer_epoch=epoch, base_sequence=sequence,
            transactional=True, transactional_id=txn_id,
        )  # fmt: skip
        ref = Ref(
            at=str(at), record_count=int(records), size=int(size),
            timestamp_ms=int(timestamp_ms), append_id=str(append_id), identity=who, stats=stats,
        )  # fmt: skip
        refs.append(ref)
        sequence += int(records)
    return refs


__all__ = ["abort", "begin", "check", "commit", "sign", "unwritable", "upload_kind"]
