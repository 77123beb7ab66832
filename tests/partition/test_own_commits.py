"""Commits of staged objects by their own writer (a Spark job's driver commits
what its executors uploaded): one commit object at the log end names them,
each a batch of one producer in sequence; a lost reply is found by the first
batch's identity, never committed twice; bad refs write nothing."""

from __future__ import annotations

import dataclasses
from typing import Any

import pytest

import arrowlog
from arrowlog.errors import (
    AppendOutcomeUnknownError,
    DuplicateSequenceError,
    InvalidBatchError,
    ProducerFencedError,
)
from arrowlog.format.segment import Ref, WriterIdentity
from arrowlog.partition.sequences import MAX_REFS
from arrowlog.storage.memory import MemoryStore
from arrowlog.testing.scripted import ScriptedStore
from tests.support.schedules import FAST, SCHEMA, rows
from tests.support.staged import stage_own


def who(sequence: int, *, pid: int = 7, epoch: int = 0) -> WriterIdentity:
    return WriterIdentity(
        producer_id=pid, producer_epoch=epoch, base_sequence=sequence,
        transactional=True, transactional_id="job",
    )  # fmt: skip


def staged(store: Any, *batches: tuple[int, ...], first: int = 0, **identity: int) -> list[Ref]:
    """Staged objects of ``batches`` (the values of each), one producer's
    sequences from ``first``."""
    refs, sequence = [], first
    for values in batches:
        refs.append(stage_own(store, rows(*values), who(sequence, **identity)))
        sequence += len(values)
    return refs


def writer(store: Any) -> arrowlog.PartitionLog:
    return arrowlog.connect(store, config=FAST).partition("t", 0)


def values(store: Any) -> list[int]:
    column = arrowlog.connect(store).partition("t", 0).read().column("v")
    return [v for v in column.to_pylist() if isinstance(v, int)]


@pytest.fixture
def store() -> MemoryStore:
    memory = MemoryStore()
    arrowlog.connect(memory).create_topic("t", SCHEMA)
    writer(memory).append(rows(0))
    return memory


def test_the_objects_take_consecutive_offsets_at_the_end_each_a_batch_of_its_own(
    store: MemoryStore,
) -> None:
    refs = staged(store, (1, 2), (3,), (4, 5, 6))
    result = writer(store).commit_refs(refs)
    assert (result.base_offset, result.record_count) == (1, 6)
    assert values(store) == [0, 1, 2, 3, 4, 5, 6]
    batches = arrowlog.connect(store).partition("t", 0).summaries()
    assert [(b.base, b.record_count, b.base_sequence) for b in batches[1:]] == [
        (1, 2, 0),
        (3, 1, 2),
        (4, 3, 3),
    ]
    assert all(b.producer_id == 7 and b.transactional for b in batches[1:])


def test_a_second_commit_continues_the_producers_sequence(store: MemoryStore) -> None:
    part = writer(store)
    part.commit_refs(staged(store, (1,), (2,)))
    part.commit_refs(staged(store, (3,), first=2))
    # a new client, which knows the producer only from the log
    writer(store).commit_refs(staged(store, (4, 5), first=3))
    assert values(store) == [0, 1, 2, 3, 4, 5]


def _bad_refs(store: Any) -> dict[str, list[Ref]]:
    one = staged(store, (1,), (2,))
    other_epoch = staged(store, (3,), first=1, epoch=1)
    return {
        "none": [],
        "too many": staged(store, *[(i,) for i in range(MAX_REFS + 1)]),
        "a gap in the sequence": [one[0], dataclasses.replace(one[1], identity=who(5))],
        "another epoch": [one[0], other_epoch[0]],
        "another producer": [one[0], dataclasses.replace(one[1], identity=who(1, pid=8))],
        "a count the name does not give": [dataclasses.replace(one[0], record_count=2)],
        "a key outside staged/": [dataclasses.replace(one[0], at="segments/1.arrow")],
        "no producer": [dataclasses.replace(one[0], identity=WriterIdentity())],
    }


@pytest.mark.parametrize(
    "case",
    [
        "none",
        "too many",
        "a gap in the sequence",
        "another epoch",
        "another producer",
        "a count the name does not give",
        "a key outside staged/",
        "no producer",
    ],
)
def test_refs_one_commit_cannot_carry_are_refused_and_nothing_is_written(
    store: MemoryStore, case: str
) -> None:
    refs = _bad_refs(store)[case]
    with pytest.raises(InvalidBatchError):
        writer(store).commit_refs(refs)
    assert values(store) == [0]


def test_a_commit_after_another_writer_moved_the_end_lands_past_it(store: MemoryStore) -> None:
    part = writer(store)
    part.end_offset()  # its view: the log ends at 1
    writer(store).append(rows(9))  # another client takes offset 1
    result = part.commit_refs(staged(store, (1,), (2,)))
    assert result.base_offset == 2
    assert values(store) == [0, 9, 1, 2]


def test_a_commit_whose_put_landed_after_its_writer_gave_up_is_found_not_written_twice(
    store: MemoryStore,
) -> None:
    scripted = ScriptedStore(store)
    late = scripted.late_put("t/0/segments/*", times=1000)
    part = writer(scripted)
    refs = staged(store, (1,), (2, 3))
    with pytest.raises(AppendOutcomeUnknownError):
        part.commit_refs(refs)
    assert late.land()  # the first attempt lands, after the writer gave up
    late.stop()
    again = part.commit_refs(refs)
    assert (again.base_offset, again.record_count) == (1, 3)
    assert values(store) == [0, 1, 2, 3]


def test_a_commit_of_an_epoch_older_than_the_partitions_is_fenced(store: MemoryStore) -> None:
    """(A producer's first batch of an epoch, sequence 0, is checked by the
    transaction's coordinator entry, as an append's is: see txn/.)"""
    writer(store).commit_refs(staged(store, (1,), epoch=1))
    with pytest.raises(ProducerFencedError):
        writer(store).commit_refs(staged(store, (2,), first=1, epoch=0))
    assert values(store) == [0, 1]


def test_a_commit_sent_again_by_a_new_client_is_refused_not_written_twice(
    store: MemoryStore,
) -> None:
    """A driver whose planner died after the commit landed sends it again
    through a new client: the producer's sequence shows it, even at 0."""
    refs = staged(store, (1,), (2, 3))
    writer(store).commit_refs(refs)
    with pytest.raises(DuplicateSequenceError):
        writer(store).commit_refs(refs)
    one = staged(store, (4,), first=3)
    first = writer(store).commit_refs(one)
    again = writer(store).commit_refs(one)  # one batch: acknowledged where it landed
    assert again.base_offset == first.base_offset
    assert values(store) == [0, 1, 2, 3, 4]
