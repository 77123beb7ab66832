"""Typed, frozen configuration. Every knob a user can set lives here once, with its
default and its reason."""

from __future__ import annotations

import enum
import random
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import TypeVar

from arrowlog.errors import InvalidConfigError, TransientStoreError

T = TypeVar("T")

#: Largest encoded segment a topic accepts by default. A segment is one PUT; S3
#: allows 5 GiB, but big segments make reads coarse and retries expensive.
DEFAULT_MAX_BATCH_BYTES = 64 * 1024 * 1024
#: Segments per checkpoint by default. The tail a reader lists on open is at most
#: about this long, and it must fit in one LIST page (1,000 keys).
DEFAULT_CHECKPOINT_INTERVAL = 100
MAX_CHECKPOINT_INTERVAL = 900
#: Offsets are signed 64-bit, as in Kafka.
MAX_OFFSET = 2**63 - 1

# The horizons of cleanup (vacuum's retain_ms), here so that the writers whose
# rules they bound (coordinator and group logs, partitions) read them from config.
DAY_MS = 24 * 3600 * 1000
#: what vacuum keeps by default: 7 days, Kafka's transactional.id.expiration.ms
DEFAULT_RETAIN_MS = 7 * DAY_MS
#: the shortest horizon vacuum accepts. Writers of entry logs check a write whose
#: outcome arrived later than :data:`LATE_OUTCOME_MS` after the view it was made
#: on; removal is safe only with a horizon well above that.
MIN_RETAIN_MS = 3600 * 1000
#: a write whose outcome arrives this long after the read it was based on is
#: checked for having landed in a key cleanup had freed
LATE_OUTCOME_MS = 10 * 60 * 1000


def check_retain(retain_ms: object) -> int:
    """``retain_ms`` if it is an int in [1 hour, 10 years].

    Raises:
        InvalidConfigError: anything else; nothing is written.
    """
    if (
        isinstance(retain_ms, bool)
        or not isinstance(retain_ms, int)
        or not MIN_RETAIN_MS <= retain_ms <= 3650 * DAY_MS
    ):
        raise InvalidConfigError(
            f"retain_ms must be an int between {MIN_RETAIN_MS} (1 hour) and "
            f"{3650 * DAY_MS} (10 years), got {retain_ms!r}"
        )
    return retain_ms


@dataclass(frozen=True, kw_only=True)
class RetryPolicy:
    """Exponential backoff with full jitter, bounded by a deadline.

    Attributes:
        initial_backoff: first sleep ceiling, seconds.
        max_backoff: largest sleep ceiling, seconds.
        deadline: give up after this many seconds in total.
    """

    initial_backoff: float = 0.02
    max_backoff: float = 1.0
    deadline: float = 60.0

    def __post_init__(self) -> None:
        for name in ("initial_backoff", "max_backoff", "deadline"):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, int | float):
                raise InvalidConfigError(f"RetryPolicy.{name} must be seconds, got {value!r}")
        if not 0 < self.initial_backoff <= self.max_backoff:
            raise InvalidConfigError("RetryPolicy needs 0 < initial_backoff <= max_backoff")
        if self.deadline <= 0:
            raise InvalidConfigError("RetryPolicy.deadline must be > 0")

    def call(self, request: Callable[[], T]) -> T:
        """Run an idempotent request (a read), retrying TransientStoreError with
        backoff until the deadline; then the last error propagates."""
        sleeps = self.sleeps()
        while True:
            try:
                return request()
            except TransientStoreError:
                pause = next(sleeps, None)
                if pause is None:
                    raise
                time.sleep(pause)

    def sleeps(self) -> Iterator[float]:
        """Sleep before each retry; stops when the next sleep would pass the
        deadline. Full jitter keeps many writers that failed together from
        retrying together."""
        give_up = time.monotonic() + self.deadline
        ceiling = self.initial_backoff
        rng = random.Random()
        while True:
            pause = rng.uniform(0, ceiling)
            if time.monotonic() + pause > give_up:
                return
            yield pause
            ceiling = min(ceiling * 2, self.max_backoff)


class Compression(enum.StrEnum):
    """How a topic's segments compress their Arrow buffers (Arrow IPC buffer
    compression: a segment stays a plain Arrow IPC file that pyarrow reads)."""

    ZSTD = "zstd"  # the smallest, still about 1 GB/s to decode per core
    LZ4 = "lz4"  # LZ4 frames: faster, larger
    NONE = "none"


@dataclass(frozen=True, kw_only=True)
class TopicConfig:
    """Per-topic settings, stored with the topic so every client agrees on them.

    Attributes:
        max_batch_bytes: largest encoded segment accepted.
        checkpoint_interval: a checkpoint is written every this many segments.
        max_transaction_timeout_ms: the longest transaction timeout a producer
            writing to this topic may ask for: an open transaction holds back the
            LSO of every partition it touches until it ends or expires (Kafka's
            max.transaction.timeout.ms, 15 minutes).
        compression: how new segments compress their buffers (``zstd``, ``lz4``
            or ``none``; a string is accepted). ``max_batch_bytes`` counts the
            stored, compressed bytes, as Kafka's max.message.bytes does. Readers
            read every segment whatever the setting it was written with.
        delete_delay_ms: how long the segments of deleted records (below the
            log start) stay in the store before ``vacuum`` removes them: a read
            planned before the delete has this long to fetch them (Kafka's
            file.delete.delay.ms). A writer also trusts its view of the log end
            for at most half of it before listing again (docs/protocol.md,
            "Deleting records").
        retention_ms: records whose segment was written (on the store's
            clock) longer ago than this are deleted by the next ``vacuum``
            (Kafka's retention.ms); None keeps them forever.
        retention_bytes: the most bytes of segments a partition keeps; the
            oldest records beyond it are deleted by the next ``vacuum``
            (Kafka's retention.bytes); None: no limit. Retention never deletes
            the records of a partition's newest segment, and both settings can
            change after creation (``ArrowLog.alter_topic_config``).
    """

    max_batch_bytes: int = DEFAULT_MAX_BATCH_BYTES
    checkpoint_interval: int = DEFAULT_CHECKPOINT_INTERVAL
    max_transaction_timeout_ms: int = 15 * 60 * 1000
    compression: Compression = Compression.ZSTD
    delete_delay_ms: int = 15 * 60 * 1000
    retention_ms: int | None = None
    retention_bytes: int | None = None

    def __post_init__(self) -> None:
        try:
            # frozen: the one place a string becomes the enum
            object.__setattr__(self, "compression", Compression(self.compression))
        except ValueError:
            raise InvalidConfigError(
                f"compression must be one of {', '.join(c.value for c in Compression)}, "
                f"got {self.compression!r}"
            ) from None
        _check_int(self.max_batch_bytes, 1024, 5 * 1024**3, "max_batch_bytes", "1 KiB and 5 GiB")
        _check_int(
            self.max_transaction_timeout_ms,
            1_000,
            24 * 3600 * 1000,
            "max_transaction_timeout_ms",
            "1 s and 24 h",
        )
        _check_int(self.checkpoint_interval, 1, MAX_CHECKPOINT_INTERVAL, "checkpoint_interval")
        for name in ("retention_ms", "retention_bytes"):
            if getattr(self, name) is not None:
                _check_int(getattr(self, name), 1, 2**62, name, "1 and 2**62, or None")
        _check_int(
            self.delete_delay_ms, 100, 7 * 24 * 3600 * 1000, "delete_delay_ms", "100 ms and 7 days"
        )


@dataclass(frozen=True, kw_only=True)
class LogConfig:
    """Client-side settings of one connection.

    Attributes:
        retry: how transient store failures are retried.
        read_ahead: segments fetched ahead of the reader, in parallel. Memory use
            of a streaming read is bounded by about this many segments, plus up
            to three times as many more while they hold at most 32 MiB
            (``partition.reads.QUEUED_BYTES``: small segments keep every thread
            busy behind a slow one). None picks
            by store: 1 for local and memory stores (already at memory speed;
            threads only add overhead, measured), 8 for remote ones (one request's
            latency hides behind the others').
        metadata_max_age_ms: how long a client trusts the version of a topic
            it knows (partition count, not deleted) before it reads the topic's
            chain of versions again, one GET, on its next lookup. Listing a
            partition shows any change sooner (see docs/protocol.md, "Changing
            a topic"). Kafka's metadata.max.age.ms is 5 minutes.
        staged_appends: a plain or idempotent append that loses the race for
            the log end is uploaded once under a key of its own and committed
            by whichever writer wins the next offset (docs/protocol.md,
            "Staged appends"), instead of racing one upload per offset. A
            writer alone never stages (one request per append). False: every
            append races for the end, and the log holds no commit objects
            (for readers older than staged appends, which refuse them).
    """

    retry: RetryPolicy = field(default_factory=RetryPolicy)
    read_ahead: int | None = None
    metadata_max_age_ms: int = 30_000
    staged_appends: bool = True

    def __post_init__(self) -> None:
        if not isinstance(self.retry, RetryPolicy):
            raise InvalidConfigError(f"LogConfig.retry must be a RetryPolicy, got {self.retry!r}")
        if self.read_ahead is not None:
            _check_int(self.read_ahead, 1, 64, "read_ahead")
        day = 24 * 3600 * 1000
        _check_int(self.metadata_max_age_ms, 0, day, "metadata_max_age_ms", "0 and 24 h")


def _check_int(value: object, lo: int, hi: int, name: str, bounds: str = "") -> None:
    """Refuse anything but an int in [lo, hi]: a bool would pass as 0 or 1, a float
    or a string fail later, far from the cause (a float checkpoint_interval broke
    appends after their segment was written)."""
    if isinstance(value, bool) or not isinstance(value, int) or not lo <= value <= hi:
        raise InvalidConfigError(
            f"{name} must be an int between {bounds or f'{lo} and {hi}'}, got {value!r}"
        )
