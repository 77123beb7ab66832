"""The one error hierarchy of arrowlog.

Every error a user can see is an :class:`ArrowLogError`. Each class says whether
retrying the same call may succeed (``retriable``); names follow Kafka's error
codes where one exists, so that users who know Kafka know what happened.

Storage-level "missing" and "already exists" stay the built-in
:class:`FileNotFoundError` and :class:`FileExistsError`: every backend maps its own
variants onto those two in one place (``arrowlog.storage``).
"""

from __future__ import annotations


class ArrowLogError(Exception):
    """Base class of every arrowlog error."""

    retriable: bool = False


# --- configuration and input -------------------------------------------------------


class InvalidNameError(ArrowLogError, ValueError):
    """A topic name, partition or object key is not allowed (it could escape the
    root prefix or collide with arrowlog's internal objects)."""


class InvalidConfigError(ArrowLogError, ValueError):
    """A configuration value or option is out of range or of the wrong kind."""


class UnsupportedStoreError(ArrowLogError):
    """The store cannot give the guarantees arrowlog relies on (atomic
    put-if-absent), or the URL names no known store."""


class UnsafeStoreError(UnsupportedStoreError):
    """``arrowlog doctor --record`` judged the store unsafe (a check it failed:
    put-if-absent not refused, two winners of a race, ...), so a topic is not
    created on it. ``failed`` names the failed checks; the message says how to
    override (``allow_unsafe_store=True``, ``--allow-unsafe-store``). Nothing
    was written."""

    def __init__(self, message: str, *, failed: tuple[str, ...]) -> None:
        super().__init__(message)
        self.failed = failed


class MissingDependencyError(ArrowLogError, ImportError):
    """A feature needs a package that is not installed; the message names the
    extra to install (``pip install 'arrowlog[s3]'``). An ImportError too, so
    code that probes for optional features with ``except ImportError`` works."""


class UnsupportedVersionError(ArrowLogError):
    """A message of a protocol version this side does not speak (Kafka's
    UNSUPPORTED_VERSION): the JVM reader's jar and the Python package come from
    different builds. The message names both versions; rebuild the jar with
    ``make setup``."""


class TopicExistsError(ArrowLogError):
    """``create_topic`` found a topic of that name already."""


class UnknownTopicOrPartitionError(ArrowLogError):
    """The topic does not exist, or it has no such partition."""


class InvalidPartitionsError(ArrowLogError, ValueError):
    """``create_partitions`` asked for a total that is not above the topic's
    current partition count (Kafka's INVALID_PARTITIONS), or above the limit.
    Nothing was written."""


class SchemaMismatchError(ArrowLogError):
    """A batch's schema differs from its topic's schema. Nothing was written."""


class UnsupportedTypeError(ArrowLogError, TypeError):
    """A column's type has no counterpart in the table format an export writes
    that holds its values without loss (Iceberg: nanosecond timestamps,
    durations, ...). Nothing was written."""


class UnknownColumnError(ArrowLogError, ValueError):
    """A read names a column its topic does not have (or none, or one twice).
    Nothing was read."""


class InvalidBatchError(ArrowLogError):
    """A batch is empty, too large, or not a record batch. Nothing was written."""


class RecordBatchTooLargeError(InvalidBatchError):
    """A batch's encoded segment exceeds the topic's ``max_batch_bytes``."""


class OffsetOutOfRangeError(ArrowLogError):
    """A read asked for offsets below the log start or beyond the log end."""


class TopicRecreatedError(OffsetOutOfRangeError):
    """Offsets kept outside the log (an export's table, a consumer group's
    position, offsets sent in a transaction) were read in a topic that has
    been deleted since; the topic of that name now is another incarnation, a
    new log whose offsets name other records. Taking the old offsets as
    positions in it would skip its first records (or fail as out of range).
    Nothing was written; the message says how to choose: read (or export) the
    new topic from its start, or keep the old offsets for the old topic. An
    :class:`OffsetOutOfRangeError` too: what was not read of the old topic is
    gone, as after records were deleted.

    ``topic``; ``recorded_incarnation``, the incarnation the offsets were read
    in; ``incarnation``, the topic's now."""

    def __init__(
        self, message: str, *, topic: str, recorded_incarnation: int, incarnation: int
    ) -> None:
        super().__init__(message)
        self.topic = topic
        self.recorded_incarnation = recorded_incarnation
        self.incarnation = incarnation


# --- the log protocol --------------------------------------------------------------


class OffsetMismatchError(ArrowLogError):
    """An append with an ``expected_offset`` (KIP-27) did not land there because
    the log ends elsewhere. Nothing was written; ``log_end_offset`` is the end the
    log really has, so a loader can resume from it."""

    def __init__(self, message: str, *, expected_offset: int, log_end_offset: int) -> None:
        super().__init__(message)
        self.expected_offset = expected_offset
        self.log_end_offset = log_end_offset


class CorruptObjectError(ArrowLogError):
    """A stored object fails its checksum, is truncated or unparsable. ``key``
    names the object; it is never skipped silently."""

    def __init__(self, message: str, *, key: str) -> None:
        super().__init__(f"{key}: {message}")
        self.key = key


class CorruptSegmentError(CorruptObjectError):
    """A segment is not a valid arrowlog segment, or does not fit the log."""


class SegmentNotFoundError(CorruptSegmentError):
    """A segment that the log's index (a checkpoint, or a segment end a client
    knew) says exists is gone: its records were lost, deleted by hand or by a
    store lifecycle rule. ``key`` names it. Not retriable: it will not come back."""


class CorruptCheckpointError(CorruptObjectError):
    """A checkpoint is unreadable or inconsistent with the log."""


# --- the store ---------------------------------------------------------------------


class StoreError(ArrowLogError):
    """The object store failed a request."""


class TransientStoreError(StoreError):
    """A request failed in a way that may pass on retry (throttling, 5xx, timeout,
    connection reset).

    ``maybe_applied`` tells whether the store may have carried out the request
    anyway (a lost reply). A write that failed that way must be resolved by reading
    back, never by a blind retry.
    """

    retriable = True

    def __init__(self, message: str, *, maybe_applied: bool) -> None:
        super().__init__(message)
        self.maybe_applied = maybe_applied


class StoreUnreachableError(StoreError):
    """The doctor could not examine the URL as a store at all: the endpoint is
    not reachable, is no object store (a plain web server), or has no such
    bucket or container, or it refused access. Nothing was written."""


class AppendOutcomeUnknownError(StoreError):
    """An append's last attempt may or may not have landed, and the deadline ran
    out before reading back could tell. Do not retry blindly: reopen the partition
    and look at what sits at ``offset`` (an expected-offset append is safe to
    retry as is: it lands at most once)."""

    retriable = True

    def __init__(self, message: str, *, offset: int) -> None:
        super().__init__(message)
        self.offset = offset


# --- producers and transactions (KIP-98) -------------------------------------------


class ProducerFencedError(ArrowLogError):
    """A newer instance with the same transactional id has initialised (or the
    transaction was expired): this producer can never write a coordinator entry
    again. Fatal: close the producer."""


class OutOfOrderSequenceError(ArrowLogError):
    """A batch's sequence number leaves a gap after the producer's last batch in
    that partition: data would be lost. Fatal. Nothing was written."""


class DuplicateSequenceError(ArrowLogError):
    """A batch's sequence number is older than the producer's latest batch in that
    partition: it was written before. Nothing was written. (A retry of the latest
    batch itself is not an error: it returns the original offset.)"""


class InvalidTxnStateError(ArrowLogError):
    """The call is not allowed in the producer's current transaction state (commit
    without begin, send after a fatal error, begin twice, ...). Nothing was
    written."""


class TransactionTimeoutError(ArrowLogError):
    """The transaction ran longer than its timeout and was (or may be) expired and
    aborted by another client. Abort it and start again."""

    retriable = True


class InvalidTransactionTimeoutError(InvalidConfigError):
    """A producer asked for a transaction timeout above the topic's or the log's
    maximum."""


class UnstableOffsetCommitError(ArrowLogError):
    """A consumer group's position for some partitions waits on a transaction
    that is not decided yet (KIP-447): a consumer that went ahead from the old
    position could duplicate what the transaction may still commit. Retry once
    it ends (or expires). ``partitions`` names the unstable (topic, partition)s."""

    retriable = True

    def __init__(self, message: str, *, partitions: set[tuple[str, int]]) -> None:
        super().__init__(message)
        self.partitions = partitions


class ExportConflictError(ArrowLogError):
    """An export's table commit lost the race to other exports of the same
    topic into the table too many times in a row (each lost race means another
    export's commit landed). Nothing of this run was committed; run the export
    again: it exports only what the table does not record yet. The table
    library's last conflict is ``__cause__``."""

    retriable = True


class ExportTableError(ArrowLogError):
    """The table an export writes (Delta through delta-rs, Iceberg through
    pyiceberg) failed for another reason than a lost commit race
    (:class:`ExportConflictError`), its columns (:class:`SchemaMismatchError`)
    or a type (:class:`UnsupportedTypeError`): the table's store or catalog
    failed or refused a request, the table needs features its library lacks, a
    path holds no table where one was found before. The library's error is
    ``__cause__``. ``retriable`` tells whether the same export may succeed
    when run again as it is (a catalog or service that was unavailable), not
    for a refusal. Whatever failed, the commit is the only point at which a
    range counts as exported: a rerun reads what the table records and never
    exports a range twice."""

    def __init__(self, message: str, *, retriable: bool = False) -> None:
        super().__init__(message)
        self.retriable = retriable


class ConcurrentTransactionsError(ArrowLogError):
    """Another client changed the transactional id's coordinator log at the same
    moment (for example while expiring a transaction). Retry the call."""

    retriable = True
