"""Segments written by an earlier arrowlog stay readable with everything in them:
the golden files under jvm/src/test/resources/golden (written by the library,
read by the Java self-test too) decode here, with the column statistics that
reads prune by. A renamed metadata key reads as absent, silently: this is the
test that sees it in the fast tier."""

from __future__ import annotations

from pathlib import Path

import pyarrow as pa
import pytest

from arrowlog.format.segment import decode_segment
from arrowlog.format.segment.header import header_from_metadata

GOLDEN = Path(__file__).resolve().parents[2] / "jvm" / "src" / "test" / "resources" / "golden"


def _stats(data: bytes, key: str) -> dict[str, list[object]] | None:
    metadata = pa.ipc.open_file(pa.py_buffer(data)).schema.metadata
    return header_from_metadata(metadata, key).stats


@pytest.mark.parametrize("case", ["codec-none", "codec-lz4", "codec-zstd", "compacted"])
def test_a_golden_segment_decodes_with_its_column_statistics(case: str) -> None:
    paths = sorted((GOLDEN / case).glob("*/*/*.arrow"))
    assert paths
    for path in paths:
        data = path.read_bytes()
        header, batch = decode_segment(data, key=path.name)
        assert batch.num_rows == header.record_count > 0
        stats = _stats(data, path.name)
        assert stats, f"{path.name}: the statistics were not found under their key"
        assert set(stats) <= set(batch.schema.names)
