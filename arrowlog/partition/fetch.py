"""Fetching one segment: whole, or only some of its columns (the head, then
the columns' byte ranges), checked against what the index says it holds."""

from __future__ import annotations

import dataclasses
import os
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from typing import TypeVar

import pyarrow as pa

from arrowlog.config import Compression, RetryPolicy
from arrowlog.errors import CorruptSegmentError, SegmentNotFoundError
from arrowlog.format.segment import (
    HEAD_BYTES,
    RangeFetch,
    SegmentHeader,
    column_indices,
    decode_columns,
    decode_segment,
    head_length,
)
from arrowlog.format.topic import parse_staged_name
from arrowlog.partition.heads import HEADS
from arrowlog.storage import Blob, Store, get_range_tagged

#: segments at least this large are read column by column when a read names
#: columns: the head, then the frame and the columns' bytes in parallel ranged
#: GETs; smaller ones in one GET (two round trips cost more than their bytes)
COLUMN_READ_MIN_BYTES = 1024 * 1024

#: Segments that decode to less than this are decoded by the thread that reads
#: them, not by the threads that fetch them: a small segment's check and decode
#: are mostly Python, and eight threads taking turns at the GIL for them cost
#: more than one thread doing them all (measured: 64 KiB segments on SeaweedFS,
#: 20% less CPU and 8% faster). Larger ones are decoded where they are fetched,
#: in parallel: their CRC and decompression release the GIL.
DECODE_AHEAD_MIN_BYTES = 256 * 1024
#: what a compressed segment is assumed to decode to, per stored byte (ZSTD
#: shrinks the demo's events 16x, random floats hardly at all)
COMPRESSED_RATIO = 8


def decoded_where_fetched(size: int, compression: Compression) -> bool:
    """Whether a segment of ``size`` stored bytes is checked and decoded by the
    thread that fetched it (see :data:`DECODE_AHEAD_MIN_BYTES`)."""
    ratio = 1 if compression is Compression.NONE else COMPRESSED_RATIO
    return size * ratio >= DECODE_AHEAD_MIN_BYTES


def projected(schema: pa.Schema, columns: Sequence[str] | None) -> pa.Schema:
    """``schema`` with only ``columns``, in that order (all of it for None).

    Raises:
        UnknownColumnError: a name is not a column of the schema.
    """
    if columns is None:
        return schema
    fields = [schema.field(i) for i in column_indices(schema, columns)]
    return pa.schema(fields).with_metadata(schema.metadata or {})


def fetch_segment(
    store: Store,
    key: str,
    base: int,
    end: int,
    retry: RetryPolicy | None = None,
    schema: pa.Schema | None = None,
    *,
    columns: Sequence[str] | None = None,
    size: int | None = None,
    append_id: str | None = None,
) -> tuple[SegmentHeader, pa.RecordBatch]:
    """Read and check one segment that the index says holds ``[base, end)`` (and,
    given the topic's ``schema``, columns of that schema). With ``columns``, a
    data segment's batch holds only those; if the index says the segment has
    at least :data:`COLUMN_READ_MIN_BYTES` (``size``), only their bytes are
    fetched, and given the ``append_id`` the index names, a frame this process
    read before saves the head's round trip (:mod:`arrowlog.partition.heads`).

    Raises:
        CorruptSegmentError: checksum mismatch, offsets other than the index's,
            or columns other than the topic's.
        SegmentNotFoundError: the segment is gone.
        UnknownColumnError: ``columns`` names a column the segment lacks.
    """
    found = _fetch_object(store, key, (base, end), retry, columns, size, append_id)
    return check_segment(found, key, base, end, schema, columns)


def fetch_compacted(
    store: Store,
    key: str,
    start: int,
    end: int,
    retry: RetryPolicy | None = None,
    schema: pa.Schema | None = None,
    *,
    columns: Sequence[str] | None = None,
    size: int | None = None,
) -> tuple[SegmentHeader, pa.RecordBatch]:
    """Read and check a compacted object whose key says it holds ``[start,
    end)``: as :func:`fetch_segment` does a segment; its header's
    ``compaction`` says where each run of records lies in the batch.

    Raises:
        CorruptSegmentError: checksum mismatch, not a compacted object, or
            offsets other than its key's.
        SegmentNotFoundError: it is gone.
    """
    found = _fetch_object(store, key, (start, end), retry, columns, size)
    header = found[0]
    table = header.compaction
    if table is None or table.start != start or table.end != end:
        held = "no compaction table" if table is None else f"[{table.start}, {table.end})"
        raise CorruptSegmentError(
            f"compacted object holds {held}, its key says [{start}, {end})", key=key
        )
    return check_segment(found, key, header.base_offset, header.next_offset, schema, columns)


def _fetch_object(
    store: Store,
    key: str,
    offsets: tuple[int, int],
    retry: RetryPolicy | None,
    columns: Sequence[str] | None,
    size: int | None,
    append_id: str | None = None,
) -> tuple[SegmentHeader, pa.RecordBatch]:
    """A segment or compacted object decoded, unchecked against the index: only
    ``columns``' bytes of a large one, else the whole object."""
    retry = retry or RetryPolicy()
    found = None
    if columns is not None and size is not None and size >= COLUMN_READ_MIN_BYTES:
        found = _fetch_columns(store, key, size, columns, retry, offsets, append_id)
    if found is None:
        data = _get(retry, lambda: store.get(key), key, offsets)
        found = decode_segment(data, key=key, columns=columns)
    return found


def get_segment(store: Store, key: str, base: int, end: int, retry: RetryPolicy) -> Blob:
    """The whole object of a segment the index says holds ``[base, end)``,
    unchecked: :func:`decode_segment` then :func:`check_segment` check it.

    Raises:
        SegmentNotFoundError: the segment is gone.
    """
    return _get(retry, lambda: store.get(key), key, (base, end))


def check_segment(
    found: tuple[SegmentHeader, pa.RecordBatch],
    key: str,
    base: int,
    end: int,
    schema: pa.Schema | None,
    columns: Sequence[str] | None,
) -> tuple[SegmentHeader, pa.RecordBatch]:
    """``found``, if its offsets are the index's and (given the topic's
    ``schema``) its columns the topic's.

    Raises:
        CorruptSegmentError: they are not.
    """
    header, batch = found
    # control records (transaction markers) have a schema of their own
    if (
        schema is not None
        and not header.identity.control
        and not batch.schema.equals(projected(schema, columns), check_metadata=False)
    ):
        raise CorruptSegmentError(
            f"segment holds columns {batch.schema.types} where the topic has {schema.types}",
            key=key,
        )
    if header.refs is not None:
        raise CorruptSegmentError(
            "a commit object where the index says records are: its records are in the staged "
            "objects it names",
            key=key,
        )
    if header.staged != (parse_staged_name(key) is not None):
        raise CorruptSegmentError("a staged data object outside staged/, or the reverse", key=key)
    if header.staged and header.record_count == end - base:
        # a staged object's offsets are where the commit that names it put it
        header = dataclasses.replace(header, base_offset=base)
        found = (header, found[1])
    if header.base_offset != base or header.next_offset != end:
        raise CorruptSegmentError(
            f"segment holds [{header.base_offset}, {header.next_offset}), the log says "
            f"[{base}, {end})",
            key=key,
        )
    return found


_T = TypeVar("_T")


def _get(retry: RetryPolicy, request: Callable[[], _T], key: str, offsets: tuple[int, int]) -> _T:
    try:
        return retry.call(request)
    except FileNotFoundError:
        raise SegmentNotFoundError(
            f"segment missing: the log says it holds [{offsets[0]}, {offsets[1]}); "
            "its records are lost",
            key=key,
        ) from None


def _fetch_columns(
    store: Store,
    key: str,
    size: int,
    columns: Sequence[str],
    retry: RetryPolicy,
    offsets: tuple[int, int],
    append_id: str | None,
) -> tuple[SegmentHeader, pa.RecordBatch] | None:
    def one(span: tuple[int, int]) -> tuple[bytes, str | None]:
        return _get(retry, lambda: get_range_tagged(store, key, *span), key, offsets)

    def from_object(frame: bytes, tag: str | None) -> RangeFetch:
        """Fetches ranges in parallel, and makes sure they come from the object
        ``frame`` (its first bytes, tagged ``tag``) came from: a stray at a
        freed key may hold the very same column bytes under another header."""

        def fetch(spans: list[tuple[int, int]]) -> list[bytes]:
            got = list(_range_pool().map(one, spans))
            if tag is None:
                # No tags: the frame again, once the ranges are in. An object at
                # a key never changes, it is only replaced, and a replacement has
                # another header (its append id): the same frame after the ranges
                # means they came from the frame's object.
                if one((0, len(frame)))[0] != frame:
                    raise _AnotherObject
            elif any(t != tag for _, t in got):
                raise _AnotherObject
            return [data for data, _ in got]

        return fetch

    if append_id is not None and (kept := HEADS.get(key, append_id)) is not None:
        try:
            found = decode_columns(
                kept.frame, size, columns, from_object(kept.frame, kept.tag), key=key
            )
        except (CorruptSegmentError, _AnotherObject):
            found = None  # another object at the key now: read it as it is
        if found is not None:
            return found
        HEADS.drop(key, append_id)
    head, tag = one((0, min(size, HEAD_BYTES)))
    need = head_length(head, key)
    if need > len(head) and need <= size:  # a large schema message (a compaction table)
        head, tag = one((0, need))
    try:
        found = decode_columns(head, size, columns, from_object(bytes(head), tag), key=key)
    except _AnotherObject:
        return None  # the object at the key changed between the requests: read it whole
    if found is not None:
        HEADS.offer(key, found[0].append_id, head, tag)
    return found


class _AnotherObject(Exception):
    """The object at a key is not the one whose frame was kept."""


_pool: tuple[int, ThreadPoolExecutor] | None = None


def _range_pool() -> ThreadPoolExecutor:
    """One pool per process for the ranged GETs of column reads (a forked child
    makes its own: the parent's threads are not in it)."""
    global _pool
    if _pool is None or _pool[0] != os.getpid():
        _pool = (os.getpid(), ThreadPoolExecutor(8, thread_name_prefix="arrowlog-range"))
    return _pool[1]
