"""Both exports after their topic was deleted and created again under its name.

The created topic is a new log (a new incarnation): its offset 0 is not the
old topic's offset 0. A table records the incarnation beside the offsets; an
export that finds an older one there refuses with TopicRecreatedError
(the default) or, asked to, exports the new topic from its start. Never the
new topic from the old offsets.

Found by an adversary: an export of 10 records, the topic deleted and created
again with 15: the next export started at offset 10 of the new topic, wrote 5
rows and raised nothing (offsets 0-9 of the new topic never reached the
table); with fewer than 10 records in the new topic it failed with
OffsetOutOfRangeError until the topic grew past 10, then skipped the gap.
"""

from __future__ import annotations

import pytest

import arrowlog
from tests.support.exports import SCHEMA, Place, Target, ids, rows

#: the client that deletes and creates the topic waits no grace before it
QUICK = arrowlog.LogConfig(metadata_max_age_ms=0)


def recreate(place: Place) -> tuple[arrowlog.ArrowLog, int]:
    """Delete topic ``t`` and create it again; the admin's log and the new
    topic's incarnation."""
    admin = place.spec.connect(config=QUICK)
    admin.delete_topic("t")
    return admin, admin.create_topic("t", SCHEMA).incarnation


def test_an_export_after_the_topic_was_created_again_refuses_or_restarts_as_asked(
    place: Place, target: Target
) -> None:
    """10 records exported; the topic deleted, created again, 15 records
    appended. The next export refuses (TopicRecreatedError naming the
    re-creation and --from-new-incarnation) and writes nothing; asked to
    restart, it exports the new topic's 15 records from offset 0; the export
    after that goes on in the new topic as usual."""
    admin = place.spec.connect(config=QUICK)
    admin.create_topic("t", SCHEMA)
    admin.append("t", rows(0, 10))
    exporter = place.spec.connect()  # one connection throughout: it held the old topic
    assert target.export(exporter) == (10, {"0": 10}, 0)

    admin, incarnation = recreate(place)
    assert incarnation > 0
    admin.append("t", rows(100, 15))
    with pytest.raises(arrowlog.TopicRecreatedError, match="--from-new-incarnation") as caught:
        target.export(exporter)
    assert (caught.value.recorded_incarnation, caught.value.incarnation) == (0, incarnation)
    assert "deleted and created again" in str(caught.value)
    assert target.rows() == ids(0, 10)  # nothing written

    assert target.export(exporter, on_recreated="restart") == (15, {"0": 15}, incarnation)
    assert target.rows() == sorted(ids(0, 10) + ids(100, 15))
    admin.append("t", rows(200, 2))
    assert target.export(exporter) == (2, {"0": 17}, incarnation)
    assert target.export(exporter) == (0, {"0": 17}, incarnation)
    assert target.rows() == sorted(ids(0, 10) + ids(100, 15) + [(0, 15, 200), (0, 16, 201)])


def test_a_shorter_topic_created_again_is_refused_until_asked_never_skipped(
    place: Place, target: Target
) -> None:
    """10 records exported; the topic created again with 3: the export
    refuses with TopicRecreatedError (not a bare range error); once the new
    topic has grown past 10 it still refuses (it would have skipped offsets
    0-9); asked to restart, it exports all 15 from offset 0."""
    admin = place.spec.connect(config=QUICK)
    admin.create_topic("t", SCHEMA)
    admin.append("t", rows(0, 10))
    exporter = place.spec.connect()
    target.export(exporter)

    admin, incarnation = recreate(place)
    admin.append("t", rows(100, 3))
    with pytest.raises(arrowlog.TopicRecreatedError):
        target.export(exporter)
    admin.append("t", rows(103, 12))
    with pytest.raises(arrowlog.TopicRecreatedError):
        target.export(place.spec.connect())  # a new connection finds the same
    assert target.rows() == ids(0, 10)
    assert target.export(exporter, on_recreated="restart") == (15, {"0": 15}, incarnation)
    assert target.rows() == sorted(ids(0, 10) + ids(100, 15))


def test_on_recreated_takes_only_its_two_values_and_anything_else_writes_nothing(
    place: Place, target: Target
) -> None:
    log = place.spec.connect()
    log.create_topic("t", SCHEMA)
    with pytest.raises(arrowlog.InvalidConfigError, match="on_recreated"):
        target.export(log, on_recreated="skip")
    assert not target.exists()
