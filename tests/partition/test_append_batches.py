"""``append_batches``: a stream of batches appended in order, the next encoded
while the one before is written. Where each batch lands, and what an error
leaves behind, must be exactly what a loop of ``append`` gives."""

from __future__ import annotations

import threading
from collections.abc import Iterator
from typing import Any

import pyarrow as pa
import pytest

import arrowlog
from arrowlog import InvalidBatchError, OffsetMismatchError, SchemaMismatchError
from arrowlog.partition.append import Appends
from arrowlog.storage import Store
from arrowlog.testing.scripted import ScriptedStore

FIELDS: list[pa.Field[Any]] = [pa.field("id", pa.int64()), pa.field("name", pa.string())]
SCHEMA = pa.schema(FIELDS)


def batch(first: int, rows: int) -> pa.RecordBatch:
    ids = list(range(first, first + rows))
    return pa.record_batch([pa.array(ids), pa.array([f"n{i}" for i in ids])], schema=SCHEMA)


def batches(count: int, rows: int = 100) -> list[pa.RecordBatch]:
    return [batch(i * rows, rows) for i in range(count)]


def new_log(store: Store) -> arrowlog.ArrowLog:
    log = arrowlog.connect(store)
    log.create_topic("t", SCHEMA)
    return log


def segments(log: arrowlog.ArrowLog) -> list[tuple[int, int]]:
    return [(ref.base, ref.end) for ref in log.partition("t", 0).segments()]


class Encodes:
    """Counts the segments encoded, ahead or not."""

    def __init__(self, monkeypatch: pytest.MonkeyPatch) -> None:
        self.count = 0
        original = Appends._encode

        def counted(part: Appends, *args: object, **kwargs: object) -> object:
            self.count += 1
            return original(part, *args, **kwargs)  # type: ignore[arg-type]

        monkeypatch.setattr(Appends, "_encode", counted)


def test_batches_land_in_order_as_a_loop_of_appends_would(
    store: Store, monkeypatch: pytest.MonkeyPatch
) -> None:
    log = new_log(store)
    log.append("t", batch(-5, 5))
    log.partition("t", 0).end_offset()
    encodes = Encodes(monkeypatch)
    given = [*batches(6, rows=100), batch(600, 7)]
    results = list(log.append_batches("t", given))
    assert [(r.base_offset, r.next_offset) for r in results] == [
        (5 + 100 * i, 105 + 100 * i) for i in range(6)
    ] + [(605, 612)]
    assert encodes.count == len(given)  # each encoded once, ahead of its turn
    assert segments(log)[1:] == [(r.base_offset, r.next_offset) for r in results]
    expected = pa.Table.from_batches([batch(-5, 5), *given])
    assert log.read("t").equals(expected)
    # a new connection reads the same log
    assert arrowlog.connect(store).read("t").equals(expected)


def test_with_an_expected_offset_each_lands_exactly_after_the_one_before(store: Store) -> None:
    log = new_log(store)
    results = list(log.append_batches("t", batches(4), expected_offset=0))
    assert [r.base_offset for r in results] == [0, 100, 200, 300]
    with pytest.raises(OffsetMismatchError) as e:
        list(log.append_batches("t", batches(2), expected_offset=100))
    assert e.value.log_end_offset == 400
    assert log.partition("t", 0).end_offset(refresh=True) == 400  # nothing written


def test_a_bad_batch_stops_the_stream_after_the_ones_before_it_landed(store: Store) -> None:
    log = new_log(store)
    wrong = pa.record_batch([pa.array([1.5])], names=["id"])
    given = [batch(0, 10), batch(10, 10), wrong, batch(20, 10)]
    seen = []
    with pytest.raises(SchemaMismatchError):
        for result in log.append_batches("t", given):
            seen.append(result.base_offset)
    assert seen == [0, 10]
    assert segments(log) == [(0, 10), (10, 20)]
    empty = batch(0, 0)
    with pytest.raises(InvalidBatchError):
        list(log.append_batches("t", [batch(20, 10), empty]))
    assert segments(log)[-1] == (20, 30)


def test_a_failing_input_iterator_stops_the_stream_after_what_it_gave(store: Store) -> None:
    log = new_log(store)

    def given() -> Iterator[pa.RecordBatch]:
        yield batch(0, 10)
        yield batch(10, 10)
        raise RuntimeError("the input broke")

    seen = []
    with pytest.raises(RuntimeError, match="input broke"):
        for result in log.append_batches("t", given()):
            seen.append(result.base_offset)
    assert seen == [0, 10]
    assert segments(log) == [(0, 10), (10, 20)]


def test_closing_the_stream_early_waits_for_the_batch_being_written_and_writes_no_other(
    store: Store,
) -> None:
    """The schedule: batch 1 landed and was yielded; batch 2's PUT is held;
    the caller closes the stream; the PUT goes on. Batch 2 lands, close returns
    only then, and batches 3 to 5 are never written."""
    new_log(store)
    scripted = ScriptedStore(store)
    gate = scripted.hold("put_if_absent", lambda key: "/segments/" in key, nth=2)
    log = arrowlog.connect(scripted)
    stream = log.append_batches("t", batches(5))
    assert next(stream).base_offset == 0
    gate.wait_reached()
    closer = threading.Thread(target=stream.close)
    closer.start()
    closer.join(0.3)
    assert closer.is_alive()  # waits for the batch being written
    gate.release()
    closer.join(30)
    assert not closer.is_alive()
    assert segments(log) == [(0, 100), (100, 200)]
    assert arrowlog.connect(store).partition("t", 0).end_offset(refresh=True) == 200
    assert not list(log.append_batches("t", []))


@pytest.mark.parametrize("staged", [False, True], ids=["plain", "staged"])
def test_another_writer_between_two_batches_moves_the_rest(
    store: Store, monkeypatch: pytest.MonkeyPatch, staged: bool
) -> None:
    """The schedule: batch 2's PUT is held after batch 3 was encoded for the
    offset after it; another writer appends there; then the PUT goes on, loses
    the race, and batch 2 and 3 land after the other writer's batch, each
    encoded again for where it really lands (without staged appends), or
    staged and committed there (with them)."""
    inner_log = new_log(store)
    scripted = ScriptedStore(store)
    gate = scripted.hold("put_if_absent", lambda key: "/segments/" in key, nth=2)
    log = arrowlog.connect(scripted, config=arrowlog.LogConfig(staged_appends=staged))
    log.partition("t", 0).end_offset()
    encodes = Encodes(monkeypatch)
    results: list[arrowlog.AppendResult] = []
    errors: list[BaseException] = []

    def run() -> None:
        try:
            results.extend(log.append_batches("t", batches(3, rows=10)))
        except Exception as e:  # noqa: BLE001 - reported below
            errors.append(e)

    writer = threading.Thread(target=run)
    writer.start()
    gate.wait_reached()
    inner_log.append("t", batch(1000, 4))  # takes offset 10, batch 2's
    gate.release()
    writer.join(30)
    assert not errors
    assert [(r.base_offset, r.next_offset) for r in results] == [(0, 10), (14, 24), (24, 34)]
    assert segments(log) == [(0, 10), (10, 14), (14, 24), (24, 34)]
    stats = log.partition("t", 0).stats
    assert stats["conflicts"] == 1
    if staged:  # batch 2 lost its race: it and batch 3 are staged, each in a commit of its own
        assert (stats["staged"], stats["commits"], encodes.count) == (2, 2, 4)
    else:  # 3 ahead, the other writer's, then batches 2 and 3 again
        assert encodes.count == 6
    got = arrowlog.connect(store).read("t").column("id").to_pylist()
    assert got == list(range(10)) + list(range(1000, 1004)) + list(range(10, 30))


def test_another_writer_fails_an_expected_offset_stream_where_it_wrote(store: Store) -> None:
    inner_log = new_log(store)
    scripted = ScriptedStore(store)
    gate = scripted.hold("put_if_absent", lambda key: "/segments/" in key, nth=2)
    log = arrowlog.connect(scripted)
    seen: list[int] = []
    errors: list[BaseException] = []

    def run() -> None:
        try:
            for result in log.append_batches("t", batches(3, rows=10), expected_offset=0):
                seen.append(result.base_offset)
        except Exception as e:  # noqa: BLE001 - reported below
            errors.append(e)

    writer = threading.Thread(target=run)
    writer.start()
    gate.wait_reached()
    inner_log.append("t", batch(1000, 4))
    gate.release()
    writer.join(30)
    assert seen == [0]
    assert len(errors) == 1 and isinstance(errors[0], OffsetMismatchError)
    assert segments(log) == [(0, 10), (10, 14)]  # nothing of ours after the mismatch
