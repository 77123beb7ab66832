"""JSON objects that carry their own CRC32C (checkpoints, topic configs).

A flipped digit in a checkpoint's ``end`` would make a writer believe a segment
ends where none does, and write there: every JSON object a writer trusts is
therefore checksummed like a segment header.
"""

from __future__ import annotations

import json
from typing import Any

import crc32c

from arrowlog.errors import CorruptObjectError

_CRC = "crc32c"


def _canonical(fields: dict[str, Any]) -> bytes:
    return json.dumps(fields, sort_keys=True, separators=(",", ":")).encode()


def dump(fields: dict[str, Any]) -> bytes:
    """Serialise ``fields`` with a ``crc32c`` entry over their canonical JSON."""
    return _canonical({**fields, _CRC: f"{crc32c.crc32c(_canonical(fields)):08x}"})


def load(raw: bytes | memoryview, *, key: str, error: type[CorruptObjectError]) -> dict[str, Any]:
    """Parse and verify what :func:`dump` wrote.

    Raises:
        error: not JSON, no checksum, or a checksum mismatch.
    """
    try:
        fields = json.loads(bytes(raw))
        stored = fields.pop(_CRC)
    except (ValueError, TypeError, KeyError, AttributeError) as e:
        raise error(f"unreadable object: {e}", key=key) from e
    if not isinstance(fields, dict) or stored != f"{crc32c.crc32c(_canonical(fields)):08x}":
        raise error("checksum mismatch", key=key)
    return fields
