"""Options of the Spark source and sink, named as in Spark's Kafka source.

Options arrive case-insensitive. Storage options are the ones prefixed
``storage.`` (``storage.endpoint_url``, ``storage.key``, ``storage.secret``, ...),
as the Kafka source passes ``kafka.``-prefixed ones to its client.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from arrowlog.consumer import IsolationLevel
from arrowlog.errors import InvalidConfigError
from arrowlog.scan import DEFAULT_TARGET_BYTES, OffsetSpec, parse_offsets

STORAGE_PREFIX = "storage."
#: Delta's session-level idempotence keys, arrowlog's names; as options they come
#: from the session (arrowlog.spark.sink.save copies them) and lose to
#: ``txnAppId`` / ``txnVersion``
SESSION_APP_ID = "spark.arrowlog.write.txnAppId"
SESSION_VERSION = "spark.arrowlog.write.txnVersion"


def _lower(options: Mapping[str, str]) -> dict[str, str]:
    return {k.lower(): v for k, v in options.items()}


def storage_options(options: Mapping[str, str]) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for key, value in _lower(options).items():
        if key.startswith(STORAGE_PREFIX):
            name = key[len(STORAGE_PREFIX) :]
            if name == "region_name":
                out.setdefault("client_kwargs", {})["region_name"] = value
            else:
                out[name] = value
    return out


def _bool(options: Mapping[str, str], key: str, default: bool) -> bool:
    value = options.get(key)
    if value is None:
        return default
    if value.strip().lower() in ("true", "1", "yes"):
        return True
    if value.strip().lower() in ("false", "0", "no"):
        return False
    raise InvalidConfigError(f"option {key}: expected true or false, got {value!r}")


def _int(options: Mapping[str, str], key: str) -> int | None:
    value = options.get(key)
    if value is None or value.strip() == "":
        return None
    try:
        return int(value)
    except ValueError:
        raise InvalidConfigError(f"option {key}: expected an integer, got {value!r}") from None


def _root(options: Mapping[str, str]) -> str:
    root = options.get("path")
    if not root:
        raise InvalidConfigError(
            "option path (the arrowlog root URL) is required: .load(path) or .option('path', ...)"
        )
    return root


def _topics(options: Mapping[str, str]) -> tuple[str, ...]:
    raw = options.get("topic") or options.get("topics") or options.get("subscribe")
    if not raw:
        raise InvalidConfigError(
            "option topic is required (a name, or several separated by commas)"
        )
    return tuple(t.strip() for t in raw.split(",") if t.strip())


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

    @classmethod
    def parse(cls, raw: Mapping[str, str], *, streaming: bool = False) -> ReadOptions:
        """Raises:
        InvalidConfigError: an option is missing, unknown in value, or malformed."""
        options = _lower(raw)
        isolation = options.get("isolationlevel", "read_committed")
        if isolation not in ("read_committed", "read_uncommitted"):
            raise InvalidConfigError(
                "option isolationLevel: expected read_committed or read_uncommitted, "
                f"got {isolation!r}"
            )
        target = _int(options, "targetsplitbytes") or DEFAULT_TARGET_BYTES
        return cls(
            root=_root(options),
            storage=storage_options(options),
            topics=_topics(options),
            starting=parse_offsets(
                options.get("startingoffsets"),
                option="startingOffsets",
                default="latest" if streaming else "earliest",
            ),
            ending=parse_offsets(
                options.get("endingoffsets"), option="endingOffsets", default="latest"
            ),
            starting_timestamp=_int(options, "startingtimestamp"),
            ending_timestamp=_int(options, "endingtimestamp"),
            isolation_level="read_committed"
            if isolation == "read_committed"
            else "read_uncommitted",
            fail_on_data_loss=_bool(options, "failondataloss", True),
            target_bytes=target,
            max_offsets_per_trigger=_int(options, "maxoffsetspertrigger"),
        )


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
    extra: dict[str, str] = field(default_factory=dict)

    @classmethod
    def parse(cls, raw: Mapping[str, str], *, streaming: bool = False) -> WriteOptions:
        """Raises:
        InvalidConfigError: an option is missing or malformed."""
        options = _lower(raw)
        topics = _topics(options)
        if len(topics) != 1:
            raise InvalidConfigError("writing takes exactly one topic")
        app_id = options.get("txnappid")
        version = _int(options, "txnversion")
        if not streaming and (app_id is None) != (version is None):
            raise InvalidConfigError("txnAppId and txnVersion go together (as in Delta)")
        if not streaming and app_id is None:
            app_id = options.get(SESSION_APP_ID.lower())
            version = _int(options, SESSION_VERSION.lower())
            if (app_id is None) != (version is None):
                raise InvalidConfigError(
                    f"{SESSION_APP_ID} and {SESSION_VERSION} go together (as in Delta)"
                )
        return cls(
            root=_root(options),
            storage=storage_options(options),
            topic=topics[0],
            key_column=options.get("keycolumn"),
            app_id=app_id,
            app_version=version,
            transaction_timeout_ms=_int(options, "transactiontimeoutms") or 15 * 60 * 1000,
            rows_per_batch=_int(options, "rowsperbatch") or 100_000,
        )
