"""Topics: names, configuration, schema, and where their objects live.

Bucket layout (keys relative to the root prefix)::

    _arrowlog/topics/<topic>.json                          topic config + schema
    <topic>/<partition>/segments/<base offset:020d>.arrow  one segment per batch
    <topic>/<partition>/checkpoints/<inverted start:020d>.json

Offsets are zero-padded so that a LIST returns segments in offset order.
Checkpoint keys hold ``10**20 - 1 - window_start`` so that a LIST returns the
newest checkpoint first, and a LIST starting after a key finds the checkpoint
covering any offset in one request (S3 lists only in ascending order).
"""

from __future__ import annotations

import base64
import re
import time
from collections.abc import Sequence
from dataclasses import InitVar, asdict, dataclass, field
from typing import Any

import pyarrow as pa

from arrowlog import _checked_json
from arrowlog.config import TopicConfig
from arrowlog.errors import (
    CorruptObjectError,
    InvalidConfigError,
    InvalidNameError,
    UnknownTopicOrPartitionError,
)
from arrowlog.segment import check_schema, empty_batch, segment_size_floor

INTERNAL_PREFIX = "_arrowlog"
TOPICS_PREFIX = f"{INTERNAL_PREFIX}/topics/"
_TOPIC_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]{0,248}")
_SEGMENT_NAME = re.compile(r"(\d{20})\.arrow")
_INVERT = 10**20 - 1
MAX_PARTITIONS = 10_000


def check_topic_name(name: str) -> str:
    """Return ``name`` if it is a valid topic name.

    Topic names are 1-249 characters of ``[A-Za-z0-9._-]`` (Kafka's alphabet)
    starting with a letter or digit: a name can never be ``..``, contain a slash,
    or start with ``_`` (reserved for arrowlog's own objects).

    Raises:
        InvalidNameError: the name is not allowed.
    """
    if not isinstance(name, str) or not _TOPIC_NAME.fullmatch(name):
        raise InvalidNameError(
            f"invalid topic name {name!r}: use 1-249 characters of [A-Za-z0-9._-], "
            "starting with a letter or digit"
        )
    return name


@dataclass(frozen=True, kw_only=True)
class Topic:
    """A topic as stored: immutable once created."""

    name: str
    schema: pa.Schema
    partitions: int
    config: TopicConfig = field(default_factory=TopicConfig)
    created_ms: int = field(default_factory=lambda: int(time.time() * 1000))
    #: Apply the rules for a new topic (:meth:`check_new`). False when a stored
    #: topic is loaded: a rule added later must not make an existing topic unreadable.
    new: InitVar[bool] = True

    def __post_init__(self, new: bool) -> None:
        check_topic_name(self.name)
        if not isinstance(self.schema, pa.Schema):
            raise InvalidConfigError("a topic's schema must be a pyarrow.Schema")
        if len(self.schema) == 0:
            raise InvalidConfigError("a topic's schema needs at least one field")
        if isinstance(self.partitions, bool) or not isinstance(self.partitions, int):
            raise InvalidConfigError("partitions must be an int")
        if not 1 <= self.partitions <= MAX_PARTITIONS:
            raise InvalidConfigError(f"partitions must be between 1 and {MAX_PARTITIONS}")
        if not isinstance(self.config, TopicConfig):
            raise InvalidConfigError("config must be a TopicConfig")
        if new:
            self.check_new()

    def check_new(self) -> None:
        """Refuse a schema or config under which appends would fail or misbehave,
        before anything is written.

        Raises:
            InvalidConfigError: two fields of one name (at any depth); a reserved
                metadata key or arrowlog's checksum tag in the schema; a schema
                Arrow IPC cannot write; ``max_batch_bytes`` below the smallest
                segment of the schema.
        """
        _check_unique_names(list(self.schema), "")
        check_schema(self.schema)
        try:
            smallest = segment_size_floor(empty_batch(self.schema))
        except pa.ArrowException as e:
            raise InvalidConfigError(f"the schema cannot be written as Arrow IPC: {e}") from e
        if self.config.max_batch_bytes < smallest:
            raise InvalidConfigError(
                f"max_batch_bytes {self.config.max_batch_bytes} is below {smallest}, the size "
                "of the smallest segment of this schema: no batch would fit"
            )

    def check_partition(self, partition: int) -> int:
        """Raises:
        UnknownTopicOrPartitionError: the topic has no such partition."""
        if isinstance(partition, bool) or not isinstance(partition, int):
            raise UnknownTopicOrPartitionError(f"partition must be an int, got {partition!r}")
        if not 0 <= partition < self.partitions:
            raise UnknownTopicOrPartitionError(
                f"topic {self.name!r} has partitions 0..{self.partitions - 1}, not {partition}"
            )
        return partition

    def to_json(self) -> bytes:
        return _checked_json.dump(
            {
                "v": 1,
                "name": self.name,
                "partitions": self.partitions,
                "config": asdict(self.config),
                "created_ms": self.created_ms,
                "schema": base64.b64encode(self.schema.serialize().to_pybytes()).decode(),
            }
        )

    @classmethod
    def from_json(cls, raw: bytes | memoryview, *, key: str) -> Topic:
        """Raises:
        CorruptObjectError: the stored topic fails its checksum or is unreadable."""
        fields = _checked_json.load(raw, key=key, error=CorruptObjectError)
        try:
            schema = pa.ipc.read_schema(pa.py_buffer(base64.b64decode(fields["schema"])))
            return cls(
                name=fields["name"],
                schema=schema,
                partitions=fields["partitions"],
                config=TopicConfig(**fields["config"]),
                created_ms=fields["created_ms"],
                new=False,
            )
        except (ValueError, TypeError, KeyError, pa.ArrowException) as e:
            raise CorruptObjectError(f"unreadable topic: {e}", key=key) from e


def _check_unique_names(fields: Sequence[pa.Field[Any]], path: str) -> None:
    # Columns are matched by name (appends, reads by column, Spark): a second
    # field of the same name would be unreachable or ambiguous.
    seen = set()
    for f in fields:
        if f.name in seen:
            raise InvalidConfigError(f"the schema has two fields named {path + f.name!r}")
        seen.add(f.name)
        _check_unique_names(
            [f.type.field(i) for i in range(f.type.num_fields)], path + f.name + "."
        )


def not_null_violations(schema: pa.Schema, batch: pa.RecordBatch) -> list[str]:
    """What in ``batch`` (of ``schema``'s columns, in order) breaks a not-null field
    of ``schema``, at any depth of structs and lists; empty if nothing does."""
    return [p for f, column in zip(schema, batch.columns, strict=True) for p in _nulls(f, column)]


def _nulls(
    field: pa.Field[Any], array: pa.Array[Any], inherited: int = 0, path: str = ""
) -> list[str]:
    """Nulls under not-null fields of ``array``, at any depth of structs and lists.

    ``inherited`` nulls come from a null parent struct (``flatten`` copies the
    parent's nulls into its children): those are allowed. A top-level column costs
    O(1) (``null_count``); children are looked at only where one is not null.
    """
    name = path + field.name
    problems = []
    own = array.null_count - inherited
    if own and not field.nullable:
        problems.append(f"column {name!r} has {own} null(s) but the topic says not null")
    if not _has_required_child(field.type):
        return problems
    if isinstance(array, pa.StructArray):
        for child, values in zip(field.type, array.flatten(), strict=True):
            problems += _nulls(child, values, array.null_count, name + ".")
    elif isinstance(array, pa.ListArray | pa.LargeListArray | pa.FixedSizeListArray) and not (
        isinstance(array, pa.MapArray)  # flatten() has no kernel for maps
    ):
        # flatten() keeps only the values of non-null lists, within the slice
        problems += _nulls(field.type.value_field, array.flatten(), 0, name + ".")
    return problems


def _has_required_child(kind: pa.DataType) -> bool:
    children = [kind.field(i) for i in range(kind.num_fields)]
    return any(not f.nullable or _has_required_child(f.type) for f in children)


def topic_key(name: str) -> str:
    return f"{TOPICS_PREFIX}{check_topic_name(name)}.json"


def segment_prefix(topic: str, partition: int) -> str:
    return f"{topic}/{partition}/segments/"


def segment_key(topic: str, partition: int, offset: int) -> str:
    return f"{topic}/{partition}/segments/{offset:020d}.arrow"


def parse_segment_key(key: str) -> int | None:
    """The base offset named by a segment key, or None for any other object."""
    match = _SEGMENT_NAME.fullmatch(key.rsplit("/", 1)[-1])
    return int(match.group(1)) if match else None


def checkpoint_prefix(topic: str, partition: int) -> str:
    return f"{topic}/{partition}/checkpoints/"


def checkpoint_key(topic: str, partition: int, window_start: int) -> str:
    return f"{topic}/{partition}/checkpoints/{_INVERT - window_start:020d}.json"


def parse_checkpoint_key(key: str) -> int | None:
    name = key.rsplit("/", 1)[-1]
    if len(name) != 25 or not name.endswith(".json") or not name[:20].isdigit():
        return None
    return _INVERT - int(name[:20])
