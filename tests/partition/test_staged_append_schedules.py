"""Staged appends, scheduled: a batch that loses the race for the log end is
uploaded under a key of its own, and committed by whichever writer wins the
next offset; the schedules hold one writer between its steps while another
acts, and check that every batch is in the log exactly once, at the offset
its writer was told."""

from __future__ import annotations

import dataclasses
import time
from typing import Any

import pytest

import arrowlog
from arrowlog import LogConfig
from arrowlog.errors import CorruptSegmentError
from arrowlog.format.segment import WriterIdentity, read_header
from arrowlog.format.topic import parse_staged_name
from arrowlog.partition import AppendResult, fetch_segment
from arrowlog.storage.memory import MemoryStore
from arrowlog.storage.wrappers import CountingStore
from arrowlog.testing.scripted import ScriptedStore
from tests.support.clocks import ClockStore
from tests.support.schedules import FAST, FOREVER, PLAIN, SCHEMA, Background, rows
from tests.support.staged import put_staged

STAGED = LogConfig(retry=FAST.retry, staged_appends=True)
SEGMENTS = "t/0/segments/*"
STAGED_KEYS = "t/0/staged/*"


def connect(store: Any) -> arrowlog.ArrowLog:
    return arrowlog.connect(store, config=STAGED)


def plain(store: Any) -> arrowlog.PartitionLog:
    """Partition 0 through a client that never stages: another writer whose
    appends only move the end."""
    return arrowlog.connect(store, config=PLAIN).partition("t", 0)


def values(store: Any) -> list[int]:
    """Every record of partition 0, read by a new client, in offset order."""
    column = arrowlog.connect(store).partition("t", 0).read().column("v")
    return [v for v in column.to_pylist() if isinstance(v, int)]


def ready(clock: ClockStore, *parts: arrowlog.PartitionLog) -> None:
    """Each writer has followed the chain (two syncs), and the store's clock
    has moved on."""
    for part in parts:
        part.end_offset()
        part.end_offset()
    clock.advance(2_000)


@pytest.fixture
def clock() -> ClockStore:
    store = ClockStore(MemoryStore())
    arrowlog.connect(store).create_topic("t", SCHEMA)
    plain(store).append(rows(0))
    return store


def staged_once(clock: ClockStore, part: arrowlog.PartitionLog, value: int) -> None:
    """``part`` stages a plain append (its view of the end is stale) and commits
    it itself: the first batch of the producer id its plain appends are staged
    under, which no one else may commit (nothing in the log says it is next).
    Its next plain batch is then helpable, and it stages it at once."""
    plain(clock).append(rows(value))
    part.append(rows(value + 1))
    assert part.stats["staged"] == 1 and part.stats["commits"] == 1


def staged_behind(clock: ClockStore) -> tuple[ScriptedStore, arrowlog.PartitionLog]:
    """A writer whose view of the end is one batch behind: its next append
    loses the race and is staged."""
    scripted = ScriptedStore(clock)
    part = connect(scripted).partition("t", 0)
    return scripted, part


def test_a_lost_race_stages_the_batch_and_a_commit_names_it(clock: ClockStore) -> None:
    a = connect(clock).partition("t", 0)
    ready(clock, a)
    plain(clock).append(rows(1))  # a's end is now stale

    result = a.append(rows(2))

    assert (result.base_offset, values(clock)) == (2, [0, 1, 2])
    assert a.stats["staged"] == 1
    commit = read_header(clock.get("t/0/segments/00000000000000000002.arrow"), key="c")
    assert not isinstance(commit, int) and commit.refs is not None
    assert [r.record_count for r in commit.refs] == [1]
    staged = clock.get(f"t/0/{commit.refs[0].at}")
    assert parse_staged_name(commit.refs[0].at) is not None and len(staged) > 0


def b_commits_a_paused_batch(
    clock: ClockStore,
) -> tuple[ScriptedStore, arrowlog.PartitionLog, arrowlog.PartitionLog, Any, AppendResult]:
    """a (through the scripted store) stages 2 and is held at its commit; b,
    stale, appends 4 and its commit carries a's batch; a's commit then loses.
    The scripted store, a, b, a's result and b's."""
    scripted, a = staged_behind(clock)
    b = connect(clock).partition("t", 0)
    ready(clock, a, b)
    staged_once(clock, a, 20)
    plain(clock).append(rows(1))
    # a stages its batch at once (it lost a race a moment ago) and is held at its commit
    held = scripted.hold("put_if_absent", SEGMENTS)
    run_a = Background(lambda: a.append(rows(2)))
    held.wait_reached()
    # meanwhile b loses a race too (its view is stale): its commit carries a's batch
    plain(clock).append(rows(3))
    b_result = b.append(rows(4))
    assert b.stats["helped"] == 1
    held.release()  # a's commit goes to an offset b took: lost
    return scripted, a, b, run_a.result(), b_result


def test_a_writer_paused_between_upload_and_commit_is_committed_by_another_once(
    clock: ClockStore,
) -> None:
    _, a, b, a_result, b_result = b_commits_a_paused_batch(clock)
    assert isinstance(a_result, AppendResult)
    b.append(rows(5))  # b stages at once (it lost a race a moment ago), a's object still listed

    log = values(clock)
    assert sorted(log) == [0, 1, 2, 3, 4, 5, 20, 21]
    assert log[a_result.base_offset] == 2 and log[b_result.base_offset] == 4
    assert a.stats["commits"] == 1  # its first batch only


def test_the_writer_that_committed_last_commits_an_older_batch_whose_writer_follows(
    clock: ClockStore,
) -> None:
    """After b's commit carried a's batch, a follows: it stages its next batch
    and waits for a commit. b, staging a newer batch, commits both at once:
    were it to wait for the writer of the older batch, as a follower does,
    the two would wait for each other until their patience ran out."""
    scripted, a, b, _, _ = b_commits_a_paused_batch(clock)

    following = scripted.hold("head", SEGMENTS)  # a's first look at the log end
    run_a = Background(lambda: a.append(rows(5)))
    following.wait_reached()  # a's batch is staged; a waits for a commit
    time.sleep(0.005)  # b's batch is the newer by the writers' clock
    waits, helped = b.stats["waits"], b.stats["helped"]
    b_result = b.append(rows(6))
    assert (b.stats["waits"], b.stats["helped"]) == (waits, helped + 1)
    following.release()
    a_result = run_a.result()
    assert isinstance(a_result, AppendResult)

    log = values(clock)
    assert sorted(log) == [0, 1, 2, 3, 4, 5, 6, 20, 21]
    assert log[a_result.base_offset] == 5 and log[b_result.base_offset] == 6


def test_a_late_upload_of_a_batch_a_helper_committed_is_not_committed_again(
    clock: ClockStore,
) -> None:
    scripted, a = staged_behind(clock)
    b = connect(clock).partition("t", 0)
    ready(clock, a, b)
    staged_once(clock, a, 20)
    plain(clock).append(rows(1))
    # a's upload times out on a's side; a sends it again and is held there;
    # the first upload lands late, b commits it, then a's resend meets "exists"
    late = scripted.late_put(STAGED_KEYS)
    resend = scripted.hold("put_if_absent", STAGED_KEYS, nth=2)
    run_a = Background(lambda: a.append(rows(2)))
    resend.wait_reached()
    assert late.land()
    plain(clock).append(rows(3))
    b.append(rows(4))
    assert b.stats["helped"] == 1
    resend.release()
    a_result = run_a.result()
    assert isinstance(a_result, AppendResult)

    log = values(clock)
    assert sorted(log) == [0, 1, 2, 3, 4, 20, 21]
    assert log[a_result.base_offset] == 2


def test_a_commit_carries_an_idempotent_batch_next_in_its_sequence(clock: ClockStore) -> None:
    scripted, a = staged_behind(clock)
    b = connect(clock).partition("t", 0)
    ready(clock, a, b)
    a.append(rows(10), identity=identity(0))  # sequence 0 is in the log
    b.end_offset()
    plain(clock).append(rows(1))
    held = scripted.hold("put_if_absent", SEGMENTS, nth=2)  # a's commit
    run_a = Background(lambda: a.append(rows(12), identity=identity(1)))
    held.wait_reached()
    plain(clock).append(rows(3))
    b.append(rows(4))
    assert b.stats["helped"] == 1  # sequence 1 follows 0
    held.release()
    run_a.result()
    assert sorted(values(clock)) == [0, 1, 3, 4, 10, 12]


@pytest.mark.parametrize("sequence", [0, 2], ids=["committed-before", "leaves-a-gap"])
def test_a_commit_leaves_out_an_idempotent_batch_out_of_its_sequence(
    clock: ClockStore, sequence: int
) -> None:
    """A staged batch of a producer whose sequence does not follow the chain's
    latest for it (a zombie's resend, a gap) is never carried by a helper."""
    b = connect(clock).partition("t", 0)
    ready(clock, b)
    b.append(rows(10), identity=identity(0))
    b.end_offset()
    put_staged(clock, rows(99), identity(sequence))
    plain(clock).append(rows(1))
    b.append(rows(4))
    assert b.stats["staged"] == 1 and b.stats["helped"] == 0
    assert sorted(values(clock)) == [0, 1, 4, 10]


def test_more_batches_waiting_than_one_commit_names_are_committed_by_the_next_commits(
    clock: ClockStore,
) -> None:
    """60 producers' next batches are staged and waiting; one commit names
    at most MAX_REFS objects. The writer whose commit carried the first
    ones commits the rest right after, at the end it just wrote, rather
    than leaving them to wait for the next round."""
    b = connect(clock).partition("t", 0)
    ready(clock, b)
    producers = [WriterIdentity(producer_id=100 + i, producer_epoch=0, base_sequence=0)
                 for i in range(60)]  # fmt: skip
    for i, who in enumerate(producers):
        b.append(rows(1000 + i), identity=who)
    for i, who in enumerate(producers):
        put_staged(clock, rows(2000 + i), dataclasses.replace(who, base_sequence=1))
    plain(clock).append(rows(1))  # b's view is stale: it loses the race and stages
    commits = b.stats["commits"]
    b.append(rows(4))
    assert b.stats["commits"] - commits == 2
    assert b.stats["helped"] == 60
    assert sorted(values(clock)) == sorted([0, 1, 4, *range(1000, 1060), *range(2000, 2060)])


def identity(sequence: int) -> WriterIdentity:
    return WriterIdentity(producer_id=7, producer_epoch=0, base_sequence=sequence)


def test_a_staged_object_put_at_a_segment_key_is_refused(clock: ClockStore) -> None:
    a = connect(clock).partition("t", 0)
    ready(clock, a)
    plain(clock).append(rows(1))
    a.append(rows(2))
    commit = read_header(clock.get("t/0/segments/00000000000000000002.arrow"), key="c")
    assert not isinstance(commit, int) and commit.refs is not None
    staged = clock.get(f"t/0/{commit.refs[0].at}")
    clock.put_if_absent("t/0/segments/00000000000000000003.arrow", staged)
    with pytest.raises(CorruptSegmentError):
        arrowlog.connect(clock).partition("t", 0).end_offset()


def test_a_staged_object_committed_before_a_writer_followed_the_chain_is_not_helped(
    clock: ClockStore,
) -> None:
    """A writer that opened after a staged object's commit went into a
    checkpoint does not see that commit in what it followed; the object is
    still listed among the recent staged ones. The store's clock tells it
    apart: it was staged before the writer's horizon, and is left out."""
    store = ClockStore(MemoryStore())
    arrowlog.connect(store).create_topic("t", SCHEMA, config=arrowlog.TopicConfig(
        checkpoint_interval=2))  # fmt: skip
    x = connect(store).partition("t", 0)
    ready(store, x)
    plain(store).append(rows(1))
    x.append(rows(2))  # staged, committed by x itself
    assert x.stats["staged"] == 1
    store.advance(2_000)
    for v in (3, 4, 5):
        plain(store).append(rows(v))  # the commit's window is checkpointed
    h = connect(store).partition("t", 0)
    ready(store, h)
    plain(store).append(rows(6))
    h.append(rows(7))
    assert h.stats["staged"] == 1 and h.stats["helped"] == 0
    assert sorted(values(store)) == [1, 2, 3, 4, 5, 6, 7]


def test_a_resend_staged_anew_is_not_committed_beside_the_earlier_copy_a_helper_committed(
    clock: ClockStore,
) -> None:
    """An idempotent batch staged, whose commit never got through before the
    deadline (outcome unknown), is sent again: staged anew. A helper commits
    the earlier copy while the resend waits at its commit; the resend is then
    the same batch, already in the log, and is acknowledged at its offset."""
    scripted, a = staged_behind(clock)
    b = connect(clock).partition("t", 0)
    ready(clock, a, b)
    a.append(rows(10), identity=identity(0))
    b.end_offset()
    plain(clock).append(rows(1))
    stuck = scripted.throttle("put_if_absent", SEGMENTS, nth=2, times=FOREVER)  # its commits
    with pytest.raises(arrowlog.errors.AppendOutcomeUnknownError):
        a.append(rows(11), identity=identity(1))  # staged; no commit gets through
    stuck.stop()
    assert a.stats["staged"] == 1
    plain(clock).append(rows(2))  # a's view is stale again
    held = scripted.hold("put_if_absent", SEGMENTS)  # the resend (staged at once: a lost a race)
    resend = Background(lambda: a.append(rows(11), identity=identity(1)))
    held.wait_reached()
    plain(clock).append(rows(3))
    b.append(rows(4))  # commits the first copy (the oldest staged), not the resend
    assert b.stats["helped"] == 1
    held.release()
    result = resend.result()

    log = values(clock)
    assert sorted(log) == [0, 1, 2, 3, 4, 10, 11]
    assert isinstance(result, AppendResult) and log[result.base_offset] == 11


def test_an_upload_whose_replies_are_lost_is_an_unknown_outcome_and_its_resend_is_found(
    clock: ClockStore,
) -> None:
    """Every reply to a staged upload is lost until the deadline: the batch
    may be in ``staged/``, where any writer may commit it, so the append
    raises AppendOutcomeUnknownError (not a plain transient error, after
    which a producer would give the sequence to its next batch). A helper
    commits the upload that landed; the producer's resend is acknowledged
    at that offset, and its next batch is not taken for it."""
    scripted, a = staged_behind(clock)
    b = connect(clock).partition("t", 0)
    ready(clock, a, b)
    a.append(rows(10), identity=identity(0))
    b.end_offset()
    plain(clock).append(rows(1))
    late = scripted.late_put(STAGED_KEYS, times=FOREVER)
    with pytest.raises(arrowlog.errors.AppendOutcomeUnknownError):
        a.append(rows(11), identity=identity(1))
    late.stop()
    assert late.land()
    plain(clock).append(rows(3))
    b.append(rows(4))
    assert b.stats["helped"] == 1

    resent = a.append(rows(11), identity=identity(1))
    after = a.append(rows(12), identity=identity(2))

    log = values(clock)
    assert sorted(log) == [0, 1, 3, 4, 10, 11, 12]
    assert (log[resent.base_offset], log[after.base_offset]) == (11, 12)


def test_an_upload_that_may_have_landed_once_stays_unknown_when_later_attempts_fail_cleanly(
    clock: ClockStore,
) -> None:
    """The first attempt's reply is lost (it lands later); every resend then
    meets a 503 that surely was not applied. The first may be committed by
    any writer: the outcome is unknown, not "not written"."""
    scripted, a = staged_behind(clock)
    ready(clock, a)
    plain(clock).append(rows(1))
    late = scripted.late_put(STAGED_KEYS)
    refused = scripted.fail("put_if_absent", STAGED_KEYS, nth=2, times=FOREVER,
                            maybe_applied=False)  # fmt: skip
    with pytest.raises(arrowlog.errors.AppendOutcomeUnknownError):
        a.append(rows(2))
    refused.stop()
    assert late.land()  # and there it is, for any writer to commit
    assert list(clock.inner.list("t/0/staged/")) != []


def test_a_commit_object_read_as_records_is_refused_by_name(clock: ClockStore) -> None:
    a = connect(clock).partition("t", 0)
    ready(clock, a)
    plain(clock).append(rows(1))
    a.append(rows(2))
    key = "t/0/segments/00000000000000000002.arrow"
    with pytest.raises(
        CorruptSegmentError, match="a commit object where the index says records are"
    ):
        fetch_segment(clock, key, 2, 3)


def test_a_writer_that_wins_every_race_still_commits_the_batches_staged_behind_it(
    clock: ClockStore, now: list[float]
) -> None:
    """A writer alone at the end knows the end it just wrote: it is first
    there every time, and never loses a race. Others' batches staged behind
    it would wait for ever; so while it appends without a pause, it looks
    for them (a LIST every tenth of a second) and commits them with its own."""
    w = connect(clock).partition("t", 0)
    w.append(rows(10), identity=identity(0))  # producer 7's first batch, in a segment
    w.append(rows(1))
    put_staged(clock, rows(11), identity(1))  # producer 7's next, staged: helpable
    now[0] += 0.06
    w.append(rows(3))  # 0.06 s into its run: not looked yet
    assert w.stats["staged"] == 0
    now[0] += 0.06

    w.append(rows(2))  # 0.12 s into its run, never paused a tenth of a second: it looks

    assert (w.stats["staged"], w.stats["helped"]) == (1, 1)
    assert sorted(values(clock)) == [0, 1, 2, 3, 10, 11]


class SlowPuts:
    """A store whose every put takes ``seconds`` of the clock ``now``."""

    def __init__(self, inner: Any, now: list[float], seconds: float) -> None:
        self.inner, self.now, self.seconds = inner, now, seconds

    def put_if_absent(self, key: str, data: Any) -> Any:
        self.now[0] += self.seconds
        return self.inner.put_if_absent(key, data)

    def __getattr__(self, name: str) -> Any:
        return getattr(self.inner, name)


def test_a_writer_whose_appends_are_slow_but_unpaused_still_looks(
    clock: ClockStore, now: list[float]
) -> None:
    """Appends that each take longer than a tenth of a second (a crowded
    store) are no pause: the writer that calls again at once looks for the
    batches staged behind it, and commits them."""
    w = connect(SlowPuts(clock, now, 0.15)).partition("t", 0)
    w.append(rows(10), identity=identity(0))
    w.append(rows(1))
    put_staged(clock, rows(11), identity(1))

    w.append(rows(2))

    assert (w.stats["staged"], w.stats["helped"]) == (1, 1)
    assert sorted(values(clock)) == [0, 1, 2, 10, 11]


def test_a_writer_that_appends_now_and_then_never_lists_the_staged_objects(
    clock: ClockStore, now: list[float]
) -> None:
    """Between the appends of a writer that pauses, the end is free for the
    commits of others: it pays for no LIST, and stages nothing."""
    counting = CountingStore(clock)
    w = connect(counting).partition("t", 0)
    w.append(rows(1))
    put_staged(clock, rows(11), identity(1))
    counting.reset()
    for v in range(2, 6):
        now[0] += 0.15
        w.append(rows(v))
    assert counting.counts == {"put_if_absent": 4}
    assert w.stats["staged"] == 0


@pytest.mark.parametrize(
    "failure",
    [
        arrowlog.TransientStoreError("scripted 503 SlowDown", maybe_applied=False),
        arrowlog.StoreError("scripted 403 AccessDenied"),
    ],
    ids=["transient", "refused"],
)
def test_a_look_whose_list_fails_is_no_answer_and_the_appends_go_on_plain(
    clock: ClockStore, now: list[float], monkeypatch: pytest.MonkeyPatch, failure: Exception
) -> None:
    """The LIST of a writer's look only hints that others' batches wait: a
    failed one, whether the store may answer it later or refuses it for good
    (a policy without ListBucket on the staged prefix), is no answer. The
    appends go on as if it had found nothing, one PUT each, and each lands."""
    listed = clock.list

    def failing_list(prefix: str, **kwargs: Any) -> Any:
        if "/staged/" in prefix:
            raise failure
        return listed(prefix, **kwargs)

    monkeypatch.setattr(clock, "list", failing_list)
    counting = CountingStore(clock)
    w = connect(counting).partition("t", 0)
    w.append(rows(1))
    counting.reset()
    for v in range(2, 6):
        now[0] += 0.06  # a run without a pause: it looks at 0.12 s and 0.24 s
        w.append(rows(v))
    assert counting.counts == {"put_if_absent": 4, "list": 2}
    assert w.stats["staged"] == 0
    assert values(clock) == [0, 1, 2, 3, 4, 5]
