"""arrowlog: a transactional, columnar log that lives entirely in an object store."""

from arrowlog.config import LogConfig, RetryPolicy, TopicConfig
from arrowlog.errors import (
    AppendOutcomeUnknownError,
    ArrowLogError,
    CorruptCheckpointError,
    CorruptObjectError,
    CorruptSegmentError,
    InvalidBatchError,
    InvalidConfigError,
    InvalidNameError,
    OffsetMismatchError,
    OffsetOutOfRangeError,
    RecordBatchTooLargeError,
    SchemaMismatchError,
    StoreError,
    TopicExistsError,
    TransientStoreError,
    UnknownTopicOrPartitionError,
    UnsupportedStoreError,
)
from arrowlog.log import ArrowLog, PartitionInfo, TopicDescription, connect
from arrowlog.partition import AppendResult, PartitionLog
from arrowlog.segment import SegmentHeader
from arrowlog.topic import Topic

__version__ = "0.1.0"

__all__ = [
    "AppendOutcomeUnknownError",
    "AppendResult",
    "ArrowLog",
    "ArrowLogError",
    "CorruptCheckpointError",
    "CorruptObjectError",
    "CorruptSegmentError",
    "InvalidBatchError",
    "InvalidConfigError",
    "InvalidNameError",
    "LogConfig",
    "OffsetMismatchError",
    "OffsetOutOfRangeError",
    "PartitionInfo",
    "PartitionLog",
    "RecordBatchTooLargeError",
    "RetryPolicy",
    "SchemaMismatchError",
    "SegmentHeader",
    "StoreError",
    "Topic",
    "TopicConfig",
    "TopicDescription",
    "TopicExistsError",
    "TransientStoreError",
    "UnknownTopicOrPartitionError",
    "UnsupportedStoreError",
    "__version__",
    "connect",
]
