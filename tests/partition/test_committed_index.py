"""The committed index (partition.known.CommittedIndex): which staged
objects the chain a process followed commits, and from which offset on it
knows that; pruned by halves, never claiming to know what it dropped."""

from __future__ import annotations

import pytest

from arrowlog.format.checkpoint import SegmentSummary
from arrowlog.partition.known import CommittedIndex


def commit(base: int, *ats: str) -> SegmentSummary:
    refs = tuple(
        SegmentSummary(base=base + i, size=1, record_count=1, timestamp_ms=0, at=at)
        for i, at in enumerate(ats)
    )
    return SegmentSummary(base=base, size=1, record_count=len(ats), timestamp_ms=0, refs=refs)


def test_it_knows_each_staged_object_a_commit_names_at_its_offset() -> None:
    index = CommittedIndex()
    index.add(SegmentSummary(base=4, size=1, record_count=1, timestamp_ms=0))
    index.add(commit(5, "staged/a", "staged/b"))
    assert (index.since, index.at) == (4, {"staged/a": 5, "staged/b": 6})


def test_pruned_it_knows_from_a_later_offset_and_forgets_what_it_dropped(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(CommittedIndex, "KEPT", 4)
    index = CommittedIndex()
    for base in range(5):
        index.add(commit(base, f"staged/{base}"))
    assert index.since == 2
    assert index.at == {"staged/2": 2, "staged/3": 3, "staged/4": 4}
