"""arrowlog: a transactional, columnar log that lives entirely in an object store."""

from arrowlog.admin import TransactionInfo
from arrowlog.config import Compression, LogConfig, RetryPolicy, TopicConfig
from arrowlog.consumer import Consumer
from arrowlog.coordinator import TxnState
from arrowlog.errors import (
    AppendOutcomeUnknownError,
    ArrowLogError,
    ConcurrentTransactionsError,
    CorruptCheckpointError,
    CorruptObjectError,
    CorruptSegmentError,
    DuplicateSequenceError,
    ExportConflictError,
    InvalidBatchError,
    InvalidConfigError,
    InvalidNameError,
    InvalidPartitionsError,
    InvalidTransactionTimeoutError,
    InvalidTxnStateError,
    OffsetMismatchError,
    OffsetOutOfRangeError,
    OutOfOrderSequenceError,
    ProducerFencedError,
    RecordBatchTooLargeError,
    SchemaMismatchError,
    SegmentNotFoundError,
    StoreError,
    TopicExistsError,
    TransactionTimeoutError,
    TransientStoreError,
    UnknownColumnError,
    UnknownTopicOrPartitionError,
    UnstableOffsetCommitError,
    UnsupportedStoreError,
    UnsupportedTypeError,
)
from arrowlog.log import ArrowLog, PartitionInfo, TopicDescription, connect
from arrowlog.partition import AppendResult, PartitionLog
from arrowlog.producer import Producer, ProducerState
from arrowlog.segment import SegmentHeader, WriterIdentity
from arrowlog.topic import Topic
from arrowlog.topic_changes import TopicDeletion

__version__ = "0.1.0"

__all__ = [
    "AppendOutcomeUnknownError",
    "AppendResult",
    "ArrowLog",
    "ArrowLogError",
    "Compression",
    "ConcurrentTransactionsError",
    "Consumer",
    "CorruptCheckpointError",
    "CorruptObjectError",
    "CorruptSegmentError",
    "DuplicateSequenceError",
    "ExportConflictError",
    "InvalidBatchError",
    "InvalidConfigError",
    "InvalidNameError",
    "InvalidPartitionsError",
    "InvalidTransactionTimeoutError",
    "InvalidTxnStateError",
    "LogConfig",
    "OffsetMismatchError",
    "OffsetOutOfRangeError",
    "OutOfOrderSequenceError",
    "PartitionInfo",
    "PartitionLog",
    "Producer",
    "ProducerFencedError",
    "ProducerState",
    "RecordBatchTooLargeError",
    "RetryPolicy",
    "SchemaMismatchError",
    "SegmentHeader",
    "SegmentNotFoundError",
    "StoreError",
    "Topic",
    "TopicConfig",
    "TopicDeletion",
    "TopicDescription",
    "TopicExistsError",
    "TransactionInfo",
    "TransactionTimeoutError",
    "TransientStoreError",
    "TxnState",
    "UnknownColumnError",
    "UnknownTopicOrPartitionError",
    "UnstableOffsetCommitError",
    "UnsupportedStoreError",
    "UnsupportedTypeError",
    "WriterIdentity",
    "__version__",
    "connect",
]
