"""A read of old offsets reads the checkpoint windows between them and the
newest checkpoint: one LIST shows them, and a new client fetches them
WINDOW_READS at a time, in parallel. What the listing misses, or what fails to
read, is read by key (or rebuilt) on its own, as before."""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator
from typing import TypeVar

import pyarrow as pa
import pytest

import arrowlog
from arrowlog import LogConfig, RetryPolicy, TopicConfig
from arrowlog.errors import TransientStoreError
from arrowlog.format.topic import checkpoint_key
from arrowlog.partition import checkpoints
from arrowlog.partition.checkpoints import WINDOW_READS
from arrowlog.storage import ObjectInfo, Store
from arrowlog.storage.memory import MemoryStore
from arrowlog.storage.wrappers import CountingStore
from arrowlog.testing.scripted import ScriptedStore
from tests.support.schedules import Background, wait_until

SCHEMA = pa.schema([("x", pa.int64())])
T = TypeVar("T")
INTERVAL = 5  # segments per checkpoint window
SEGMENTS = 43  # 8 windows of 10 offsets (two records a segment), then 3 in the tail
WINDOWS = range(0, 80, 10)


def one(i: int) -> pa.RecordBatch:
    return pa.record_batch({"x": [i, i]}, schema=SCHEMA)


def _history(segments: int = SEGMENTS) -> tuple[Store, str]:
    store = MemoryStore()
    log = arrowlog.connect(store)
    topic = log.create_topic("t", SCHEMA, config=TopicConfig(checkpoint_interval=INTERVAL))
    part = log.partition("t", 0)
    for i in range(segments):
        part.append(one(i))
    return store, topic.prefix


def _window_key(prefix: str, start: int) -> str:
    return checkpoint_key(prefix, 0, start)


def _everything(segments: int = SEGMENTS) -> list[int]:
    return [i for i in range(segments) for _ in range(2)]


def test_a_new_clients_read_from_the_start_fetches_the_old_windows_at_once() -> None:
    """Schedule: a new client reads from offset 0; the GET of the first
    window's checkpoint is held. The GETs of the windows after it are sent
    meanwhile (read one after another, they would wait for it), and the read
    returns every record once released."""
    store, prefix = _history()
    scripted = ScriptedStore(store)
    held = scripted.hold("get", _window_key(prefix, 0))
    reader = arrowlog.connect(scripted)
    read = Background(lambda: reader.read("t", 0))
    held.wait_reached()
    older = {_window_key(prefix, w) for w in WINDOWS[1:-1]}  # the newest was read on opening

    def sent() -> set[str]:
        return {key for op, key in list(scripted.history) if op == "get"} & older

    wait_until(lambda: sent() == older, "the later windows' GETs while the first was held")
    held.release()
    table = read.result()
    assert isinstance(table, pa.Table)
    assert table["x"].to_pylist() == _everything()


def test_a_read_from_the_start_costs_one_listing_and_one_get_per_window() -> None:
    store, prefix = _history()
    counting = CountingStore(store)
    reader = arrowlog.connect(counting)
    assert reader.read("t", 0)["x"].to_pylist() == _everything()
    windows = {k: n for k, n in counting.keys_read.items() if "/checkpoints/" in k}
    assert windows == {_window_key(prefix, w): 1 for w in WINDOWS}
    counting.reset()
    assert reader.read("t", 0).num_rows == 2 * SEGMENTS
    assert not any("/checkpoints/" in k for k in counting.keys_read)  # read once


def test_a_long_chain_is_fetched_window_reads_at_a_time() -> None:
    """Far more windows than WINDOW_READS: the first GET held, only the next
    WINDOW_READS - 1 are sent meanwhile, not the whole chain at once (a read
    that stops early fetches at most that many windows it does not need)."""
    segments = INTERVAL * (3 * WINDOW_READS) + 1
    store, prefix = _history(segments)
    scripted = ScriptedStore(store)
    held = scripted.hold("get", _window_key(prefix, 0))
    reader = arrowlog.connect(scripted)
    read = Background(lambda: reader.read("t", 0))
    held.wait_reached()
    first = {_window_key(prefix, 10 * w) for w in range(WINDOW_READS)}

    def sent() -> set[str]:
        return {key for op, key in list(scripted.history) if op == "get" and "/checkpoints/" in key}

    wait_until(lambda: first <= sent(), "the next windows' GETs while the first was held")
    time.sleep(0.05)  # nothing more is sent while the first is held
    newest = _window_key(prefix, 10 * (segments // INTERVAL - 1))
    assert sent() == first | {newest}
    held.release()
    table = read.result()
    assert isinstance(table, pa.Table)
    assert table["x"].to_pylist() == _everything(segments)


def test_a_short_read_of_old_offsets_fetches_only_its_window() -> None:
    store, prefix = _history()
    counting = CountingStore(store)
    part = arrowlog.connect(counting).partition("t", 0)
    part.end_offset()
    counting.reset()
    assert part.read(22, 26)["x"].to_pylist() == [11, 11, 12, 12]
    windows = {k for k in counting.keys_read if "/checkpoints/" in k}
    assert windows == {_window_key(prefix, 20)}
    assert counting.counts["list"] == 1


def test_a_read_to_a_windows_end_fetches_no_window_after_it() -> None:
    store, prefix = _history()
    counting = CountingStore(store)
    part = arrowlog.connect(counting).partition("t", 0)
    part.end_offset()
    counting.reset()
    assert part.read(20, 30)["x"].to_pylist() == [v for v in range(10, 15) for _ in range(2)]
    assert {k for k in counting.keys_read if "/checkpoints/" in k} == {_window_key(prefix, 20)}


def test_a_window_the_listing_missed_is_read_by_its_key() -> None:
    store, prefix = _history()
    scripted = ScriptedStore(store)
    missed = _window_key(prefix, 30)
    scripted.hide(missed)
    reader = arrowlog.connect(scripted)
    assert reader.read("t", 0)["x"].to_pylist() == _everything()
    assert ("get", missed) in scripted.history


def test_a_corrupt_window_among_those_fetched_at_once_is_rebuilt_from_its_segments() -> None:
    store, prefix = _history()
    corrupt = _window_key(prefix, 20)
    store.delete(corrupt)
    store.put_if_absent(corrupt, b"{not a checkpoint")
    reader = arrowlog.connect(store)
    with pytest.warns(RuntimeWarning, match="rebuilding its window"):
        assert reader.read("t", 0)["x"].to_pylist() == _everything()


def test_a_window_removed_while_the_windows_are_fetched_is_rebuilt_as_before() -> None:
    """Schedule: a new client's read lists every window and fetches them at
    once; the GET of one is held while its checkpoint is removed (as vacuum
    removes windows below the log start, here with the segments still
    there). The read does what a read one window at a time did: it rebuilds
    that window from its segments, with a warning, and returns everything."""
    store, prefix = _history()
    scripted = ScriptedStore(store)
    gone = _window_key(prefix, 40)
    held = scripted.hold("get", gone)
    reader = arrowlog.connect(scripted)
    with pytest.warns(RuntimeWarning, match="rebuilding its window"):
        read = Background(lambda: reader.read("t", 0))
        held.wait_reached()
        store.delete(gone)
        held.release()
        table = read.result()
    assert isinstance(table, pa.Table)
    assert table["x"].to_pylist() == _everything()


def test_a_read_whose_window_gets_keep_failing_gives_up_after_one_retry_deadline(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Schedule: every GET of a checkpoint gets 503 SlowDown. The windows
    fetched at once are each retried until the deadline; the read then raises,
    as a read one window at a time did, without retrying the window it needs
    for a second deadline (it took twice the deadline to fail)."""
    store, _ = _history()
    scripted = ScriptedStore(store)
    retry = RetryPolicy(initial_backoff=0.01, max_backoff=0.02, deadline=0.3)
    reader = arrowlog.connect(scripted, config=LogConfig(retry=retry))
    reader.partition("t", 0).end_offset()
    scripted.throttle("get", "*/checkpoints/*", times=10**9)
    before = len(scripted.history)
    deadlines_run_out = []
    call = RetryPolicy.call

    def counted(self: RetryPolicy, request: Callable[[], T]) -> T:
        try:
            return call(self, request)
        except TransientStoreError:
            deadlines_run_out.append(self)
            raise

    monkeypatch.setattr(RetryPolicy, "call", counted)
    with pytest.raises(TransientStoreError):
        reader.read("t", 0)
    asked = scripted.history[before:]
    windows_asked = {key for op, key in asked if op == "get" and "/checkpoints/" in key}
    assert len(windows_asked) >= 2
    # the read raises when the window it needs gives up; the windows fetched
    # with it give up about then, in the background
    wait_until(lambda: len(deadlines_run_out) >= len(windows_asked), "the windows given up on")
    assert len(deadlines_run_out) == len(windows_asked)  # each window's once


def test_a_corrupt_window_fetched_ahead_is_not_fetched_again(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """A corrupt checkpoint among the windows fetched at once is rebuilt from
    what that GET read: it is read as often as by a read one window at a
    time, not once more per batch that lists it and again by its key."""
    segments = INTERVAL * 3 * WINDOW_READS + 1
    store, prefix = _history(segments)
    corrupt = _window_key(prefix, 10)
    store.delete(corrupt)
    store.put_if_absent(corrupt, b"{not a checkpoint")

    def gets_of_corrupt() -> int:
        counting = CountingStore(store)
        reader = arrowlog.connect(counting)
        reader.partition("t", 0).end_offset()
        counting.reset()
        with pytest.warns(RuntimeWarning, match="rebuilding its window"):
            assert reader.read("t", 0).num_rows == 2 * segments
        return counting.keys_read[corrupt]

    fetched_ahead = gets_of_corrupt()
    monkeypatch.setattr(checkpoints, "WINDOW_READS", 1)
    assert fetched_ahead == gets_of_corrupt()


class _Limits(MemoryStore):
    """A memory store that notes the limit of each listing of checkpoints."""

    def __init__(self) -> None:
        super().__init__()
        self.limits: list[int | None] = []

    def list(
        self, prefix: str, *, start_after: str | None = None, limit: int | None = None
    ) -> Iterator[ObjectInfo]:
        if prefix.endswith("/checkpoints/"):
            self.limits.append(limit)
        return super().list(prefix, start_after=start_after, limit=limit)


def test_a_short_read_of_old_offsets_lists_only_the_windows_it_can_need() -> None:
    """A short read of old offsets on a long log asks for the few windows its
    range can span, not a page of every older one (S3 sends 1,000 keys)."""
    store = _Limits()
    log = arrowlog.connect(store)
    log.create_topic("t", SCHEMA, config=TopicConfig(checkpoint_interval=1))
    part = log.partition("t", 0)
    for i in range(40):
        part.append(one(i))
    reader = arrowlog.connect(store).partition("t", 0)
    reader.end_offset()
    store.limits.clear()
    assert reader.read(22, 26)["x"].to_pylist() == [11, 11, 12, 12]
    assert store.limits and all(n is not None and n <= 5 for n in store.limits), store.limits


def _counted(store: Store) -> tuple[CountingStore, ScriptedStore]:
    """``store`` seen through a request count and a request history."""
    scripted = ScriptedStore(store)
    return CountingStore(scripted), scripted


def _checkpoint_requests(
    counting: CountingStore, scripted: ScriptedStore
) -> tuple[dict[str, int], int]:
    """The checkpoint GETs made (by key), and the checkpoint LISTs."""
    gets = {k: n for k, n in counting.keys_read.items() if "/checkpoints/" in k}
    lists = sum(1 for op, key in scripted.history if op == "list" and "/checkpoints/" in key)
    return gets, lists


def test_the_client_that_wrote_the_windows_reads_them_back_without_a_checkpoint_request() -> None:
    """The writer keeps each checkpoint it writes, as a GET of it would
    return it: its read of the whole log, read_committed or not, is the
    segment GETs alone (and, for a read to the end, a LIST of the tail)."""
    counting, scripted = _counted(MemoryStore())
    log = arrowlog.connect(counting)
    log.create_topic("t", SCHEMA, config=TopicConfig(checkpoint_interval=INTERVAL))
    part = log.partition("t", 0)
    for i in range(SEGMENTS):
        part.append(one(i))
    reads: list[Callable[[], pa.Table]] = [
        lambda: log.read("t", 0),
        lambda: part.read(0, 2 * SEGMENTS),
        lambda: log.consumer(isolation_level="read_uncommitted").read("t", 0),
    ]
    for read in reads:
        counting.reset()
        scripted.history.clear()
        assert read()["x"].to_pylist() == _everything()
        assert counting.counts["get"] == SEGMENTS
        assert {op for op, _ in scripted.history} <= {"get", "list"}
        assert _checkpoint_requests(counting, scripted) == ({}, 0)


def test_a_new_clients_committed_read_walks_the_windows_once() -> None:
    """A read_committed read plans its range (the batches' summaries, through
    the windows) and fetches the segments of that plan: one LIST of the
    windows and one GET of each, not a second walk for the fetch."""
    store, prefix = _history()
    counting, scripted = _counted(store)
    reader = arrowlog.connect(counting)
    reader.partition("t", 0).end_offset()  # opened: the newest window read
    counting.reset()
    scripted.history.clear()
    assert reader.read("t", 0)["x"].to_pylist() == _everything()
    windows = {_window_key(prefix, w): 1 for w in WINDOWS[:-1]}
    assert _checkpoint_requests(counting, scripted) == (windows, 1)


def test_a_read_past_the_cached_windows_lists_from_the_first_it_lacks() -> None:
    """A client that read the first windows reads the whole log: the windows
    it holds cost nothing, one LIST starts at the first it lacks, and the
    later ones are fetched at once (a held GET of that first one does not
    hold them back)."""
    store, prefix = _history()
    counting, scripted = _counted(store)
    part = arrowlog.connect(counting).partition("t", 0)
    assert part.read(0, 30).num_rows == 30  # windows 0, 10 and 20, and the newest (70)
    assert _checkpoint_requests(counting, scripted)[0] == {
        _window_key(prefix, w): 1 for w in (0, 10, 20, 70)
    }
    counting.reset()
    scripted.history.clear()
    held = scripted.hold("get", _window_key(prefix, 30))
    reading = Background(lambda: part.read(0, 2 * SEGMENTS))
    held.wait_reached()
    later = {_window_key(prefix, w) for w in (40, 50, 60)}
    wait_until(lambda: later <= set(counting.keys_read), "the later windows fetched")
    held.release()
    table = reading.result()
    assert isinstance(table, pa.Table) and table["x"].to_pylist() == _everything()
    windows = {_window_key(prefix, w): 1 for w in (30, 40, 50, 60)}
    assert _checkpoint_requests(counting, scripted) == (windows, 1)
