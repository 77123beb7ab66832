"""Many writers on one partition: does adding writers add appends?

Each writer is its own OS process (threads would share one GIL) with its own
``arrowlog.connect`` client, forked from a forkserver that imported arrowlog
and never used a store (obstore hangs in a fork of a process that has; a
spawned interpreter per writer costs a second of CPU). The writers of a row
open their partition, wait at a barrier, then append 64 KiB batches for a
fixed time, each measuring every append's wall time (the acknowledgement
latency). A row counts the appends acknowledged within its time; an append
a writer had started when time ran out may still finish (and is timed) for a
while, then it is cut.

Two layouts: *shared*, every writer appends to partition 0 of one topic;
*spread*, writer i appends to partition i of a topic of 16 partitions (what
as many independent writers get from this machine and store). Two kinds of
writer: a plain ``PartitionLog.append`` and an idempotent producer (``send``
to the partition, then ``flush``: each send acknowledged before the next). A
64-writer shared row checks that no writer starves.

The processes are kept for the whole suite and take one job per row; they
stop when told to, by themselves once the process that started them is gone,
or when a row's watchdog cuts a starving writer (see ``_Writer``).
"""

from __future__ import annotations

import multiprocessing
import os
import queue
import threading
import time
import traceback
import uuid
from array import array
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any, Literal

import arrowlog
from arrowlog.config import Compression
from arrowlog.storage import Store
from arrowlog.storage.url import open_store
from arrowlog.testing.faulty import Faults, FaultyStore
from bench.backend import Backend
from bench.core import config, make_batch
from bench.figures import WriterRun, summarize_row

Kind = Literal["append", "producer"]
Layout = Literal["shared", "spread"]
KINDS: tuple[Kind, ...] = ("append", "producer")
LAYOUTS: tuple[Layout, ...] = ("shared", "spread")
WRITER_COUNTS = (1, 2, 4, 8, 16)
#: the starvation check's writers (shared layout, plain appends)
CROWD = 64
#: partitions of the spread layout's topic: one per writer of the largest row
SPREAD_PARTITIONS = 16
BATCH_BYTES = 64 << 10
KIND_NAMES = {"append": "plain append", "producer": "idempotent producer"}
#: how long a writer waits at the barrier for the others, and the parent for
#: a row's outcomes beyond its duration (a starving writer's last append may
#: take long): past these the suite fails instead of hanging
BARRIER_S = 120.0
OUTCOME_GRACE_S = 60.0
#: how long after a row's end a writer's last append may still take before
#: its process ends itself (see _Writer)
CUT_AFTER_S = 2.0


@dataclass(frozen=True)
class Job:
    """One writer's part of one row."""

    url: str
    options: dict[str, Any]
    topic: str
    partition: int
    kind: Kind
    seconds: float
    writers: int  # which barrier: the row's size
    #: staged appends on (docs/protocol.md, "Staged appends"); the writer then
    #: appends once before the start, as a running writer has (a client's
    #: first staged batch is its own to commit)
    staged: bool = True
    #: each of the writer's requests first waits a uniform time in [0, this]
    #: ms: a store farther away than the one on this machine
    delay_ms: float = 0.0


@dataclass(frozen=True)
class Outcome:
    worker: int
    run: WriterRun | None
    error: str | None = None


def _send(part: arrowlog.PartitionLog, producer: arrowlog.Producer | None, batch: Any) -> None:
    if producer is None:
        part.append(batch)
    else:
        producer.send(part.topic.name, batch, partition=part.partition)
        producer.flush()  # acknowledged before the next send, whatever send returns


def _store(job: Job) -> Store:
    store = open_store(job.url, job.options)
    if job.delay_ms:
        store = FaultyStore(store, Faults(latency=job.delay_ms / 1000))
    return store


class _Writer:
    """One writer's loop over one row, and the watchdog that ends its process
    if an append is still unacknowledged :data:`CUT_AFTER_S` after the row's
    end (the store's retries can hold a starving writer for a minute): it
    reports what the writer did, that append's wait so far as its latency (a
    lower bound, counted as ``cut``), and exits; the pool starts another."""

    def __init__(self, worker: int, job: Job, outcomes: Any) -> None:
        self.worker, self.job, self.outcomes = worker, job, outcomes
        self.latencies = array("d")
        self.failures = self.in_time = 0
        self.part: arrowlog.PartitionLog | None = None
        self.started = 0.0  # when the append in flight began
        self.reported = threading.Lock()  # whoever takes it reports

    def run(self, barrier: Any, batch: Any) -> None:
        job = self.job
        try:
            config = arrowlog.LogConfig(staged_appends=job.staged)
            log = arrowlog.connect(_store(job), config=config)
            # the producer appends through the client's own (cached) partition log
            part = self.part = log.partition(job.topic, job.partition)
            part.end_offset()  # opened before the start, as a running writer is
            producer = log.producer() if job.kind == "producer" else None
            if job.staged:
                _send(part, producer, batch)
        except BaseException:
            barrier.abort()  # the others stop waiting at once
            raise
        barrier.wait(BARRIER_S)
        deadline = time.perf_counter() + job.seconds
        watchdog = threading.Thread(target=self._cut, args=(deadline + CUT_AFTER_S,), daemon=True)
        watchdog.start()
        try:
            while (started := time.perf_counter()) < deadline:
                self.started = started
                try:
                    _send(part, producer, batch)
                except arrowlog.ArrowLogError as e:
                    if not e.retriable:
                        raise
                    self.failures += 1  # retriable: counted, and the writer goes on
                    continue
                acknowledged = time.perf_counter()
                self.latencies.append(acknowledged - started)
                self.in_time += acknowledged <= deadline
        finally:
            # the watchdog stands down (while it holds the lock, it ends the process)
            self.reported.acquire()
        if producer is not None:
            producer.close()
        log.close()
        self.outcomes.put(Outcome(self.worker, self._run(cut=0)))

    def _run(self, cut: int) -> WriterRun:
        assert self.part is not None
        conflicts = self.part.stats.get("conflicts", 0)
        return WriterRun(self.in_time, self.latencies.tolist(), conflicts, self.failures, cut)

    def _cut(self, at: float) -> None:
        time.sleep(max(0.0, at - time.perf_counter()))
        if not self.reported.acquire(blocking=False):
            return  # the writer finished in time
        self.latencies.append(time.perf_counter() - self.started)
        self.outcomes.put(Outcome(self.worker, self._run(cut=1)))
        self.outcomes.close()
        self.outcomes.join_thread()  # the outcome is in the pipe before the process ends
        os._exit(0)


def _serve(worker: int, jobs: Any, outcomes: Any, barriers: dict[int, Any]) -> None:
    """A writer process: one job per row until told to stop (None), until
    the process that started it is gone, or until a row's watchdog ends it."""
    batch = make_batch(BATCH_BYTES)
    parent = multiprocessing.parent_process()
    while True:
        try:
            job = jobs.get(timeout=1.0)
        except queue.Empty:
            if parent is not None and not parent.is_alive():
                return
            continue
        if job is None:
            return
        try:
            _Writer(worker, job, outcomes).run(barriers[job.writers], batch)
        except Exception:  # noqa: BLE001 - reported to the parent, which fails the row
            outcomes.put(Outcome(worker, None, traceback.format_exc()))


class WriterPool:
    """Writer processes, started on demand and kept between rows."""

    def __init__(self, sizes: Sequence[int]) -> None:
        self._context = multiprocessing.get_context("forkserver")
        # one server imports arrowlog once and forks every writer from that
        # clean state: spawning 64 interpreters costs a minute of this
        # machine's two cores, a fork milliseconds. The server has used no
        # store (obstore's runtime hangs in a fork of a process that has).
        self._context.set_forkserver_preload(["bench.writers", "bench.__main__"])
        self._barriers = {n: self._context.Barrier(n) for n in sizes}
        self._outcomes: Any = self._context.Queue()
        self._workers: list[tuple[Any, Any]] = []  # (process, its job queue)

    def _start(self, worker: int) -> tuple[Any, Any]:
        jobs = self._context.Queue()
        process = self._context.Process(
            target=_serve,
            args=(worker, jobs, self._outcomes, self._barriers),
            name=f"bench-writer-{worker}",
            daemon=True,
        )
        process.start()
        return process, jobs

    def _ready(self, count: int) -> None:
        """``count`` live workers: new ones, and new ones for those a watchdog ended."""
        for i, (process, _) in enumerate(self._workers[:count]):
            if not process.is_alive():
                process.join()
                self._workers[i] = self._start(i)
        while len(self._workers) < count:
            self._workers.append(self._start(len(self._workers)))

    def run(self, jobs: Sequence[Job]) -> list[WriterRun]:
        """Each job on its own process, started together; every writer's run.

        Raises:
            RuntimeError: a writer failed, or a row did not end in time.
        """
        self._ready(len(jobs))
        for (_, queue_), job in zip(self._workers, jobs, strict=False):
            queue_.put(job)
        wait = max(job.seconds for job in jobs) + OUTCOME_GRACE_S + BARRIER_S
        outcomes: list[Outcome] = []
        give_up = time.monotonic() + wait
        while len(outcomes) < len(jobs):
            try:
                outcomes.append(self._outcomes.get(timeout=max(0.1, give_up - time.monotonic())))
            except queue.Empty:
                raise RuntimeError(f"{len(jobs) - len(outcomes)} writers did not report") from None
        failed = [o.error for o in outcomes if o.error is not None]
        if failed:
            for barrier in self._barriers.values():
                barrier.reset()
            raise RuntimeError("a writer failed:\n" + failed[0])
        return [o.run for o in sorted(outcomes, key=lambda o: o.worker) if o.run is not None]

    def close(self) -> None:
        for _, jobs in self._workers:
            jobs.put(None)
        for process, _ in self._workers:
            process.join(10)
            if process.is_alive():
                process.terminate()  # one of ours that did not stop when told
                process.join(5)


@contextmanager
def writer_pool(sizes: Sequence[int]) -> Iterator[WriterPool]:
    pool = WriterPool(sizes)
    try:
        yield pool
    finally:
        pool.close()


def bench_row(
    pool: WriterPool,
    backend: Backend,
    kind: Kind,
    layout: Layout,
    writers: int,
    seconds: float,
    staged: bool = True,
    delay_ms: float = 0.0,
) -> dict[str, Any]:
    """One row: ``writers`` processes appending to a new topic for ``seconds``
    (and how long the row took, stragglers and all: ``wall_s``)."""
    began = time.perf_counter()
    partitions = SPREAD_PARTITIONS if layout == "spread" else 1
    topic = f"writers-{kind}-{layout}-{writers}-{uuid.uuid4().hex[:6]}"
    schema = make_batch(BATCH_BYTES).schema
    with arrowlog.connect(backend.url, backend.options) as log:
        log.create_topic(topic, schema, partitions, config=config(Compression.NONE))
    jobs = [
        Job(backend.url, backend.options, topic, i if layout == "spread" else 0, kind, seconds,
            writers, staged, delay_ms)
        for i in range(writers)
    ]  # fmt: skip
    runs = pool.run(jobs)
    row: dict[str, Any] = summarize_row(runs, seconds)
    return row | {"wall_s": time.perf_counter() - began, "counts": [r.appends for r in runs]}


def bench_writers(
    found: Sequence[Backend],
    *,
    kinds: Sequence[Kind] = KINDS,
    seconds: float = 4.0,
    counts: Sequence[int] = WRITER_COUNTS,
    crowd: int = CROWD,
    staged: bool = True,
    delay_ms: float = 0.0,
) -> dict[str, Any]:
    """The scaling table for every backend, kind, layout and writer count,
    and the starvation check (``crowd`` writers, shared, plain appends) on
    every backend; ``crowd`` 0 leaves it out."""
    rows: list[dict[str, Any]] = []
    starvation: dict[str, dict[str, Any]] = {}
    sizes = sorted({*counts, *([crowd] if crowd else [])})
    with writer_pool(sizes) as pool:
        for backend in found:
            for kind in kinds:
                for layout in LAYOUTS:
                    for n in counts:
                        print(f"[{backend.name}] {n} writers, {layout}, {KIND_NAMES[kind]} ...",
                              end=" ", flush=True)  # fmt: skip
                        row = bench_row(pool, backend, kind, layout, n, seconds, staged,
                                        delay_ms)  # fmt: skip
                        print(f"{row['wall_s']:.1f} s", flush=True)
                        rows.append({"backend": backend.name, "kind": kind, "layout": layout}
                                    | row)  # fmt: skip
            if crowd:
                print(f"[{backend.name}] {crowd} writers, shared, plain append ...", end=" ",
                      flush=True)  # fmt: skip
                row = bench_row(pool, backend, "append", "shared", crowd, seconds, staged,
                                delay_ms)  # fmt: skip
                print(f"{row['wall_s']:.1f} s", flush=True)
                starvation[backend.name] = row
    for row in rows:
        single = _single_writer_row(rows, row)
        row["vs_one_writer"] = row["appends_per_s"] / single["appends_per_s"] if single else 0.0
    for name, row in starvation.items():
        single = _single_writer_row(rows, {"backend": name, "kind": "append", "layout": "shared"})
        row["one_writer_p99_ms"] = single["p99_ms"] if single else 0.0
        row["p99_vs_one_writer"] = row["p99_ms"] / single["p99_ms"] if single else 0.0
    return {
        "batch_bytes": BATCH_BYTES,
        "seconds_per_row": seconds,
        "spread_partitions": SPREAD_PARTITIONS,
        "delay_ms": delay_ms,
        "rows": rows,
        "starvation": starvation,
    }


def _single_writer_row(rows: list[dict[str, Any]], like: dict[str, Any]) -> dict[str, Any] | None:
    for row in rows:
        if row["writers"] == 1 and all(row[k] == like[k] for k in ("backend", "kind", "layout")):
            return row
    return None


def _p99(row: dict[str, Any]) -> str:
    """p99, marked as a lower bound where an append was cut."""
    return f"{'>=' if row['cut'] else ''}{row['p99_ms']:.1f}"


def print_writers(results: dict[str, Any]) -> None:
    rows: list[dict[str, Any]] = results["rows"]
    for kind in KINDS:
        of_kind = [r for r in rows if r["kind"] == kind]
        if not of_kind:
            continue
        mode = "" if results.get("staged_appends", True) else " (staged appends off)"
        if results.get("delay_ms"):
            mode += f" (each request delayed 0-{results['delay_ms']:g} ms)"
        print(f"Writers per partition{mode}, {KIND_NAMES[kind]}: "
              f"{results['batch_bytes'] >> 10} KiB batches, {results['seconds_per_row']:g} s "
              f"per row after a barrier start, one "
              f"OS process and client per writer; shared = all on partition 0, spread = "
              f"writer i on partition i of {results['spread_partitions']}")  # fmt: skip
        print(f"{'backend':<10} {'layout':<7} {'writers':>7} {'appends/s':>10} {'x 1':>6} "
              f"{'slowest':>8} {'fastest':>8} {'p50 ms':>7} {'p99 ms':>9} "
              f"{'conflicts/append':>16} {'cut':>4}")  # fmt: skip
        for r in of_kind:
            failures = f"  ({r['failures']:.0f} retriable failures)" if r["failures"] else ""
            print(f"{r['backend']:<10} {r['layout']:<7} {r['writers']:>7.0f} "
                  f"{r['appends_per_s']:>10.1f} {r['vs_one_writer']:>6.2f} {r['slowest']:>8.0f} "
                  f"{r['fastest']:>8.0f} {r['p50_ms']:>7.1f} {_p99(r):>9} "
                  f"{r['conflicts_per_append']:>16.2f} {r['cut']:>4.0f}{failures}")  # fmt: skip
        print(f"(slowest/fastest: one writer's appends acknowledged in the row's time; cut: "
              f"appends still unacknowledged {CUT_AFTER_S:g} s after it, their wait so far "
              f"counted, so p99 is a lower bound there)")  # fmt: skip
        print()
    for name, r in results["starvation"].items():
        print(f"Starvation check on {name}: {r['writers']:.0f} writers, one partition, plain "
              f"append, {results['seconds_per_row']:g} s: {r['appends_per_s']:.1f} appends/s, "
              f"slowest writer {r['slowest']:.0f} appends, fastest {r['fastest']:.0f}; p50 "
              f"{r['p50_ms']:.1f} ms, p99 {_p99(r)} ms = {r['p99_vs_one_writer']:.1f}x the "
              f"1-writer p99 ({r['one_writer_p99_ms']:.1f} ms); "
              f"{r['conflicts_per_append']:.2f} conflicts per append; {r['starved']:.0f} of "
              f"{r['writers']:.0f} writers got no append acknowledged in the time, "
              f"{r['cut']:.0f} were cut")  # fmt: skip
    if results["starvation"]:
        print()
