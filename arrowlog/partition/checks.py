"""Checking a batch against its topic before anything is written for it."""

from __future__ import annotations

import pyarrow as pa

from arrowlog.config import Compression
from arrowlog.errors import InvalidBatchError, RecordBatchTooLargeError, SchemaMismatchError
from arrowlog.format.segment import empty_batch, one_batch, segment_size_floor
from arrowlog.format.topic import Topic, not_null_violations


def prepare_batch(topic: Topic, batch: pa.RecordBatch | pa.Table) -> pa.RecordBatch:
    """Check a batch against ``topic`` and return it as one record batch with
    the topic's exact schema.

    Every check here is cheap (no data is copied or encoded), so a producer can
    call this before it writes anything for the batch (a coordinator entry).

    Raises:
        InvalidBatchError: not Arrow data, or empty.
        SchemaMismatchError: columns, types or nullability differ from the
            topic, or a not-null column (or struct, list or map child) holds
            nulls.
        RecordBatchTooLargeError: the batch's segment would exceed the topic's
            ``max_batch_bytes`` (checked again, exactly, when it is encoded),
            or a table's columns do not fit one record batch.
    """
    if isinstance(batch, pa.Table):
        batch = one_batch(batch)
    if not isinstance(batch, pa.RecordBatch):
        raise InvalidBatchError(
            f"expected a pyarrow RecordBatch or Table, got {type(batch).__name__}"
        )
    schema = topic.schema
    if not batch.schema.equals(schema, check_metadata=False):
        raise SchemaMismatchError(_describe_mismatch(topic.name, schema, batch.schema))
    if batch.num_rows == 0:
        raise InvalidBatchError("empty batch: a segment holds at least one record")
    # Equal schemas say nothing of the data: nulls can sit under a not-null field.
    problems = not_null_violations(schema, batch)
    if problems:
        raise SchemaMismatchError(f"batch for topic {topic.name!r}: " + "; ".join(problems))
    batch = pa.RecordBatch.from_arrays(batch.columns, schema=schema)
    # compressed, the data may shrink to nearly nothing: only the segment's
    # frame is certain before encoding (check_fits and _encode do the rest)
    compressed = topic.config.compression is not Compression.NONE
    size = segment_size_floor(empty_batch(schema) if compressed else batch)
    limit = topic.config.max_batch_bytes
    if size > limit:
        raise RecordBatchTooLargeError(
            f"batch encodes to at least {size} bytes, over the topic's max_batch_bytes "
            f"({limit}); split it"
        )
    return batch


def _describe_mismatch(topic: str, want: pa.Schema, got: pa.Schema) -> str:
    problems = [
        f"duplicate column {n!r}" for n in dict.fromkeys(got.names) if got.names.count(n) > 1
    ]
    want_fields = {f.name: f for f in want}
    got_fields = {f.name: f for f in got}
    for name in want.names:
        if name not in got_fields:
            problems.append(f"missing column {name!r}")
        elif not got_fields[name].equals(want_fields[name]):
            problems.append(f"column {name!r} is {got_fields[name]}, topic has {want_fields[name]}")
    problems += [
        f"unexpected column {n!r}" for n in dict.fromkeys(got.names) if n not in want_fields
    ]
    if not problems and want.names != got.names:
        problems.append(f"column order {got.names} differs from the topic's {want.names}")
    return f"batch does not match the schema of topic {topic!r}: " + "; ".join(problems)
