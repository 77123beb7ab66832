"""Topics: names, configuration, schema, and where their objects live.

Bucket layout (keys relative to the root prefix)::

    _arrowlog/topics/<topic>.json                          version 0: config + schema
    _arrowlog/topics/<topic>/<version:020d>.json           later versions (changes)
    <prefix>/<partition>/segments/<base offset:020d>.arrow  one segment per batch
    <prefix>/<partition>/segments/topic-version-<version:020d>.json  a change announced
    <prefix>/<partition>/checkpoints/<inverted start:020d>.json

``<prefix>`` is the topic's name for the topic first created under it
(incarnation 0) and ``<topic>=<incarnation>`` for one created again after a
delete, so a new topic never reads an old one's objects. See docs/protocol.md,
"Changing a topic".

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
import pyarrow.compute as pc

from arrowlog import _checked_json
from arrowlog.config import TopicConfig
from arrowlog.errors import (
    CorruptObjectError,
    InvalidConfigError,
    InvalidNameError,
    UnknownTopicOrPartitionError,
)
from arrowlog.format.segment import check_schema, empty_batch, segment_size_floor

INTERNAL_PREFIX = "_arrowlog"
TOPICS_PREFIX = f"{INTERNAL_PREFIX}/topics/"
_TOPIC_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]{0,248}")
_SEGMENT_NAME = re.compile(r"(\d{20})\.arrow")
_ANNOUNCEMENT_NAME = re.compile(r"topic-version-(\d{20})\.json")
_LOG_START_NAME = re.compile(r"log-start-(\d{20})\.json")
_COMPACTED_MARK_NAME = re.compile(r"compacted-(\d{20})\.json")
_COMPACTED_NAME = re.compile(r"(\d{20})-(\d{20})\.arrow")
_VERSION_NAME = re.compile(r"([^/]+)/(\d{20})\.json")
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
    """One version of a topic as stored; each version is immutable, a change
    (more partitions) is a new version, a delete a :class:`TopicTombstone`."""

    name: str
    schema: pa.Schema
    partitions: int
    config: TopicConfig = field(default_factory=TopicConfig)
    created_ms: int = field(default_factory=lambda: int(time.time() * 1000))
    #: Position in the topic's chain of versions (0: as first created).
    version: int = 0
    #: The version that created this topic under its name: 0 unless the name
    #: was used by a topic deleted before. It names where the objects live.
    incarnation: int = 0
    #: Random id of the call that wrote this version: after a lost reply, the
    #: writer knows the version as its own by this, not by luck.
    change_id: str = ""
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

    @property
    def prefix(self) -> str:
        """Where this topic's partitions live (see :func:`topic_prefix`)."""
        return topic_prefix(self.name, self.incarnation)

    def to_json(self) -> bytes:
        return _checked_json.dump(
            {
                "v": 1,
                "name": self.name,
                "partitions": self.partitions,
                "config": asdict(self.config),
                "created_ms": self.created_ms,
                "schema": base64.b64encode(self.schema.serialize().to_pybytes()).decode(),
                "version": self.version,
                "incarnation": self.incarnation,
                "change_id": self.change_id,
            }
        )

    @classmethod
    def from_json(cls, raw: bytes | memoryview, *, key: str) -> Topic:
        """Raises:
        CorruptObjectError: the stored topic fails its checksum or is unreadable."""
        entry = load_topic_entry(raw, key=key)
        if not isinstance(entry, Topic):
            raise CorruptObjectError("a tombstone where a topic was expected", key=key)
        return entry


@dataclass(frozen=True, kw_only=True)
class TopicTombstone:
    """The version of a topic that deletes it: from here on the topic (this
    incarnation of its name) does not exist. ``partitions`` is how many it had,
    for the cleanup."""

    name: str
    version: int
    incarnation: int
    partitions: int
    change_id: str
    deleted_ms: int = field(default_factory=lambda: int(time.time() * 1000))

    @property
    def prefix(self) -> str:
        return topic_prefix(self.name, self.incarnation)

    def to_json(self) -> bytes:
        return _checked_json.dump({"v": 1, "deleted": True, **asdict(self)})


TopicEntry = Topic | TopicTombstone


def load_topic_entry(raw: bytes | memoryview, *, key: str) -> TopicEntry:
    """One version of a topic's chain: a topic or a tombstone. Topics stored
    before versions existed read as version 0 of incarnation 0.

    Raises:
        CorruptObjectError: the entry fails its checksum or is unreadable.
    """
    fields = _checked_json.load(raw, key=key, error=CorruptObjectError)
    try:
        if fields.get("deleted"):
            return TopicTombstone(
                name=fields["name"],
                version=fields["version"],
                incarnation=fields["incarnation"],
                partitions=fields["partitions"],
                change_id=fields["change_id"],
                deleted_ms=fields["deleted_ms"],
            )
        schema = pa.ipc.read_schema(pa.py_buffer(base64.b64decode(fields["schema"])))
        return Topic(
            name=fields["name"],
            schema=schema,
            partitions=fields["partitions"],
            # topics from before compression existed keep writing as they did
            config=TopicConfig(**{"compression": "none", **fields["config"]}),
            created_ms=fields["created_ms"],
            version=fields.get("version", 0),
            incarnation=fields.get("incarnation", 0),
            change_id=fields.get("change_id", ""),
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
    elif isinstance(array, pa.MapArray):
        fields = (field.type.key_field, field.type.item_field)
        for child, values in zip(fields, map_entries(array), strict=True):
            problems += _nulls(child, values, 0, name + ".")
    elif isinstance(array, pa.ListArray | pa.LargeListArray | pa.FixedSizeListArray):
        # flatten() keeps only the values of non-null lists, within the slice
        problems += _nulls(field.type.value_field, array.flatten(), 0, name + ".")
    return problems


def map_entries(array: pa.MapArray[Any, Any]) -> tuple[pa.Array[Any], pa.Array[Any]]:
    """The keys and the values of the non-null maps of ``array``, within its
    slice (``keys`` and ``items`` are the whole child arrays). flatten() has no
    kernel for maps, and a cast to a list of structs refuses a null that a null
    parent hides under a not-null field."""
    offsets = array.offsets
    lo, hi = offsets[0].as_py(), offsets[-1].as_py()
    rebased = pc.subtract(offsets, lo)
    mask = array.is_null() if array.null_count else None

    def entries(child: pa.Array[Any]) -> pa.Array[Any]:
        lists = pa.ListArray.from_arrays(rebased, child.slice(lo, hi - lo), mask=mask)
        return lists.flatten()

    return entries(array.keys), entries(array.items)


def _has_required_child(kind: pa.DataType) -> bool:
    children = [kind.field(i) for i in range(kind.num_fields)]
    return any(not f.nullable or _has_required_child(f.type) for f in children)


def topic_key(name: str) -> str:
    return f"{TOPICS_PREFIX}{check_topic_name(name)}.json"


def topic_version_key(name: str, version: int) -> str:
    """Version 0 keeps the key topics always had; later ones sit beside it,
    zero-padded so a LIST returns them in order."""
    if version == 0:
        return topic_key(name)
    return f"{TOPICS_PREFIX}{check_topic_name(name)}/{version:020d}.json"


def topic_versions_prefix(name: str) -> str:
    """Where the versions after version 0 of ``name`` are: a LIST of it shows
    them in order."""
    return f"{TOPICS_PREFIX}{check_topic_name(name)}/"


def parse_topic_listing(key: str) -> tuple[str, int] | None:
    """``(topic, version)`` named by a key listed under ``TOPICS_PREFIX``."""
    rest = key[len(TOPICS_PREFIX) :] if key.startswith(TOPICS_PREFIX) else ""
    if rest.endswith(".json") and "/" not in rest:
        return rest[: -len(".json")], 0
    match = _VERSION_NAME.fullmatch(rest)
    return (match.group(1), int(match.group(2))) if match else None


def topic_prefix(name: str, incarnation: int) -> str:
    """Where the partitions of one incarnation of a topic live: its name for
    the first (so topics stored before versions existed stay where they are),
    ``<name>=<incarnation>`` after. ``=`` is not allowed in topic names, so no
    other topic's prefix can be equal to it."""
    return name if incarnation == 0 else f"{name}={incarnation}"


def parse_topic_prefix(prefix: str) -> tuple[str, int]:
    """``(name, incarnation)`` of a :func:`topic_prefix`."""
    name, _, incarnation = prefix.partition("=")
    return name, int(incarnation or 0)


def announcement_key(prefix: str, partition: int, version: int) -> str:
    """Written into each partition before version ``version`` of its topic is
    claimed. It sorts after every segment key, so every listing of the tail
    (opening, syncing) sees it without a request of its own."""
    return f"{prefix}/{partition}/segments/topic-version-{version:020d}.json"


def parse_announcement_key(key: str) -> int | None:
    match = _ANNOUNCEMENT_NAME.fullmatch(key.rsplit("/", 1)[-1])
    return int(match.group(1)) if match else None


#: after a partition's segment prefix, a LIST ``start_after`` this shows only its
#: markers (compaction marks, log starts, announcements): segment keys are digits
MARKS_AFTER = "a"


def log_start_key(prefix: str, partition: int, offset: int) -> str:
    """Written by ``delete_records``: the log starts at ``offset`` from now on.
    It sorts after every segment key, so every listing of the tail sees it."""
    return f"{prefix}/{partition}/segments/log-start-{offset:020d}.json"


def parse_log_start_key(key: str) -> int | None:
    match = _LOG_START_NAME.fullmatch(key.rsplit("/", 1)[-1])
    return int(match.group(1)) if match else None


#: the name of a compaction mark, after its partition's segment prefix
COMPACTED_MARK_PREFIX = "compacted-"


def compacted_mark_key(prefix: str, partition: int, offset: int) -> str:
    """Written by ``compact``: the records below ``offset`` are in compacted
    objects, and their segments may be removed once the topic's delay has
    passed. It sorts after every segment key (and before the log start's), so
    every listing of the tail sees it."""
    return f"{prefix}/{partition}/segments/compacted-{offset:020d}.json"


def parse_compacted_mark_key(key: str) -> int | None:
    match = _COMPACTED_MARK_NAME.fullmatch(key.rsplit("/", 1)[-1])
    return int(match.group(1)) if match else None


def compacted_prefix(prefix: str, partition: int) -> str:
    return f"{prefix}/{partition}/compacted/"


def compacted_key(prefix: str, partition: int, start: int, end: int) -> str:
    """A compacted object holding the committed records of ``[start, end)``.
    Named by its end first: a LIST starting after ``compacted_after(X)`` shows,
    in offset order, every compacted object that holds records at or past X."""
    return f"{prefix}/{partition}/compacted/{end:020d}-{start:020d}.arrow"


def compacted_after(prefix: str, partition: int, offset: int) -> str:
    """A LIST ``start_after`` this shows the compacted objects ending past ``offset``."""
    return compacted_start_after(compacted_prefix(prefix, partition), offset)


def compacted_start_after(compacted: str, offset: int) -> str:
    """:func:`compacted_after`, given the partition's compacted prefix."""
    return f"{compacted}{offset:020d}-~"


def compacted_prefix_of(segment: str) -> str:
    """The compacted prefix of the partition whose segment key is ``segment``."""
    return segment.rsplit("/segments/", 1)[0] + "/compacted/"


def parse_compacted_key(key: str) -> tuple[int, int] | None:
    """``(start, end)`` named by a compacted object's key, or None."""
    match = _COMPACTED_NAME.fullmatch(key.rsplit("/", 1)[-1])
    return (int(match.group(2)), int(match.group(1))) if match else None


def segment_prefix(prefix: str, partition: int) -> str:
    return f"{prefix}/{partition}/segments/"


def segment_key(prefix: str, partition: int, offset: int) -> str:
    return f"{prefix}/{partition}/segments/{offset:020d}.arrow"


def batch_key(prefix: str, partition: int, base: int, at: str | None) -> str:
    """The object holding the batch at ``base``: its segment, or the staged
    data object ``at`` (relative to the partition's directory) a commit names."""
    if at is None:
        return segment_key(prefix, partition, base)
    return f"{prefix}/{partition}/{at}"


def parse_segment_key(key: str) -> int | None:
    """The base offset named by a segment key, or None for any other object."""
    match = _SEGMENT_NAME.fullmatch(key.rsplit("/", 1)[-1])
    return int(match.group(1)) if match else None


#: how much of the writer's clock one folder of staged data objects covers (ms):
#: a helper lists one or two folders, never every staged object of the history
STAGED_FOLDER_MS = 10_000


def partition_dir(prefix: str, partition: int) -> str:
    """Everything of one partition lies under this (a ref's ``at`` is relative to it)."""
    return f"{prefix}/{partition}/"


def staged_prefix(prefix: str, partition: int) -> str:
    """Every staged data object of a partition lies under this."""
    return f"{prefix}/{partition}/staged/"


def staged_folder(prefix: str, partition: int, writer_ms: int) -> str:
    """The folder of the data objects staged at ``writer_ms`` (the writer's clock:
    it only orders keys for listing, never decides anything)."""
    return f"{prefix}/{partition}/staged/{writer_ms // STAGED_FOLDER_MS:010d}/"


@dataclass(frozen=True, slots=True)
class StagedName:
    """What a staged data object's name says of it, so that a writer helping
    others commit needs no request beyond the LIST that found it: when it was
    staged (the writer's clock, for ordering only), its append id, its record
    count and, for an idempotent producer's batch, the producer's identity."""

    writer_ms: int
    append_id: str
    record_count: int
    producer_id: int = -1
    producer_epoch: int = -1
    base_sequence: int = -1
    transactional: bool = False

    def name(self) -> str:
        who = ""
        if self.producer_id >= 0:
            who = f"-p{self.producer_id}e{self.producer_epoch}s{self.base_sequence}"
        txn = "-t" if self.transactional else ""
        return f"{self.writer_ms:013d}-{self.append_id}-{self.record_count}{who}{txn}.arrow"


_STAGED_NAME = re.compile(r"(\d{13})-([0-9a-f]{32})-(\d+)(?:-p(\d+)e(\d+)s(\d+))?(-t)?\.arrow")


def staged_at(name: StagedName) -> str:
    """A staged data object's key relative to its partition's directory."""
    folder = name.writer_ms // STAGED_FOLDER_MS
    return f"staged/{folder:010d}/{name.name()}"


def parse_staged_name(key: str) -> StagedName | None:
    """What a staged data object's key says of it, or None for any other key."""
    match = _STAGED_NAME.fullmatch(key.rsplit("/", 1)[-1])
    if match is None:
        return None
    ms, append_id, count, pid, epoch, sequence, txn = match.groups()
    who = (-1, -1, -1) if pid is None else (int(pid), int(epoch), int(sequence))
    return StagedName(int(ms), append_id, int(count), *who, transactional=txn is not None)


def checkpoint_prefix(prefix: str, partition: int) -> str:
    return f"{prefix}/{partition}/checkpoints/"


def checkpoint_key(prefix: str, partition: int, window_start: int) -> str:
    return f"{prefix}/{partition}/checkpoints/{_INVERT - window_start:020d}.json"


def parse_checkpoint_key(key: str) -> int | None:
    name = key.rsplit("/", 1)[-1]
    if len(name) != 25 or not name.endswith(".json") or not name[:20].isdigit():
        return None
    return _INVERT - int(name[:20])
