"""What the batch sink (:mod:`arrowlog.spark.sink`) and the streaming sink
(:mod:`arrowlog.spark.streaming`) share: routing a DataFrame's rows to the
topic's partitions, cutting them into segments that fit the topic's byte
limit, the versions keyed writes committed (``txnAppId`` with ``txnVersion``,
or a micro-batch's id), and the compaction a commit may be followed by."""

from __future__ import annotations

import warnings
from collections.abc import Iterator, Mapping

import pyarrow as pa

import arrowlog
from arrowlog.errors import InvalidConfigError
from arrowlog.format.segment import (
    HEADER_SLACK,
    empty_batch,
    metadata_slack,
    segment_size_floor,
)
from arrowlog.producer import key_partitions
from arrowlog.read.scan import metadata_names
from arrowlog.spark.conform import cast_column, conform
from arrowlog.spark.options import WriteOptions, app_transactional_id
from arrowlog.spark.time_zones import session_time_zone
from arrowlog.txn.coordinator import CoordinatorLog


def compact_after_commit(options: WriteOptions) -> None:
    """With option ``compactAfterCommit``, compact the topic's complete
    checkpoint windows once a write has committed (each job, or each
    micro-batch, adds small segments and a marker per partition). The write
    has committed whatever happens here: a failure is a warning, and the next
    commit (or ``arrowlog compact``) goes on from where this one stopped."""
    if not options.compact_after_commit:
        return
    try:
        arrowlog.connect(options.root, options.storage).maintenance.compact([options.topic])
    except arrowlog.ArrowLogError as e:
        warnings.warn(f"compaction after the commit failed: {e}", RuntimeWarning, stacklevel=2)


# --- committed versions ---------------------------------------------------------------


def keyed_transactional_id(
    log: arrowlog.ArrowLog, topic: str, app_id: str, *, streaming: bool = False
) -> str:
    """The transactional id of keyed Spark writes to ``topic`` as it is now (its
    incarnation: a topic created anew is a new table)."""
    incarnation = log.topic(topic).incarnation
    return app_transactional_id(topic, app_id, incarnation=incarnation, streaming=streaming)


def last_version(log: arrowlog.ArrowLog, transactional_id: str) -> int | None:
    """The ``txnVersion`` in the metadata of the last transaction of
    ``transactional_id`` that reached PREPARE_COMMIT, or None. Reads only."""
    latest = CoordinatorLog(log.store, transactional_id, log.config.retry).latest()
    return version_of(latest.metadata if latest is not None else {})


def version_of(metadata: Mapping[str, str]) -> int | None:
    """The ``txnVersion`` a transaction's metadata records, or None."""
    done = metadata.get("txnVersion")
    return None if done is None else int(done)


def is_done(done: int | None, version: int | None) -> bool:
    """Whether ``version`` is at or below the committed version ``done``."""
    return version is not None and done is not None and done >= version


# --- rows into segments -------------------------------------------------------------


def split_by_partition(
    batch: pa.RecordBatch, topic: arrowlog.Topic, key_column: str | None, default: int
) -> Iterator[tuple[int, pa.RecordBatch]]:
    """:func:`route`, each part conformed to the topic's columns and types."""
    for p, part in route(batch, topic, key_column, default):
        yield p, conform(part, topic)


def route(
    batch: pa.RecordBatch, topic: arrowlog.Topic, key_column: str | None, default: int
) -> Iterator[tuple[int, pa.RecordBatch]]:
    """Route rows to partitions, as they are: by a hash of ``key_column``'s values
    as the topic stores them (CRC32C of their text, as ``Producer.send_keyed``),
    else by a ``partition`` column of integers (when the topic has no column of
    that name: a DataFrame read from arrowlog has one, and an explicit
    ``keyColumn`` wins over it), else all to ``default``.

    Raises:
        InvalidConfigError: ``key_column`` is not a column of the batch.
        SchemaMismatchError: the key does not fit the topic's type, or is
            outside Python's range for it (a timestamp past the year 9999:
            ``send_keyed`` cannot route it either), or the ``partition``
            column holds anything but integers, or nulls.
        UnknownTopicOrPartitionError: a partition outside the topic's.
    """
    if key_column is not None:
        targets: list[int] | None = _by_key(batch, topic, key_column)
    else:
        targets = _by_partition_column(batch, topic)
    if targets is None:
        yield default, batch
        return
    rows: dict[int, list[int]] = {}
    for i, p in enumerate(targets):
        rows.setdefault(p, []).append(i)
    for p, indices in sorted(rows.items()):
        if not 0 <= p < topic.partitions:
            raise arrowlog.UnknownTopicOrPartitionError(
                f"column partition has value {p}, outside 0..{topic.partitions - 1} "
                f"of topic {topic.name!r}: {PARTITION_HINT}"
            )
        yield p, batch.take(pa.array(indices, pa.int64()))


#: what to do about a partition column from a topic of more partitions (the JVM
#: writer says the same: StagedDataWriter.PARTITION_HINT)
PARTITION_HINT = (
    "a DataFrame read from a topic of more partitions keeps their numbers; drop the column "
    'to spread the rows (df.drop("partition")), or route them by key (option keyColumn)'
)


def _by_key(batch: pa.RecordBatch, topic: arrowlog.Topic, key_column: str) -> list[int]:
    """Each row's partition by a hash of its key, as ``send_keyed`` routes it."""
    if key_column not in batch.schema.names:
        raise InvalidConfigError(f"keyColumn {key_column!r} is not a column of the DataFrame")
    keys = batch.column(key_column)
    if key_column in topic.schema.names:
        # the stored value decides, not the DataFrame's type for it (a double
        # 1.0 into an int64 column is the key 1; a timestamp is the instant,
        # whatever Spark's session time zone)
        zone = session_time_zone(batch.schema.types)
        keys = cast_column(keys, topic.schema.field(key_column), topic, zone=zone)
    try:
        # the text of each value as Python has it, as send_keyed hashes it
        return key_partitions(keys.to_pylist(), topic.partitions)
    except (OverflowError, ValueError) as e:
        raise arrowlog.SchemaMismatchError(
            f"keyColumn {key_column!r} has a value outside Python's range for its type "
            f"({keys.type}), which Producer.send_keyed cannot route either: {e}"
        ) from e


def _by_partition_column(batch: pa.RecordBatch, topic: arrowlog.Topic) -> list[int] | None:
    """Each row's partition as a ``partition`` column gives it, or None
    without one."""
    # ``partition``, or ``_partition`` beside a topic column ``partition``, as a
    # read from arrowlog names it
    name = metadata_names(topic.schema)["partition"]
    if name not in batch.schema.names:
        return None
    column = batch.column(name)
    if not pa.types.is_integer(column.type):
        raise arrowlog.SchemaMismatchError(
            f"column {name} must hold the partition of each row as an integer, not {column.type}"
        )
    if column.null_count:
        raise arrowlog.SchemaMismatchError(
            f"column {name} has {column.null_count} null(s): every row needs a partition"
        )
    return [int(p) for p in column.to_pylist() if p is not None]  # none null


def segment_budget(topic: arrowlog.Topic) -> int:
    """The most bytes of rows a Spark write puts in one segment. Segments are
    cut by bytes as well as by ``rowsPerBatch``: rows of some KiB each would
    otherwise make segments over the topic's ``max_batch_bytes``, and the job
    fail with advice ("split it") no Spark user can follow. The rows get half
    of what the frame (schema, header, statistics) leaves of the limit: the
    rest covers padding, and compression that does not shrink them."""
    schema = empty_batch(topic.schema)
    frame = segment_size_floor(schema) + metadata_slack(schema) + HEADER_SLACK
    return max(1, (topic.config.max_batch_bytes - frame) // 2)


def within_bytes(batch: pa.RecordBatch, budget: int) -> Iterator[pa.RecordBatch]:
    """``batch`` in slices of at most ``budget`` bytes (or of one row), in
    order: halved until each fits, so that one large row among small ones
    does not make its slice too large."""
    if batch.nbytes <= budget or batch.num_rows <= 1:
        yield batch
        return
    half = batch.num_rows // 2
    yield from within_bytes(batch.slice(0, half), budget)
    yield from within_bytes(batch.slice(half), budget)


__all__ = [
    "compact_after_commit",
    "is_done",
    "keyed_transactional_id",
    "last_version",
    "route",
    "segment_budget",
    "split_by_partition",
    "version_of",
    "within_bytes",
]
