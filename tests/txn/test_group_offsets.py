"""Consumer group offsets name the topic incarnation they were read in: a
topic deleted and created again under its name is a new log, and offsets read
in the old one are refused (``TopicRecreatedError``, nothing written), never
committed as positions in the new one."""

from __future__ import annotations

from collections.abc import Callable

import pyarrow as pa
import pytest

import arrowlog
from arrowlog import ArrowLog, LogConfig, TopicRecreatedError
from arrowlog.storage import Store
from arrowlog.storage.wrappers import CountingStore
from arrowlog.testing.scripted import ScriptedStore
from arrowlog.txn.groups import GROUPS_PREFIX, ConsumerGroupMetadata, GroupOffsets
from tests.support.schedules import Background

SCHEMA = pa.schema([("v", pa.int64())])
#: no wait before a deleted name is created again; every client reads the topic
#: anew at each lookup (as all do once metadata_max_age_ms has passed)
NOW = LogConfig(metadata_max_age_ms=0)


def rows(*values: int) -> pa.RecordBatch:
    return pa.record_batch({"v": list(values)}, schema=SCHEMA)


def recreate(admin: ArrowLog, topic: str, *values: int, partitions: int = 1) -> int:
    """Delete ``topic``, create it again and append ``values``: its new incarnation."""
    admin.delete_topic(topic)
    incarnation = admin.create_topic(topic, SCHEMA, partitions=partitions).incarnation
    if values:
        admin.append(topic, rows(*values))
    return incarnation


def group_log(store: Store, group: str = "g") -> list[str]:
    return sorted(o.key for o in store.list(f"{GROUPS_PREFIX}{group}/"))


def stored_offsets(log: ArrowLog, group: str = "g") -> dict[str, int]:
    """The group's latest entry as written: offsets by key (``t/0``, ``t=2/0``)."""
    return GroupOffsets(log.store, group, log.config.retry).latest().offsets


@pytest.fixture
def admin(make_log: Callable[..., ArrowLog]) -> ArrowLog:
    log = make_log(config=NOW)
    log.create_topic("t", SCHEMA)
    log.create_topic("u", SCHEMA)
    log.append("t", rows(0, 1, 2, 3, 4))
    log.append("u", rows(0, 1))
    return log


@pytest.fixture
def client(make_log: Callable[..., ArrowLog], admin: ArrowLog) -> ArrowLog:
    """The consumers' own client (not the one that re-creates the topic)."""
    return make_log(config=NOW)


def test_offsets_read_before_the_topic_was_created_again_are_refused(
    admin: ArrowLog, client: ArrowLog, store: Store
) -> None:
    """Read t (incarnation 0) and u, commit, t is deleted and created again
    and gets records: committing the offsets read raises, naming both
    incarnations, and writes nothing, not even u's offset (all or nothing);
    the new topic's position stays unset. Reading the new topic from its
    start, then committing, keeps the offset under the new incarnation."""
    consumer = client.consumer(group_id="g")
    assert consumer.read("t", 0).num_rows == 5 and consumer.read("u", 0).num_rows == 2
    consumer.commit({("t", 0): 2})  # before the re-creation: as always
    assert consumer.committed("t", 0) == 2
    assert recreate(admin, "t", 10, 11, 12) == 2
    before = group_log(store)
    with pytest.raises(TopicRecreatedError) as refused:
        consumer.commit({("u", 0): 2, ("t", 0): 5})
    assert (refused.value.topic, refused.value.recorded_incarnation) == ("t", 0)
    assert refused.value.incarnation == 2
    assert "incarnation 0" in str(refused.value) and "start=None" in str(refused.value)
    assert isinstance(refused.value, arrowlog.OffsetOutOfRangeError)
    assert group_log(store) == before
    assert consumer.committed("t", 0) is None and consumer.committed("u", 0) is None
    assert stored_offsets(client) == {"t/0": 2}

    # the way on: the new topic from its start
    assert consumer.read("t", 0)["v"].to_pylist() == [10, 11, 12]
    consumer.commit({("u", 0): 2, ("t", 0): 3})
    assert consumer.committed("t", 0) == 3 and consumer.committed("u", 0) == 2
    assert stored_offsets(client) == {"t/0": 2, "u/0": 2, "t=2/0": 3}


@pytest.mark.parametrize("how", ["read", "iter_batches", "read_snapshot", "iter_records"])
@pytest.mark.parametrize("isolation", ["read_committed", "read_uncommitted"])
def test_every_read_names_the_incarnation_it_read(
    admin: ArrowLog, client: ArrowLog, how: str, isolation: str
) -> None:
    consumer = client.consumer(group_id="g", isolation_level=isolation)  # type: ignore[arg-type]
    if how == "read":
        assert consumer.read("t", 0, start=1).num_rows == 4
    elif how == "iter_batches":
        assert sum(b.num_rows for b in consumer.iter_batches("t", 0, start=1)) == 4
    elif how == "read_snapshot":
        assert consumer.read_snapshot({("t", 0): (1, None)}).ends == {("t", 0): 5}
    else:
        assert sum(r.batch.num_rows for r in consumer.iter_records("t", 0, start=1)) == 4
    recreate(admin, "t", 10)
    with pytest.raises(TopicRecreatedError):
        consumer.commit({("t", 0): 5})
    assert consumer.committed("t", 0) is None
    assert consumer.group_metadata() == ConsumerGroupMetadata("g", {("t", 0): 0})


def test_a_read_of_the_new_topic_from_an_old_position_is_still_the_old_topics(
    admin: ArrowLog, client: ArrowLog
) -> None:
    """A consumer loop that carries its position across the re-creation reads
    the new topic from offset 5, skipping its first five records: what it
    commits then is refused, as the position came from the old log."""
    consumer = client.consumer(group_id="g")
    position = consumer.read("t", 0).num_rows
    recreate(admin, "t", *range(10, 18))
    assert consumer.read("t", 0, start=position)["v"].to_pylist() == [15, 16, 17]
    with pytest.raises(TopicRecreatedError):
        consumer.commit({("t", 0): 8})
    assert consumer.committed("t", 0) is None
    assert consumer.group_metadata().incarnations == {("t", 0): 0}
    assert consumer.read("t", 0, start=0).num_rows == 8  # from the start: the new log
    consumer.commit({("t", 0): 8})
    assert consumer.committed("t", 0) == 8


def test_a_consumer_whose_lookups_span_a_re_creation_commits_nothing(
    admin: ArrowLog, client: ArrowLog
) -> None:
    """Positions looked up in the old topic (the group's committed offset, the
    end offset) are positions in it: committing them after the re-creation
    raises. The group's committed offset of the new topic is unset."""
    admin.consumer(group_id="g").commit({("t", 0): 3})
    resuming = client.consumer(group_id="g")
    assert resuming.committed("t", 0) == 3
    ending = client.consumer(group_id="g")
    assert ending.end_offset("t", 0) == 5
    recreate(admin, "t", 10, 11, 12, 13, 14, 15)
    assert resuming.committed("t", 0) is None  # the new topic: no position yet
    for consumer, position in ((resuming, 4), (ending, 5)):
        with pytest.raises(TopicRecreatedError):
            consumer.commit({("t", 0): position})
    assert resuming.committed("t", 0) is None
    assert stored_offsets(client) == {"t/0": 3}


def test_offsets_obtained_elsewhere_are_in_the_topic_now_or_in_the_incarnation_given(
    admin: ArrowLog, client: ArrowLog, store: Store
) -> None:
    """A consumer that read nothing commits offsets as positions in the topic
    as it is now, or in the incarnation ``incarnations`` names: refused if
    that one is gone, ``InvalidConfigError`` if it never existed. Naming the
    new incarnation also moves a consumer that read the old one."""
    recreate(admin, "t", 10, 11, 12)
    elsewhere = client.consumer(group_id="g")
    elsewhere.commit({("t", 0): 1})
    assert stored_offsets(client) == {"t=2/0": 1}
    before = group_log(store)
    with pytest.raises(TopicRecreatedError, match="given as incarnation 0"):
        elsewhere.commit({("t", 0): 2}, incarnations={"t": 0})
    for bad in ({"t": 3}, {"t": -1}, {"t": True}, {"u": 0}):
        with pytest.raises(arrowlog.InvalidConfigError):
            elsewhere.commit({("t", 0): 2}, incarnations=bad)
    assert group_log(store) == before
    elsewhere.commit({("t", 0): 2}, incarnations={"t": 2})
    assert elsewhere.committed("t", 0) == 2

    reader = client.consumer(group_id="h")
    reader.read("t", 0)
    recreate(admin, "t", 20, 21)
    reader.read("t", 0, start=1)  # from another client's position in the new topic
    with pytest.raises(TopicRecreatedError):
        reader.commit({("t", 0): 2})
    reader.commit({("t", 0): 2}, incarnations={"t": 4})  # the caller says whose
    reader.commit({("t", 0): 2})  # and from then on the consumer is there
    assert reader.committed("t", 0) == 2 and stored_offsets(client, "h") == {"t=4/0": 2}


def test_a_topic_created_again_while_the_commit_is_written_keeps_the_offset_for_the_old_one(
    make_log: Callable[..., ArrowLog], store: Store
) -> None:
    """Schedule: the consumer's commit checks t (incarnation 0) and is held
    at its group-log write; t is deleted and created again; the write lands.
    The offset is kept under the incarnation checked, so the new topic's
    position stays unset."""
    admin = make_log(config=NOW)
    admin.create_topic("t", SCHEMA)
    admin.append("t", rows(0, 1, 2))
    scripted = ScriptedStore(store)
    consumer = arrowlog.connect(scripted, config=NOW).consumer(group_id="g")
    consumer.read("t", 0)
    gate = scripted.hold("put_if_absent", f"{GROUPS_PREFIX}g/*")
    commit = Background(lambda: consumer.commit({("t", 0): 3}))
    gate.wait_reached()
    recreate(admin, "t", 10, 11, 12, 13)
    gate.release()
    commit.result()
    assert stored_offsets(admin) == {"t/0": 3}
    assert admin.consumer(group_id="g").committed("t", 0) is None


def test_a_commit_after_a_read_costs_what_it_did(store: Store) -> None:
    """Naming the incarnation costs no request: the topic is looked up as it
    was before (cached), the group's log read and written as before."""
    log = arrowlog.connect(store)
    log.create_topic("t", SCHEMA)
    log.append("t", rows(0, 1, 2))
    counting = CountingStore(store)
    consumer = arrowlog.connect(counting).consumer(group_id="g")
    consumer.read("t", 0)
    consumer.commit({("t", 0): 1})  # the group's first entry
    counting.reset()
    consumer.commit({("t", 0): 3})
    assert dict(counting.counts) == {"list": 1, "get": 2, "put_if_absent": 1}
    assert consumer.committed("t", 0) == 3
