"""The index a compacted object carries (arrowlog.format.compacted_index): what it
holds reads back as written; a flipped byte, a lie about offsets or windows,
or a disagreement with the object's compaction table is a typed error, never
an index believed."""

from __future__ import annotations

import dataclasses
import json
from typing import Any

import pytest

from arrowlog import _checked_json
from arrowlog.errors import CorruptSegmentError
from arrowlog.format.checkpoint import SegmentSummary
from arrowlog.format.compacted_index import REFS_INDEX_VERSION, CompactedIndex
from arrowlog.format.segment import Compaction

KEY = "t/0/compacted/00000000000000000009-00000000000000000002.arrow"


def index() -> CompactedIndex:
    """[2, 9): a plain segment of two records, a transactional one and its
    COMMIT marker, an aborted one and its ABORT marker, a plain one; windows
    [0, 5), [5, 9) (the first holds the log start, 2, inside it)."""
    tx = SegmentSummary(0, 100, 1, 0, producer_id=5, producer_epoch=0, transactional_id="tx")

    def of_tx(base: int, ts: int, **fields: Any) -> SegmentSummary:
        return dataclasses.replace(tx, base=base, timestamp_ms=ts, **fields)

    segments = (
        SegmentSummary(2, 100, 2, 1000, append_id="a"),
        of_tx(4, 1001, base_sequence=0, transactional=True),
        of_tx(5, 1002, size=50, control_type="COMMIT", txn_bound=5),
        of_tx(6, 1003, base_sequence=1, transactional=True),
        of_tx(7, 1004, size=50, control_type="ABORT", txn_bound=7),
        SegmentSummary(8, 100, 1, 1005, append_id="b", stats={"v": [7, 7, 0]}),
    )
    return CompactedIndex(start=2, end=9, windows=((0, 5), (5, 9)), segments=segments)


TABLE = Compaction(2, 9, ((2, 2, 1000), (4, 1, 1001), (8, 1, 1005)))


def test_an_index_reads_back_as_written_without_column_statistics() -> None:
    written = index()
    read = CompactedIndex.from_json(written.to_json(), key=KEY, start=2, end=9)
    assert read.windows == written.windows
    assert read.segments == tuple(dataclasses.replace(s, stats=None) for s in written.segments)
    read.check_runs(TABLE, key=KEY)
    end, held = read.window(0) or (None, ())
    assert end == 5 and [s.base for s in held] == [2, 4]
    assert read.window(2) is None
    assert [s.base for s in read.from_offset(6)] == [6, 7, 8]
    assert read.from_offset(3) == () and read.from_offset(9) == ()


def test_every_flipped_byte_is_refused_with_the_object_named() -> None:
    raw = index().to_json()
    for at in range(len(raw)):
        bad = bytearray(raw)
        bad[at] ^= 0x01
        try:
            got = CompactedIndex.from_json(bytes(bad), key=KEY, start=2, end=9)
        except CorruptSegmentError as e:
            assert KEY in str(e)
            continue
        assert got == CompactedIndex.from_json(raw, key=KEY, start=2, end=9), at


def _rewritten(**changes: object) -> bytes:
    """The index with fields replaced, its checksum made valid again (a
    writer that lies, not a flipped bit)."""
    fields = json.loads(index().to_json())
    del fields["crc32c"]
    fields.update(changes)
    return _checked_json.dump(fields)


@pytest.mark.parametrize(
    "changes",
    [
        {"v": 3},  # a version no reader knows (2 holds commit objects)
        {"start": 3},
        {"windows": [[0, 5], [6, 9]]},  # a gap between windows
        {"windows": [[0, 3], [3, 9]]},  # a window ending inside a segment
        {"windows": [[0, 5]]},  # not reaching the end
        {"windows": [[4, 5], [5, 9]]},  # starting after the first segment
        {"windows": "nope"},
        {"segments": {"base": ["2"]}},
        {"segments": {}},
    ],
)
def test_an_index_that_lies_about_offsets_or_windows_is_refused(
    changes: dict[str, object],
) -> None:
    with pytest.raises(CorruptSegmentError, match=KEY):
        CompactedIndex.from_json(_rewritten(**changes), key=KEY, start=2, end=9)


def test_an_index_of_other_offsets_than_its_key_names_is_refused() -> None:
    with pytest.raises(CorruptSegmentError, match="does not describe"):
        CompactedIndex.from_json(index().to_json(), key=KEY, start=2, end=10)


@pytest.mark.parametrize(
    "runs",
    [
        ((4, 1, 1001), (8, 1, 1005)),  # plain records left out
        ((2, 2, 1000), (4, 1, 1001), (8, 1, 9)),  # another timestamp
        ((2, 1, 1000), (4, 1, 1001), (8, 1, 1005)),  # another count
        ((2, 2, 1000), (4, 1, 1001), (7, 1, 1004), (8, 1, 1005)),  # a marker kept
        ((2, 2, 1000), (3, 1, 1001), (8, 1, 1005)),  # a run of no segment
    ],
)
def test_an_index_that_disagrees_with_the_compaction_table_is_refused(
    runs: tuple[tuple[int, int, int], ...],
) -> None:
    """(Whether a transactional segment committed, the index cannot say: a
    table may keep its records or not.)"""
    for kept in (
        ((2, 2, 1000), (8, 1, 1005)),
        ((2, 2, 1000), (4, 1, 1001), (6, 1, 1003), (8, 1, 1005)),
    ):
        index().check_runs(Compaction(2, 9, kept), key=KEY)
    with pytest.raises(CorruptSegmentError, match=KEY):
        index().check_runs(Compaction(2, 9, runs), key=KEY)


def test_a_held_transactional_segment_is_named_with_whether_its_markers_commit_it() -> None:
    """The object holds only committed records: a transactional segment it
    holds a run for committed, and a reader rebuilding a window from the
    index must show it (docs/protocol.md, "A corrupt checkpoint after
    compaction"). The index says whether every marker of its transaction
    (producer and epoch) after it commits it; made committed, such a segment
    is one of no transaction, the rest unchanged."""
    two = index()  # every transaction has its own epoch: the aborted one, 1
    two = dataclasses.replace(two, segments=tuple(
        dataclasses.replace(s, producer_epoch=1) if s.base in (6, 7) else s for s in two.segments
    ))  # fmt: skip
    assert [(s.base, agree) for s, agree in two.held_transactional(TABLE)] == [(4, True)]
    both = Compaction(2, 9, ((2, 2, 1000), (4, 1, 1001), (6, 1, 1003), (8, 1, 1005)))
    held = two.held_transactional(both)
    assert [(s.base, agree) for s, agree in held] == [(4, True), (6, False)]  # 7 aborts it
    # one epoch for both: the ABORT at 7 comes after 4 too
    assert [agree for _, agree in index().held_transactional(both)] == [False, False]
    made = two.as_committed([6])
    assert [s.transactional for s in two.segments] == [False, True, False, True, False, False]
    assert [s.transactional for s in made.segments] == [False, True, False, False, False, False]
    assert made.segments[3] == dataclasses.replace(two.segments[3], transactional=False)
    assert made.segments[:3] == two.segments[:3] and made.windows == two.windows
    assert two.as_committed([]) == two


def commit_index() -> CompactedIndex:
    """[2, 9): a plain segment [2, 4), a commit object [4, 7) of two staged
    batches (one of an idempotent producer), a plain segment [7, 9); one
    window [0, 9) holding the log start, 2."""
    batches = (
        SegmentSummary(4, 300, 1, 2001, append_id="x", at="staged/0000000001/x.arrow"),
        SegmentSummary(5, 310, 2, 2002, producer_id=3, producer_epoch=0, base_sequence=7,
                       append_id="y", at="staged/0000000001/y.arrow"),
    )  # fmt: skip
    commit = SegmentSummary(4, 90, 3, 2003, append_id="c", refs=batches)
    segments = (
        SegmentSummary(2, 100, 2, 1000, append_id="a"),
        commit,
        SegmentSummary(7, 100, 2, 1005, append_id="b"),
    )
    return CompactedIndex(start=2, end=9, windows=((0, 9),), segments=segments)


def test_an_index_of_a_commit_object_reads_back_with_its_batches_and_their_objects() -> None:
    """A compacted object's index keeps the objects at segment keys as the
    checkpoints do: a commit with the staged batches it names (where each
    is, its offsets), so a window rebuilt from it is the checkpoint's; the
    object's runs are the batches'. Readers that predate commits refuse it
    by its version."""
    written = commit_index()
    raw = written.to_json()
    assert json.loads(raw)["v"] == REFS_INDEX_VERSION
    read = CompactedIndex.from_json(raw, key=KEY, start=2, end=9)
    assert read.segments == written.segments
    assert [b.at for b in read.segments[1].refs] == [
        "staged/0000000001/x.arrow", "staged/0000000001/y.arrow"
    ]  # fmt: skip
    runs = ((2, 2, 1000), (4, 1, 2001), (5, 2, 2002), (7, 2, 1005))
    read.check_runs(Compaction(2, 9, runs), key=KEY)
    with pytest.raises(CorruptSegmentError, match="disagree"):
        read.check_runs(Compaction(2, 9, ((2, 2, 1000), (4, 3, 2003), (7, 2, 1005))), key=KEY)
    end, held = read.window(0) or (None, ())
    assert end == 9 and [s.base for s in held] == [2, 4, 7]
