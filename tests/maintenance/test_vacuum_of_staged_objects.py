"""Vacuum and staged appends (docs/protocol.md, "Deleting records"): a
commit object below the log start goes with the staged data objects it
names, each right before it, after the same delete delay as a segment; a
staged object that a commit staying names never goes; retention counts a
commit with its batches; staged objects no commit names are reported and
left where they are.

Time is never waited for: :class:`ClockStore` and :class:`Clocks` move the
store's clock and this process's together. Every test runs on memory, a
local directory and SeaweedFS over HTTP.
"""

from __future__ import annotations

import arrowlog
from arrowlog import TopicConfig
from arrowlog.format.topic import segment_key
from arrowlog.storage import Store
from tests.support.clocks import Clocks, ClockStore
from tests.support.schedules import FAST, SCHEMA, rows
from tests.support.staged import (
    TwoWriters,
    append_staged,
    named_by_commits,
    stage_orphan,
    staged_keys,
    staged_writer,
)

MIN = 60_000
DELAY = 15 * MIN
CONFIG = TopicConfig(checkpoint_interval=2, delete_delay_ms=DELAY)


def values(store: Store) -> list[int]:
    """Partition 0's records, read by a new client from its log start."""
    column = arrowlog.connect(store).partition("t", 0).read().column("v")
    return [v for v in column.to_pylist() if isinstance(v, int)]


def commits_and_segments(clock: ClockStore, pairs: int) -> arrowlog.ArrowLog:
    """Topic t: ``2 * pairs`` batches, each even offset a plain segment, each
    odd one a commit object naming a staged batch (value = offset)."""
    log = arrowlog.connect(clock, config=FAST)
    log.create_topic("t", SCHEMA, config=CONFIG)
    writer = staged_writer(clock)
    for v in range(0, 2 * pairs, 2):
        assert append_staged(clock, writer, v + 1, v).base_offset == v + 1
    return log


def test_a_commit_below_the_log_start_goes_with_its_staged_objects_each_right_before_it(
    clock: ClockStore, clocks: Clocks
) -> None:
    log = commits_and_segments(clock, 6)
    named = named_by_commits(clock)
    assert sorted(named) == [1, 3, 5, 7, 9, 11]
    log.delete_records("t", 0, 8)
    clocks.advance(DELAY - MIN)
    early = arrowlog.connect(clock).maintenance.vacuum(["t"])
    assert not [r for r in early if "/staged/" in r.key or "/segments/0" in r.key]
    clocks.advance(2 * MIN)

    removed = [r.key for r in arrowlog.connect(clock).maintenance.vacuum(["t"])]

    for base in (1, 3, 5, 7):
        (staged,) = named[base]
        assert removed.index(staged) + 1 == removed.index(segment_key("t", 0, base))
    assert staged_keys(clock) == {k for b in (9, 11) for k in named[b]}
    assert values(clock) == [8, 9, 10, 11]
    assert [r.key for r in arrowlog.connect(clock).maintenance.vacuum(["t"])] == []


def test_a_vacuum_killed_between_a_staged_object_and_its_commit_is_finished_by_the_next(
    clock: ClockStore, clocks: Clocks
) -> None:
    """A vacuum that dies after removing a commit's staged objects, before
    the commit, leaves the commit to the next run, which finds what is left
    of what it names; none is left behind unnamed (an orphan no run would
    remove)."""
    log = commits_and_segments(clock, 4)
    named = named_by_commits(clock)
    log.delete_records("t", 0, 6)
    clocks.advance(DELAY + MIN)
    plan = arrowlog.connect(clock).maintenance.vacuum(["t"], dry_run=True)
    cut = [r.key for r in plan].index(named[3][0]) + 1  # dies right after this delete
    for removal in plan[:cut]:
        clock.delete(removal.key)

    rerun = arrowlog.connect(clock).maintenance.vacuum(["t"])

    assert segment_key("t", 0, 3) in [r.key for r in rerun]
    assert staged_keys(clock) == set(named[7])
    assert not rerun.orphans
    assert values(clock) == [6, 7]


def test_a_staged_object_named_by_a_commit_that_stays_never_goes(
    clock: ClockStore, clocks: Clocks
) -> None:
    """The log start inside a commit naming two staged batches: that commit
    holds records past it, so it stays with both its staged objects, while
    the commits below it go with their own."""
    log = arrowlog.connect(clock, config=FAST)
    log.create_topic("t", SCHEMA, config=CONFIG)
    append_staged(clock, staged_writer(clock), 1, 0)  # 0 plain, 1 a commit of one batch
    TwoWriters(clock).commit_two((2, 3, 4), (5, 6))  # 2, 4 plain, 3 a commit; [5, 7) one
    for v in range(7, 11):
        log.append("t", rows(v))
    named = named_by_commits(clock)
    assert {b: len(keys) for b, keys in named.items()} == {1: 1, 3: 1, 5: 2}
    log.delete_records("t", 0, 6)
    clocks.advance(DELAY + MIN)

    removed = arrowlog.connect(clock).maintenance.vacuum(["t"])

    assert [r.key for r in removed if "/staged/" in r.key] == named[1] + named[3]
    assert staged_keys(clock) == set(named[5])
    assert values(clock) == [5, 7, 8, 9, 10]


def test_retention_by_time_counts_a_commit_of_several_batches_by_its_own_age(
    clock: ClockStore, clocks: Clocks
) -> None:
    """Retention moves the log start past a commit of two staged batches
    written long enough ago, as past a segment: the age of a batch inside
    it is the commit's (written after it)."""
    log = arrowlog.connect(clock, config=FAST)
    config = TopicConfig(checkpoint_interval=2, delete_delay_ms=DELAY, retention_ms=DELAY)
    log.create_topic("t", SCHEMA, config=config)
    log.append("t", rows(0))
    TwoWriters(clock).commit_two((1, 2, 3), (4, 5))  # 1, 3 plain, 2 a commit; [4, 6) one
    assert list(named_by_commits(clock)) == [2, 4]
    clocks.advance(DELAY + MIN)
    for v in range(6, 10):
        log.append("t", rows(v))

    arrowlog.connect(clock).maintenance.vacuum(["t"])

    assert arrowlog.connect(clock).partition("t", 0).start_offset(refresh=True) == 6


def test_staged_objects_no_commit_names_are_reported_once_old_and_left_in_place(
    clock: ClockStore, clocks: Clocks
) -> None:
    commits_and_segments(clock, 2)
    orphan = stage_orphan(clock, 99)
    clocks.advance(DELAY + MIN)
    young = stage_orphan(clock, 98)
    named = named_by_commits(clock)

    for dry_run in (True, False):
        found = arrowlog.connect(clock).maintenance.vacuum(dry_run=dry_run)
        assert [o.key for o in found.orphans] == [orphan]
        assert found.orphans[0].age_ms >= DELAY
        assert not [r for r in found if "/staged/" in r.key]

    assert staged_keys(clock) == {orphan, young, *(k for keys in named.values() for k in keys)}
    assert values(clock) == [0, 1, 2, 3]
