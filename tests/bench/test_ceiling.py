"""The ceiling bench's ``checked`` read: the least a new client that keeps
arrowlog's checks does. It must refuse what arrowlog refuses, or the figure
it stands for would be a read that checks less."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from arrowlog.config import Compression
from arrowlog.errors import CorruptSegmentError
from bench.backend import Backend
from bench.core import make_batch, read_spec
from bench.sides import _reads


def _partition(root: Path, segments: int = 3) -> tuple[dict[str, Any], list[Path]]:
    backend = Backend("local", str(root), {"fsync": False}, {"kind": "local", "root": str(root)})
    spec = read_spec(backend, "t", make_batch(4096), segments, Compression.NONE)
    return spec, [root / key for key in spec["keys"]]


def test_the_checked_read_reads_every_record(tmp_path: Path) -> None:
    spec, _ = _partition(tmp_path)
    _reads(spec)["checked"]()  # asserts the count of rows itself


def test_the_checked_read_refuses_a_segment_whose_bytes_changed(tmp_path: Path) -> None:
    spec, files = _partition(tmp_path)
    data = bytearray(files[1].read_bytes())
    data[len(data) // 2] ^= 0xFF  # a value in the record batch's body
    files[1].write_bytes(bytes(data))
    with pytest.raises(CorruptSegmentError, match="checksum mismatch"):
        _reads(spec)["checked"]()


def test_the_checked_read_refuses_a_gap_in_the_offsets(tmp_path: Path) -> None:
    spec, files = _partition(tmp_path)
    files[1].unlink()
    with pytest.raises(CorruptSegmentError, match="the log says"):
        _reads(spec)["checked"]()
