"""The framing of a one-batch Arrow IPC file: where the schema message and the
footer lie, and the whole-file CRC32C found by its tag in both."""

from __future__ import annotations

import re
import struct

import crc32c

from arrowlog.errors import CorruptSegmentError

CRC_TAG = b"arrowlog-crc32c:"
CRC_PLACEHOLDER = b"--------"
CRC_VALUE = re.compile(re.escape(CRC_TAG) + rb"([0-9a-f]{8}|-{8})")
MAGIC = b"ARROW1"
CONTINUATION = 0xFFFFFFFF


def schema_region(data: bytes | bytearray | memoryview, key: str) -> tuple[int, int]:
    """The byte range of the schema message, from the first bytes alone."""
    if len(data) < 16 or data[:6] != MAGIC:
        raise CorruptSegmentError("not an Arrow IPC file", key=key)
    continuation, schema_len = struct.unpack_from("<Ii", data, 8)
    if continuation != CONTINUATION or not 0 < schema_len <= len(data) - 16:
        raise CorruptSegmentError("bad IPC framing", key=key)
    return 16, 16 + schema_len


def regions(
    data: bytes | bytearray | memoryview, key: str
) -> tuple[tuple[int, int], tuple[int, int]]:
    """The byte ranges of the schema message and of the footer, from the framing."""
    n = len(data)
    if n < 26 or data[:6] != MAGIC or data[-6:] != MAGIC:
        raise CorruptSegmentError(f"not an Arrow IPC file ({n} bytes; truncated?)", key=key)
    continuation, schema_len = struct.unpack_from("<Ii", data, 8)
    (footer_len,) = struct.unpack_from("<i", data, n - 10)
    schema_end = 16 + schema_len
    footer_start = n - 10 - footer_len
    if continuation != CONTINUATION or schema_len <= 0 or footer_len <= 0:
        raise CorruptSegmentError("bad IPC framing", key=key)
    if not schema_end <= footer_start < n - 10:
        raise CorruptSegmentError("bad IPC framing (overlapping regions)", key=key)
    return (16, schema_end), (footer_start, n - 10)


def crc_slots(data: bytes | bytearray | memoryview, key: str) -> tuple[int, int]:
    slots = []
    for lo, hi in regions(data, key):
        found = list(CRC_VALUE.finditer(data, lo, hi))
        if len(found) != 1:
            raise CorruptSegmentError("checksum field missing or repeated", key=key)
        slots.append(found[0].start(1))
    if data[slots[0] : slots[0] + 8] != data[slots[1] : slots[1] + 8]:
        raise CorruptSegmentError("checksum fields disagree", key=key)
    return slots[0], slots[1]


def file_crc(data: bytes | bytearray | memoryview, slots: tuple[int, int]) -> int:
    view = memoryview(data)
    a, b = slots
    crc = crc32c.crc32c(view[:a])
    crc = crc32c.crc32c(CRC_PLACEHOLDER, crc)
    crc = crc32c.crc32c(view[a + 8 : b], crc)
    crc = crc32c.crc32c(CRC_PLACEHOLDER, crc)
    return int(crc32c.crc32c(view[b + 8 :], crc))
