"""What each operation costs in store requests, counted by an instrumented store."""

from __future__ import annotations

import time

import pyarrow as pa
import pytest

import arrowlog
from arrowlog import TopicConfig
from arrowlog.format.topic import STAGED_FOLDER_MS
from arrowlog.storage import Store
from arrowlog.storage.local import LocalStore
from arrowlog.storage.memory import MemoryStore
from arrowlog.storage.wrappers import CountingStore
from tests.support.clocks import Clocks, ClockStore

SCHEMA = pa.schema([("x", pa.int64())])


def one(i: int) -> pa.RecordBatch:
    return pa.record_batch({"x": [i, i]}, schema=SCHEMA)


def test_a_steady_state_append_costs_exactly_one_request(store: Store, now: list[float]) -> None:
    counting = CountingStore(store)
    log = arrowlog.connect(counting)
    log.create_topic("t", SCHEMA, config=TopicConfig(checkpoint_interval=10))
    log.append("t", one(0))  # opens the partition
    counting.reset()
    for i in range(1, 9):
        log.append("t", one(i))
    assert counting.counts == {"put_if_absent": 8}
    counting.reset()
    log.append("t", one(9))  # completes a window: the segment, then its checkpoint
    assert counting.counts == {"put_if_absent": 2}
    counting.reset()
    log.append("t", one(10), expected_offset=20)  # a right expected offset costs nothing more
    assert counting.counts == {"put_if_absent": 1}


def test_an_idempotent_window_costs_one_head_more_to_date_producer_state(
    store: Store, now: list[float]
) -> None:
    """An idempotent producer's sends cost one PUT each; the send that
    completes a window also puts its checkpoint and HEADs its own segment:
    the store's time of the batches the checkpoint's producer state holds
    (their expiry is measured on it, never on the producer's clock)."""
    counting = CountingStore(store)
    log = arrowlog.connect(counting)
    log.create_topic("t", SCHEMA, config=TopicConfig(checkpoint_interval=10))
    p = log.producer()
    p.send("t", one(0))  # opens the partition, claims a producer id
    p.flush()
    counting.reset()
    for i in range(1, 9):
        p.send("t", one(i))
    p.flush()
    assert counting.counts == {"put_if_absent": 8}
    counting.reset()
    p.send("t", one(9))
    p.flush()
    assert counting.counts == {"put_if_absent": 2, "head": 1}


def _log_with_segments(store: Store, segments: int) -> None:
    log = arrowlog.connect(store)
    log.create_topic("t", SCHEMA, config=TopicConfig(checkpoint_interval=100))
    part = log.partition("t", 0)
    for i in range(segments):
        part.append(one(i))


def _open_cost(store: Store) -> tuple[dict[str, int], int]:
    counting = CountingStore(store)
    end = arrowlog.connect(counting).end_offsets("t")[0]
    return dict(counting.counts), end


@pytest.mark.slow
@pytest.mark.parametrize("backend", ["memory", "local"])
def test_opening_a_partition_costs_the_same_for_any_history(backend: str, tmp_path: object) -> None:
    costs = []
    for segments in (1_037, 10_037):  # 37 segments of tail after the last checkpoint
        store: Store = (
            MemoryStore()
            if backend == "memory"
            else LocalStore(f"{tmp_path}/{segments}", fsync=False)
        )
        _log_with_segments(store, segments)
        cost, end = _open_cost(store)
        assert end == 2 * segments
        costs.append(cost)
    # topic config + newest checkpoint (GET), checkpoint list + tail list (LIST),
    # the header of each of the 37 segments after the checkpoint (ranged GET: a
    # listing is not a snapshot, each link of the chain needs the header before
    # it): independent of the 10x longer history.
    assert costs[0] == costs[1] == {"get": 2, "list": 2, "get_range": 37}


def test_a_sync_costs_one_list_plus_one_header_per_new_segment(store: Store) -> None:
    writer = arrowlog.connect(store)
    writer.create_topic("t", SCHEMA, config=TopicConfig(checkpoint_interval=10))
    counting = CountingStore(store)
    reader = arrowlog.connect(counting).partition("t", 0)
    assert reader.end_offset() == 0
    for i in range(5):
        writer.append("t", one(i))
    counting.reset()
    assert reader.end_offset() == 10
    assert counting.counts == {"list": 1, "get_range": 5}
    counting.reset()
    assert reader.end_offset() == 10  # nothing new: the LIST only
    reader.state()
    assert [s.base for s in reader.summaries()] == [0, 2, 4, 6, 8]  # headers kept
    assert counting.counts == {"list": 3}
    counting.reset()
    for i in range(5, 10):  # it completes the window, knowing every header
        reader.append(one(i))
    assert counting.counts == {"put_if_absent": 6}


def test_a_sync_that_completes_a_window_costs_one_get_of_its_checkpoint(store: Store) -> None:
    """A client that only reads starts its tail after the windows others
    checkpointed (so it holds no more than a window): a sync that completes a
    window GETs that window's checkpoint, once. While the checkpoint is not
    written yet (here: its writer cannot ask the coordinator about an open
    transaction), each sync that grows the tail asks again, and a sync that
    finds nothing new asks nothing."""
    from arrowlog.format.checkpoint import Decision
    from arrowlog.format.segment import WriterIdentity

    writer = arrowlog.connect(store)
    topic = writer.create_topic("t", SCHEMA, config=TopicConfig(checkpoint_interval=10))
    counting = CountingStore(store)
    reader = arrowlog.connect(counting).partition("t", 0)
    assert reader.end_offset() == 0
    for i in range(8):
        writer.append("t", one(i))
    assert reader.end_offset() == 16
    counting.reset()
    for i in range(8, 12):  # completes the window [0, 20), then two more
        writer.append("t", one(i))
    assert reader.end_offset() == 24
    assert counting.counts == {"list": 1, "get_range": 4, "get": 1}
    counting.reset()
    reader.state()
    assert reader.end_offset() == 24
    assert counting.counts == {"list": 2}

    coordinator = {"up": False}

    def decide(txn: object) -> Decision:
        if not coordinator["up"]:
            raise arrowlog.TransientStoreError("coordinator unreachable", maybe_applied=False)
        return Decision.UNDECIDED

    late = arrowlog.PartitionLog(store, topic, 0, writer.config, decide=decide)
    txn = WriterIdentity(producer_id=5, producer_epoch=0, base_sequence=0, transactional=True,
                         transactional_id="x")  # fmt: skip
    late.append(one(12), identity=txn)
    for i in range(13, 21):  # completes the window [20, 40): its checkpoint is not written
        late.append(one(i))
    counting.reset()
    assert reader.end_offset() == 42
    assert counting.counts == {"list": 1, "get_range": 9, "get": 1}  # not there
    counting.reset()
    assert reader.end_offset() == 42
    assert counting.counts == {"list": 1}  # nothing new: nothing asked
    coordinator["up"] = True
    late.append(one(21))  # writes the checkpoint it owes
    counting.reset()
    assert reader.end_offset() == 44
    assert counting.counts == {"list": 1, "get_range": 1, "get": 1}
    assert len(reader._summaries) == 2  # from 40 on: both windows' checkpoints were read
    counting.reset()
    reader.state()
    assert reader.end_offset() == 44
    assert counting.counts == {"list": 2}
    assert reader.summaries(40) == arrowlog.connect(store).partition("t", 0).summaries(40)


@pytest.mark.slow
def test_reading_old_offsets_costs_one_lookup_plus_the_segments() -> None:
    store = MemoryStore()
    _log_with_segments(store, 2_050)
    counting = CountingStore(store)
    log = arrowlog.connect(counting)
    part = log.partition("t", 0)
    part.end_offset()
    counting.reset()
    table = part.read(1_000, 1_010)  # offsets 1000..1009 = segments 500..504
    assert table["x"].to_pylist() == [500, 500, 501, 501, 502, 502, 503, 503, 504, 504]
    # one LIST to find the checkpoint covering offset 1000, one GET of it, and one
    # GET per segment read
    assert dict(counting.counts) == {"list": 1, "get": 1 + 5}


def test_a_second_long_read_fetches_no_checkpoint_again(store: Store) -> None:
    """Checkpoints never change once written: a client reads each window once.
    A topic deleted and created anew has keys of its own, and is read afresh."""
    quick = arrowlog.LogConfig(metadata_max_age_ms=0)  # no grace before re-creating
    log = arrowlog.connect(store, config=quick)
    log.create_topic("t", SCHEMA, config=TopicConfig(checkpoint_interval=5))
    for i in range(23):
        log.append("t", one(i))
    counting = CountingStore(store)
    reader = arrowlog.connect(counting, config=quick)

    def checkpoints_read() -> int:
        return sum(n for k, n in counting.keys_read.items() if "/checkpoints/" in k)

    assert reader.read("t").num_rows == 46
    assert checkpoints_read() >= 4  # the four windows, once
    counting.reset()
    assert reader.read("t").num_rows == 46
    assert checkpoints_read() == 0
    segments = sum(n for k, n in counting.keys_read.items() if "/segments/" in k)
    assert segments == 23  # the segments themselves, every time
    log.delete_topic("t")
    assert log.reuse_wait("t") == 0
    log.create_topic("t", SCHEMA, config=TopicConfig(checkpoint_interval=5))
    for i in range(12):
        log.append("t", one(100 + i))
    fresh = reader.consumer(isolation_level="read_uncommitted")
    assert fresh.read("t")["x"].to_pylist() == [v for i in range(12) for v in (100 + i,) * 2]


# --- a topic changed many times ---------------------------------------------------------

ALTERS = 300


def _open_listing_cost(store: Store) -> tuple[dict[str, int], int]:
    """What a fresh client's opening costs, and how many objects its listings
    return (S3 answers a LIST with at most 1,000)."""
    counting = CountingStore(store)
    assert arrowlog.connect(counting).end_offsets("t") == {0: 10}
    return dict(counting.counts), counting.objects_listed


def test_opening_after_300_retention_alters_costs_two_gets_more_and_lists_one_announcement(
    store: Store, monkeypatch: pytest.MonkeyPatch
) -> None:
    """An operator's automation alters retention 300 times (hourly, for under
    two weeks). Opening a partition then costs what it did plus a GET of the
    newest version and one finding no next (not one GET per version), and once
    a vacuum ran, its tail listing returns one announcement (not 300). Before,
    a fresh client read versions 0..300 one GET each, and every listing of
    the tail returned all 300 announcements (no vacuum removed them)."""
    clock = ClockStore(store)
    clocks = Clocks(clock, monkeypatch)
    log = arrowlog.connect(clock)
    log.create_topic("t", SCHEMA, config=TopicConfig(checkpoint_interval=2))
    for i in range(5):
        log.append("t", one(i))
    before, listed_before = _open_listing_cost(clock)
    assert before == {"get": 2, "list": 2, "get_range": 1}  # version 0, checkpoint; tail
    for i in range(ALTERS):
        log.alter_topic_config("t", retention_ms=3_600_000 + i)
    after, listed_after = _open_listing_cost(clock)
    assert after == {**before, "get": before["get"] + 2}  # version 300, no version 301
    assert listed_after == listed_before + ALTERS  # every announcement, until a vacuum
    clocks.advance(TopicConfig().delete_delay_ms + 2_000)
    removed = [r.key for r in log.maintenance.vacuum() if "/topic-version-" in r.key]
    assert len(removed) == ALTERS - 1
    vacuumed, listed_vacuumed = _open_listing_cost(clock)
    assert vacuumed == after
    assert listed_vacuumed == listed_before + 1  # the newest announcement stays


def test_a_change_costs_the_same_however_many_came_before() -> None:
    """Altering a topic reads its chain from the version its client holds:
    the 300th alter costs what the 2nd did (before, it read every version
    from version 0: one GET more per change before it)."""
    store = MemoryStore()
    counting = CountingStore(store)
    log = arrowlog.connect(counting)
    log.create_topic("t", SCHEMA)

    def alter(i: int) -> dict[str, int]:
        counting.reset()
        log.alter_topic_config("t", retention_ms=3_600_000 + i)
        return dict(counting.counts)

    second = [alter(i) for i in range(2)][-1]
    for i in range(2, ALTERS - 1):
        alter(i)
    assert alter(ALTERS) == second == {"get": 1, "put_if_absent": 2}
    fresh = CountingStore(store)
    arrowlog.connect(fresh).alter_topic_config("t", retention_ms=1)
    # versions 0 and 1, a LIST of the versions after 1, the newest, no next;
    # the announcement and the claim
    assert dict(fresh.counts) == {"get": 4, "list": 1, "put_if_absent": 2}


def test_a_staged_append_lists_the_batches_that_wait_not_those_committed_in_the_last_second() -> (
    None
):
    """A writer that stages lists the staged objects to find batches to
    help. Its LIST starts a little before the oldest object its last LIST
    showed that no commit it knows names: the objects committed before
    (here one every 80 ms, nine of them within the second a LIST may reach
    back) are not listed again on every append."""
    # a LIST that straddles two staged folders is two LISTs: start where the
    # second of this test stays within one folder's span of the clock
    to_next_folder_ms = STAGED_FOLDER_MS - time.time() * 1000 % STAGED_FOLDER_MS
    if to_next_folder_ms < 3_000:
        time.sleep(to_next_folder_ms / 1000 + 0.05)
    counting = CountingStore(MemoryStore())
    config = arrowlog.LogConfig(staged_appends=True)
    arrowlog.connect(counting).create_topic("t", SCHEMA)
    part = arrowlog.connect(counting, config=config).partition("t", 0)
    part.append(one(0))
    other = arrowlog.connect(counting).partition("t", 0)
    other.append(one(1))  # part's view is stale: it loses a race, and stages from now on
    for i in range(2, 11):
        part.append(one(i))
        time.sleep(0.08)
    assert part.stats["staged"] == 9
    counting.reset()
    part.append(one(11))
    assert counting.counts["list"] == 1
    # its own batch and the last committed (the newest the last LIST showed);
    # nine committed batches were in the second before
    assert counting.objects_listed == 2
