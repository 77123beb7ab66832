"""Control records: the COMMIT and ABORT markers a transaction leaves in each of
its partitions.

A marker is a segment of one record with its own small schema and the header's
``control`` flag set; its header's producer id and epoch are those of the
transaction it decides. Readers never return control records as data.
"""

from __future__ import annotations

import enum
from typing import Any

import pyarrow as pa

_FIELDS: list[pa.Field[Any]] = [
    pa.field("type", pa.string(), nullable=False),
    pa.field("coordinator_entry", pa.int64(), nullable=False),
]
CONTROL_SCHEMA = pa.schema(_FIELDS)


class ControlType(enum.Enum):
    COMMIT = "COMMIT"
    ABORT = "ABORT"


def marker_batch(kind: ControlType, coordinator_entry: int) -> pa.RecordBatch:
    return pa.record_batch(
        [pa.array([kind.value]), pa.array([coordinator_entry], pa.int64())], schema=CONTROL_SCHEMA
    )


def marker_type(batch: pa.RecordBatch) -> ControlType:
    return ControlType(batch.column(0)[0].as_py())
