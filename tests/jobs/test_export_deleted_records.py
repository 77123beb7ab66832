"""Both exports when records after the table's recorded offsets were deleted
(retention, ``delete_records``) before an export read them.

By default the export fails with OffsetOutOfRangeError and writes nothing: the
table would otherwise silently miss records. Asked to skip them
(``on_data_loss="skip"``, the command line's ``--skip-deleted``, Spark's
``failOnDataLoss=false``), it exports from the log start on, and the exports
after it go on as usual.
"""

from __future__ import annotations

import pytest

import arrowlog
from arrowlog.testing.scripted import ScriptedStore
from tests.support.exports import SCHEMA, Place, Run, Target, ids, rows


def test_records_deleted_before_their_export_fail_it_or_are_skipped_as_asked(
    place: Place, target: Target
) -> None:
    """10 records exported; 10 more appended, then every record before 15
    deleted (5 of them never exported). The next export fails and writes
    nothing; asked to skip, it exports 15..19 and records 20; then new records
    are exported as usual, also without the option."""
    log = place.spec.connect()
    log.create_topic("t", SCHEMA)
    log.append("t", rows(0, 10))
    assert target.export(log) == (10, {"0": 10}, 0)
    log.append("t", rows(10, 10))
    log.delete_records("t", 0, 15)
    with pytest.raises(arrowlog.OffsetOutOfRangeError, match="--skip-deleted"):
        target.export(log)
    assert target.rows() == ids(0, 10)
    assert target.export(log, on_data_loss="skip") == (5, {"0": 20}, 0)
    assert target.rows() == ids(0, 10) + [(0, o, o) for o in range(15, 20)]
    log.append("t", rows(20, 2))
    assert target.export(log) == (2, {"0": 22}, 0)
    assert target.export(log, on_data_loss="skip") == (0, {"0": 22}, 0)


def test_skipping_changes_nothing_while_no_record_was_lost(place: Place, target: Target) -> None:
    """Records deleted only below what was exported: both settings export the
    same rows."""
    log = place.spec.connect()
    log.create_topic("t", SCHEMA)
    log.append("t", rows(0, 10))
    target.export(log, on_data_loss="skip")
    log.delete_records("t", 0, 8)
    log.append("t", rows(10, 3))
    assert target.export(log) == (3, {"0": 13}, 0)
    log.append("t", rows(13, 3))
    assert target.export(log, on_data_loss="skip") == (3, {"0": 16}, 0)
    assert target.rows() == ids(0, 16)


def test_on_data_loss_takes_only_its_two_values_and_anything_else_writes_nothing(
    place: Place, target: Target
) -> None:
    log = place.spec.connect()
    log.create_topic("t", SCHEMA)
    log.append("t", rows(0, 3))
    with pytest.raises(arrowlog.InvalidConfigError, match="on_data_loss"):
        target.export(log, on_data_loss="restart")
    assert not target.exists()


@pytest.mark.parametrize("on_data_loss", ["fail", "skip"])
def test_a_segment_lost_above_the_log_start_is_corrupt_data_whatever_on_data_loss_says(
    place: Place, target: Target, on_data_loss: str
) -> None:
    """5 records exported; 5 more appended, one segment each. The next export
    is held at its first segment read while the segment of offset 7 is
    removed from the store, no record deleted (a lost object, not
    retention). Skipping deleted records never skips lost ones: the export
    fails with SegmentNotFoundError (corrupt data) and writes nothing."""
    log = place.spec.connect()
    log.create_topic("t", SCHEMA)
    log.append("t", rows(0, 5))
    target.export(log)
    for i in range(5, 10):
        log.append("t", rows(i, 1))
    store = ScriptedStore(place.spec.open())
    reading = store.hold("get", "t/0/segments/*.arrow")
    running = Run(
        "export", lambda: target.export(arrowlog.connect(store), on_data_loss=on_data_loss)
    )
    reading.wait_reached()
    lost = [i.key for i in store.inner.list("t/0/segments/") if i.key.endswith("07.arrow")]
    assert len(lost) == 1
    store.inner.delete(lost[0])
    reading.release()
    with pytest.raises(arrowlog.SegmentNotFoundError):
        running.result()
    assert target.rows() == ids(0, 5)
