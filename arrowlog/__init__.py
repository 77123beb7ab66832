"""arrowlog: a transactional, columnar log that lives entirely in an object store."""

from arrowlog.admin import Admin, TransactionInfo
from arrowlog.config import Compression, LogConfig, RetryPolicy, TopicConfig
from arrowlog.errors import (
    AppendOutcomeUnknownError,
    ArrowLogError,
    ConcurrentTransactionsError,
    CorruptCheckpointError,
    CorruptObjectError,
    CorruptSegmentError,
    DuplicateSequenceError,
    ExportConflictError,
    ExportTableError,
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
    TopicRecreatedError,
    TransactionTimeoutError,
    TransientStoreError,
    UnknownColumnError,
    UnknownTopicOrPartitionError,
    UnstableOffsetCommitError,
    UnsupportedStoreError,
    UnsupportedTypeError,
)
from arrowlog.format.segment import SegmentHeader, WriterIdentity
from arrowlog.format.topic import Topic
from arrowlog.log.client import ArrowLog, PartitionInfo, TopicDescription, connect
from arrowlog.log.topics import TopicDeletion
from arrowlog.maintenance import Maintenance
from arrowlog.partition import AppendResult, PartitionLog, Removal
from arrowlog.producer import Producer, ProducerState
from arrowlog.read.consumer import Consumer
from arrowlog.read.topic_scan import TopicScan
from arrowlog.txn.coordinator import TxnState
from arrowlog.txn.groups import ConsumerGroupMetadata

__version__ = "0.1.0"

__all__ = [
    "Admin",
    "AppendOutcomeUnknownError",
    "AppendResult",
    "ArrowLog",
    "ArrowLogError",
    "Compression",
    "ConcurrentTransactionsError",
    "Consumer",
    "ConsumerGroupMetadata",
    "CorruptCheckpointError",
    "CorruptObjectError",
    "CorruptSegmentError",
    "DuplicateSequenceError",
    "ExportConflictError",
    "ExportTableError",
    "InvalidBatchError",
    "InvalidConfigError",
    "InvalidNameError",
    "InvalidPartitionsError",
    "InvalidTransactionTimeoutError",
    "InvalidTxnStateError",
    "LogConfig",
    "Maintenance",
    "OffsetMismatchError",
    "OffsetOutOfRangeError",
    "OutOfOrderSequenceError",
    "PartitionInfo",
    "PartitionLog",
    "Producer",
    "ProducerFencedError",
    "ProducerState",
    "RecordBatchTooLargeError",
    "Removal",
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
    "TopicRecreatedError",
    "TopicScan",
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
