"""Options of the Spark source and sink, named as in Spark's Kafka source.

Options arrive case-insensitive (Spark hands them over lower-cased). Storage
options are the ones prefixed ``storage.`` (``storage.endpoint_url``,
``storage.key``, ``storage.client_kwargs`` as JSON, ...), as the Kafka source
passes ``kafka.``-prefixed ones to its client.

Every name is checked: an unknown one, a typo, or a Kafka option that means
nothing for a log in an object store is refused with one message naming it, the
closest known name, or the reason. The known names live in the tuples below, so
that a new option is one line here plus its parsing.
"""

from __future__ import annotations

import difflib
import json
import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any, Literal

from arrowlog.errors import InvalidConfigError, InvalidNameError
from arrowlog.read.scan import (
    DEFAULT_TARGET_BYTES,
    EARLIEST,
    LATEST,
    OffsetSpec,
    TopicPartition,
    parse_offsets,
)
from arrowlog.read.visibility import IsolationLevel
from arrowlog.txn.coordinator import check_id

STORAGE_PREFIX = "storage."
#: Delta's session-level idempotence keys, arrowlog's names; as options they come
#: from the session (arrowlog.spark.sink.save copies them) and lose to
#: ``txnAppId`` / ``txnVersion``
SESSION_APP_ID = "spark.arrowlog.write.txnAppId"
SESSION_VERSION = "spark.arrowlog.write.txnVersion"

# Exactly one of these names what a read subscribes to (as in Kafka).
SUBSCRIPTION_OPTIONS = ("topic", "subscribe", "assign", "subscribePattern")
# Options of batch and streaming reads alike.
READ_OPTIONS = (
    "path",
    *SUBSCRIPTION_OPTIONS,
    "startingOffsets",
    "startingTimestamp",
    "startingOffsetsByTimestamp",
    "startingOffsetsByTimestampStrategy",
    "isolationLevel",
    "kafka.isolation.level",
    "failOnDataLoss",
    "targetSplitBytes",
    "minPartitions",
    "columns",
    "reader",
)
#: what option ``reader`` takes (a batch read in a session with the JVM reader's
#: jar; io/arrowlog/spark/OptionNames.java names them too)
READERS: tuple[Literal["jvm", "python"], ...] = ("jvm", "python")
# Only a batch read has an end: a stream's end is Trigger.AvailableNow's.
BATCH_READ_OPTIONS = ("endingOffsets", "endingTimestamp", "endingOffsetsByTimestamp")
STREAM_READ_OPTIONS = ("maxOffsetsPerTrigger", "minOffsetsPerTrigger", "maxTriggerDelay")
WRITE_OPTIONS = (
    "path",
    "topic",
    "keyColumn",
    "txnAppId",
    "txnVersion",
    "transactionTimeoutMs",
    "rowsPerBatch",
    "compactAfterCommit",
)
# Only a batch write takes the session-level keys (arrowlog.spark.sink.save passes
# them as options).
BATCH_WRITE_OPTIONS = (SESSION_APP_ID, SESSION_VERSION, "writer")
#: what option ``writer`` takes (a batch write in a session with the JVM jar;
#: io/arrowlog/spark/OptionNames.java names them too)
WRITERS: tuple[Literal["jvm", "python"], ...] = ("jvm", "python")
# Spark itself hands a streaming sink the query's checkpoint location.
STREAM_WRITE_OPTIONS = ("checkpointLocation",)

_NO_BROKER = (
    "arrowlog has no brokers and no Kafka client: the log is the root URL in option path "
    "(or .load(path)), and storage.* options configure the object store client"
)
_NO_GROUP = (
    "a Spark query keeps its progress in its checkpoint, not in a consumer group "
    "(arrowlog's consumer groups are for arrowlog.connect(...).consumer(group_id=...))"
)
_NO_POLL = "there is no broker to poll: executors fetch the planned segments from the store by key"
# Kafka source and sink options that make no sense for a log in an object store.
KAFKA_ONLY_OPTIONS: dict[str, str] = {
    "kafka.bootstrap.servers": _NO_BROKER,
    "kafka.group.id": _NO_GROUP,
    "groupIdPrefix": _NO_GROUP,
    "includeHeaders": "arrowlog records have no headers: every field is a column of the topic",
    "kafkaConsumer.pollTimeoutMs": _NO_POLL,
    "fetchOffset.numRetries": _NO_POLL,
    "fetchOffset.retryIntervalMs": _NO_POLL,
    "maxRecordsPerPartition": "use minPartitions to split large partitions across tasks",
}
# Any other kafka.* name configures a Kafka client, which arrowlog does not have.
KAFKA_PREFIX = "kafka."

DEFAULT_MAX_TRIGGER_DELAY_MS = 15 * 60 * 1000  # Kafka's default, 15m
TimestampStrategy = Literal["error", "latest"]


def _lower(options: Mapping[str, str]) -> dict[str, str]:
    return {k.lower(): v for k, v in options.items()}


def check_names(
    options: Iterable[str], known: Iterable[str], *, what: str, elsewhere: Mapping[str, str]
) -> None:
    """Refuse every option name that ``known`` lacks, in one message.

    ``elsewhere`` maps names valid in another context (a write option given to a
    read, a streaming option given to a batch read) to that context's name.

    Raises:
        InvalidConfigError: one or more names are unknown or unsupported.
    """
    canonical = {name.lower(): name for name in known}
    other = {name.lower(): (name, where) for name, where in elsewhere.items()}
    kafka_only = {name.lower(): reason for name, reason in KAFKA_ONLY_OPTIONS.items()}
    problems = []
    for name in sorted(options):
        low = name.lower()
        if low in canonical or low.startswith(STORAGE_PREFIX):
            continue
        if low in kafka_only or low.startswith(KAFKA_PREFIX):
            reason = kafka_only.get(low, _NO_BROKER)
            problems.append(f"{name!r} is a Kafka option that arrowlog does not take: {reason}")
        elif low in other:
            known_name, where = other[low]
            problems.append(f"{known_name!r} applies to {where} only")
        else:
            close = difflib.get_close_matches(low, list(canonical), n=1, cutoff=0.6)
            hint = f" (did you mean {canonical[close[0]]!r}?)" if close else ""
            problems.append(f"unknown option {name!r}{hint}")
    if problems:
        raise InvalidConfigError(
            f"{what}: " + "; ".join(problems) + f". Known options: {', '.join(canonical.values())}"
            f", and {STORAGE_PREFIX}<name> for the store"
        )


def storage_options(options: Mapping[str, str]) -> dict[str, Any]:
    """The ``storage.*`` options as storage options of :func:`arrowlog.connect`.

    A value that is a JSON object (``storage.client_kwargs``) becomes a dict;
    ``storage.region_name`` is short for ``client_kwargs.region_name``. Other
    values stay strings: ``connect`` checks and coerces them.

    Raises:
        InvalidConfigError: a value that starts like a JSON object is not one.
    """
    out: dict[str, Any] = {}
    for key, value in _lower(options).items():
        if not key.startswith(STORAGE_PREFIX):
            continue
        name = key[len(STORAGE_PREFIX) :]
        if name == "region_name":
            out.setdefault("client_kwargs", {})["region_name"] = value
        elif value.lstrip().startswith("{"):
            parsed = _json(value, option=f"{STORAGE_PREFIX}{name}", expect="a JSON object")
            if not isinstance(parsed, dict):
                raise InvalidConfigError(f"option {STORAGE_PREFIX}{name}: expected a JSON object")
            out[name] = {**parsed, **out.get(name, {})}
        else:
            out[name] = value
    return out


def spark_storage_options(storage: Mapping[str, Any]) -> dict[str, str]:
    """The inverse of :func:`storage_options`: storage options as Spark options
    (dicts as JSON, booleans as ``true``/``false``)."""
    out = {}
    for name, value in storage.items():
        if isinstance(value, dict):
            text = json.dumps(value)
        elif isinstance(value, bool):
            text = "true" if value else "false"
        else:
            text = str(value)
        out[f"{STORAGE_PREFIX}{name}"] = text
    return out


def _json(value: str, *, option: str, expect: str) -> Any:
    try:
        return json.loads(value)
    except json.JSONDecodeError as e:
        raise InvalidConfigError(
            f"option {option}: expected {expect}, got {value!r} ({e.msg})"
        ) from None


def _bool(options: Mapping[str, str], key: str, default: bool) -> bool:
    value = options.get(key.lower())
    if value is None:
        return default
    if value.strip().lower() in ("true", "1", "yes"):
        return True
    if value.strip().lower() in ("false", "0", "no"):
        return False
    raise InvalidConfigError(f"option {key}: expected true or false, got {value!r}")


def _int(options: Mapping[str, str], key: str, *, minimum: int | None = None) -> int | None:
    value = options.get(key.lower())
    if value is None or value.strip() == "":
        return None
    try:
        number = int(value)
    except ValueError:
        raise InvalidConfigError(f"option {key}: expected an integer, got {value!r}") from None
    if minimum is not None and number < minimum:
        raise InvalidConfigError(f"option {key}: expected an integer >= {minimum}, got {value!r}")
    return number


# Spark's units (JavaUtils.timeStringAsMs): us, ms, s, m/min, h, d
_DURATION = re.compile(r"\s*(\d+)\s*(us|ms|s|sec|m|min|h|d)?\s*", re.IGNORECASE)
_UNIT_US = {"us": 1, "ms": 1000, "s": 10**6, "sec": 10**6, "m": 6 * 10**7, "min": 6 * 10**7}
_UNIT_US |= {"h": 3600 * 10**6, "d": 86_400 * 10**6}


def _duration_ms(options: Mapping[str, str], key: str, default: int) -> int:
    """A duration as Spark writes them (``15m``, ``30s``, ``500ms``; a bare number
    is milliseconds)."""
    value = options.get(key.lower())
    if value is None:
        return default
    match = _DURATION.fullmatch(value)
    if match is None:
        raise InvalidConfigError(
            f"option {key}: expected a duration like 500ms, 30s, 15m or 1h (units us, ms, s, "
            f"m, min, h, d), got {value!r}"
        )
    unit = (match.group(2) or "ms").lower()
    return int(match.group(1)) * _UNIT_US[unit] // 1000  # as Spark: 1500us is 1 ms


def _root(options: Mapping[str, str]) -> str:
    root = options.get("path")
    if not root:
        raise InvalidConfigError(
            "option path (the arrowlog root URL) is required: .load(path) or .option('path', ...)"
        )
    return root


def _topic_list(value: str, option: str) -> tuple[str, ...]:
    topics = tuple(t.strip() for t in value.split(",") if t.strip())
    if not topics:
        raise InvalidConfigError(f"option {option}: expected one topic or several separated by ','")
    return topics


def _subscription(
    options: Mapping[str, str],
) -> tuple[tuple[str, ...], str | None, frozenset[TopicPartition] | None]:
    """(topics, pattern, assigned partitions) from exactly one of the
    subscription options."""
    given = [name for name in SUBSCRIPTION_OPTIONS if options.get(name.lower())]
    if len(given) != 1:
        which = " and ".join(given) if given else "none"
        raise InvalidConfigError(
            f"give exactly one of the options {', '.join(SUBSCRIPTION_OPTIONS)} (got {which}): "
            "topic or subscribe take names separated by ',', assign takes JSON like "
            '{"events": [0, 1]}, subscribePattern a regular expression over topic names'
        )
    [option] = given
    value = options[option.lower()]
    if option == "subscribePattern":
        try:
            re.compile(value)
        except re.error as e:
            raise InvalidConfigError(
                f"option subscribePattern: {value!r} is not a regular expression ({e})"
            ) from None
        return (), value, None
    if option != "assign":
        return _topic_list(value, option), None, None
    parsed = _json(value, option="assign", expect='JSON like {"events": [0, 1]}')
    shape = (
        isinstance(parsed, dict)
        and bool(parsed)
        and all(
            isinstance(parts, list)
            and bool(parts)
            and all(isinstance(p, int) and not isinstance(p, bool) and p >= 0 for p in parts)
            for parts in parsed.values()
        )
    )
    if not shape:
        raise InvalidConfigError(
            f'option assign: expected JSON like {{"events": [0, 1]}} (topic -> partition '
            f"numbers), got {value!r}"
        )
    assigned = frozenset((t, p) for t, parts in parsed.items() for p in parts)
    return tuple(parsed), None, assigned


def _timestamps(options: Mapping[str, str], option: str) -> dict[TopicPartition, int] | None:
    """``{"topic": {"0": ms}}``: a timestamp per partition."""
    value = options.get(option.lower())
    if value is None:
        return None
    expect = 'JSON like {"events": {"0": 1700000000000}} (ms since the epoch per partition)'
    parsed = _json(value, option=option, expect=expect)
    bad = InvalidConfigError(f"option {option}: expected {expect}, got {value!r}")
    if not isinstance(parsed, dict) or not parsed:
        raise bad
    out: dict[TopicPartition, int] = {}
    for topic, parts in parsed.items():
        if not isinstance(parts, dict):
            raise bad
        for p, ts in parts.items():
            if not str(p).isdigit() or isinstance(ts, bool) or not isinstance(ts, int) or ts < 0:
                raise bad
            out[(topic, int(p))] = ts
    return out


@dataclass(frozen=True)
class ReadOptions:
    root: str
    storage: dict[str, Any]
    topics: tuple[str, ...]
    starting: OffsetSpec
    ending: OffsetSpec
    starting_timestamp: int | None
    ending_timestamp: int | None
    isolation_level: IsolationLevel
    fail_on_data_loss: bool
    target_bytes: int
    max_offsets_per_trigger: int | None = None
    # subscribePattern: topics are the ones whose whole name matches, found when
    # the read is planned; ``topics`` is then empty.
    topic_pattern: str | None = None
    # assign: only these partitions are read.
    assigned: frozenset[TopicPartition] | None = None
    starting_by_timestamp: dict[TopicPartition, int] | None = None
    ending_by_timestamp: dict[TopicPartition, int] | None = None
    # Kafka's startingOffsetsByTimestampStrategy: what a starting timestamp with
    # no record at or after it gives (error: fail; latest: start at the latest).
    timestamp_strategy: TimestampStrategy = "error"
    min_partitions: int | None = None
    min_offsets_per_trigger: int | None = None
    max_trigger_delay_ms: int = DEFAULT_MAX_TRIGGER_DELAY_MS
    # columns: only these of the topic's are read (and large segments are
    # fetched column by column); the metadata columns always follow.
    columns: tuple[str, ...] | None = None
    # reader: "jvm" (the default where the JVM source is loaded: see
    # arrowlog.spark.configure) or "python"; batch reads only, streams are
    # always the Python source's
    reader: Literal["jvm", "python"] = "jvm"

    @classmethod
    def parse(cls, raw: Mapping[str, str], *, streaming: bool | None = False) -> ReadOptions:
        """``streaming`` None: either kind of read (Spark asks the schema of both).

        Raises:
            InvalidConfigError: an option is missing, unknown, or malformed."""
        options = _lower(raw)
        elsewhere = dict.fromkeys((*WRITE_OPTIONS, *STREAM_WRITE_OPTIONS), "writes")
        if streaming is None:
            known: tuple[str, ...] = (*READ_OPTIONS, *BATCH_READ_OPTIONS, *STREAM_READ_OPTIONS)
        elif streaming:
            known = (*READ_OPTIONS, *STREAM_READ_OPTIONS)
            elsewhere |= dict.fromkeys(BATCH_READ_OPTIONS, "batch reads (a stream has no end)")
        else:
            known = (*READ_OPTIONS, *BATCH_READ_OPTIONS)
            elsewhere |= dict.fromkeys(STREAM_READ_OPTIONS, "streaming reads")
        check_names(
            options,
            known,
            what="reading arrowlog" + (" as a stream" if streaming else ""),
            elsewhere=elsewhere,
        )
        isolation = _isolation(options)
        strategy = options.get("startingoffsetsbytimestampstrategy", "error").strip().lower()
        if strategy not in ("error", "latest"):
            raise InvalidConfigError(
                "option startingOffsetsByTimestampStrategy: expected error or latest, "
                f"got {options['startingoffsetsbytimestampstrategy']!r}"
            )
        topics, pattern, assigned = _subscription(options)
        min_offsets = _int(options, "minOffsetsPerTrigger", minimum=1)
        max_offsets = _int(options, "maxOffsetsPerTrigger", minimum=1)
        if min_offsets is not None and max_offsets is not None and min_offsets > max_offsets:
            raise InvalidConfigError(
                f"option minOffsetsPerTrigger ({min_offsets}) is above maxOffsetsPerTrigger "
                f"({max_offsets})"
            )
        starting = parse_offsets(
            options.get("startingoffsets"),
            option="startingOffsets",
            default="latest" if streaming else "earliest",
        )
        ending = parse_offsets(
            options.get("endingoffsets"), option="endingOffsets", default="latest"
        )
        if streaming is False:
            _refuse_empty_batch_bounds(starting, ending)
        return cls(
            root=_root(options),
            storage=storage_options(options),
            topics=topics,
            starting=starting,
            ending=ending,
            starting_timestamp=_int(options, "startingTimestamp", minimum=0),
            ending_timestamp=_int(options, "endingTimestamp", minimum=0),
            isolation_level=isolation,
            fail_on_data_loss=_bool(options, "failOnDataLoss", True),
            target_bytes=_int(options, "targetSplitBytes", minimum=1) or DEFAULT_TARGET_BYTES,
            max_offsets_per_trigger=max_offsets,
            topic_pattern=pattern,
            assigned=assigned,
            starting_by_timestamp=_timestamps(options, "startingOffsetsByTimestamp"),
            ending_by_timestamp=_timestamps(options, "endingOffsetsByTimestamp"),
            timestamp_strategy="latest" if strategy == "latest" else "error",
            min_partitions=_int(options, "minPartitions", minimum=1),
            min_offsets_per_trigger=min_offsets,
            max_trigger_delay_ms=_duration_ms(
                options, "maxTriggerDelay", DEFAULT_MAX_TRIGGER_DELAY_MS
            ),
            columns=_columns(options.get("columns")),
            reader=_reader(options.get("reader")),
        )


def _refuse_empty_batch_bounds(starting: OffsetSpec, ending: OffsetSpec) -> None:
    """A batch read starting at latest or ending at earliest reads nothing:
    Kafka's source refuses both, as here, instead of an empty DataFrame.

    Raises:
        InvalidConfigError: ``startingOffsets`` latest (or -1), or
            ``endingOffsets`` earliest (or -2).
    """
    for option, spec, word, code in (
        ("startingOffsets", starting, "latest", LATEST),
        ("endingOffsets", ending, "earliest", EARLIEST),
    ):
        if spec == word or (isinstance(spec, dict) and code in spec.values()):
            raise InvalidConfigError(
                f"option {option}: '{word}' is not allowed in a batch read ({code} in JSON "
                "neither): it would read nothing; Kafka's source refuses it too"
            )


def _reader(value: str | None) -> Literal["jvm", "python"]:
    choice = (value or READERS[0]).strip().lower()
    for reader in READERS:
        if choice == reader:
            return reader
    raise InvalidConfigError(f"option reader: expected {' or '.join(READERS)}, got {value!r}")


def _columns(value: str | None) -> tuple[str, ...] | None:
    """The ``columns`` option: comma-separated names (checked against the
    topic's schema when the read is planned)."""
    if value is None:
        return None
    names = tuple(name.strip() for name in value.split(","))
    if not all(names):
        raise InvalidConfigError(
            f"option columns: expected comma-separated column names, got {value!r}"
        )
    return names


def _isolation(options: Mapping[str, str]) -> IsolationLevel:
    """isolationLevel, or Kafka's client property kafka.isolation.level."""
    given = {
        name: options[name.lower()]
        for name in ("isolationLevel", "kafka.isolation.level")
        if name.lower() in options
    }
    if len(set(given.values())) > 1:
        raise InvalidConfigError(
            "options isolationLevel and kafka.isolation.level disagree: "
            + ", ".join(f"{k}={v!r}" for k, v in given.items())
        )
    for name, value in given.items():
        if value not in ("read_committed", "read_uncommitted"):
            raise InvalidConfigError(
                f"option {name}: expected read_committed or read_uncommitted, got {value!r}"
            )
    value = next(iter(given.values()), "read_committed")
    return "read_committed" if value == "read_committed" else "read_uncommitted"


def app_transactional_id(
    topic: str, app_id: str, *, incarnation: int = 0, streaming: bool = False
) -> str:
    """The transactional id of Spark writes to ``topic`` with ``txnAppId`` =
    ``app_id``: ``spark.write.<len(topic)>.<topic>.<incarnation>.<app_id>``, or
    ``spark.stream.``... for streaming writes. One id per table, as Delta keeps
    ``txnAppId`` per table: the same keys on two topics are two jobs, and so are
    they on a topic deleted and created anew under the same name (its
    incarnation): a version committed to one does not make a write to another a
    no-op. The topic's length keeps the id unambiguous when names hold dots
    (``a.b`` + ``c`` against ``a`` + ``b.c``).

    Raises:
        InvalidConfigError: ``app_id`` is not a name of ``[A-Za-z0-9._-]``, or is
            too long together with the topic's name.
    """
    kind = "stream" if streaming else "write"
    prefix = f"spark.{kind}.{len(topic)}.{topic}.{incarnation}."
    try:
        return check_id("transactional id", prefix + check_id("txnAppId", app_id))
    except InvalidNameError:
        raise InvalidConfigError(
            f"option txnAppId (or {SESSION_APP_ID}): expected 1 to {249 - len(prefix)} "
            f"characters of [A-Za-z0-9._-] starting with a letter or digit for topic "
            f"{topic!r}, got {app_id!r}"
        ) from None


@dataclass(frozen=True)
class WriteOptions:
    root: str
    storage: dict[str, Any]
    topic: str
    key_column: str | None
    app_id: str | None
    app_version: int | None
    transaction_timeout_ms: int
    rows_per_batch: int
    #: after each commit, compact the topic's complete windows (log.compact)
    compact_after_commit: bool = False
    #: who encodes a batch write's rows: the JVM (where the session has the
    #: jar and the write allows it) or the Python source
    writer: Literal["jvm", "python"] = "jvm"
    extra: dict[str, str] = field(default_factory=dict)

    @classmethod
    def parse(cls, raw: Mapping[str, str], *, streaming: bool = False) -> WriteOptions:
        """Raises:
        InvalidConfigError: an option is missing, unknown, or malformed."""
        options = _lower(raw)
        read_only = (*READ_OPTIONS, *BATCH_READ_OPTIONS, *STREAM_READ_OPTIONS)
        check_names(
            options,
            (*WRITE_OPTIONS, *(STREAM_WRITE_OPTIONS if streaming else BATCH_WRITE_OPTIONS)),
            what="writing arrowlog" + (" as a stream" if streaming else ""),
            elsewhere={n: "reads" for n in read_only if n.lower() not in WRITE_LOWER}
            | (
                dict.fromkeys(BATCH_WRITE_OPTIONS, "batch writes")
                if streaming
                else dict.fromkeys(STREAM_WRITE_OPTIONS, "streaming writes")
            ),
        )
        topic = options.get("topic")
        if not topic:
            raise InvalidConfigError("option topic is required: the topic to write to")
        topics = _topic_list(topic, "topic")
        if len(topics) != 1:
            raise InvalidConfigError("writing takes exactly one topic")
        app_id = options.get("txnappid")
        version = _int(options, "txnVersion", minimum=0)
        if streaming and version is not None:
            raise InvalidConfigError(
                "a streaming write takes txnAppId alone: each micro-batch's batch id is its "
                "version (txnVersion is for batch writes)"
            )
        if not streaming and (app_id is None) != (version is None):
            raise InvalidConfigError("txnAppId and txnVersion go together (as in Delta)")
        if not streaming and app_id is None:
            app_id = options.get(SESSION_APP_ID.lower())
            version = _int(options, SESSION_VERSION, minimum=0)
            if (app_id is None) != (version is None):
                raise InvalidConfigError(
                    f"{SESSION_APP_ID} and {SESSION_VERSION} go together (as in Delta)"
                )
        if app_id is not None:
            app_transactional_id(topics[0], app_id, streaming=streaming)  # refuses a bad name
        return cls(
            root=_root(options),
            storage=storage_options(options),
            topic=topics[0],
            key_column=options.get("keycolumn"),
            app_id=app_id,
            app_version=version,
            transaction_timeout_ms=_int(options, "transactionTimeoutMs", minimum=1)
            or 15 * 60 * 1000,
            rows_per_batch=_int(options, "rowsPerBatch", minimum=1) or 100_000,
            compact_after_commit=_bool(options, "compactAfterCommit", False),
            writer=_writer(options.get("writer")),
        )


def _writer(value: str | None) -> Literal["jvm", "python"]:
    choice = (value or WRITERS[0]).strip().lower()
    for writer in WRITERS:
        if choice == writer:
            return writer
    raise InvalidConfigError(f"option writer: expected {' or '.join(WRITERS)}, got {value!r}")


WRITE_LOWER = frozenset(
    n.lower() for n in (*WRITE_OPTIONS, *BATCH_WRITE_OPTIONS, *STREAM_WRITE_OPTIONS)
)
