"""The soak's parent: start the clients, kill and restart them, stop, recover,
read the whole log once more, and check the histories against it.

Every random choice of the parent comes from ``random.Random(f"{seed}/{slot}")``
(one generator per slot, so threads do not reorder each other's draws) and each
client gets a seed drawn from its slot's generator: ``--seed`` replays the same
plan of kills, clock skews and scheduled faults (the interleaving of processes
is up to the machine).
"""

from __future__ import annotations

import contextlib
import json
import os
import queue
import random
import signal
import subprocess
import sys
import threading
import time
import uuid
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import arrowlog
from arrowlog import TopicConfig
from arrowlog.errors import ArrowLogError
from arrowlog.testing import azurite, fakegcs, seaweedfs
from tests.soak import exports, spark_checker, spark_writer
from tests.soak.chaos import KillPoint
from tests.soak.checker import KILLED, WORK, Report, check, work_missing
from tests.soak.clients import CLIENT_CONFIG, KILL_PATTERNS
from tests.soak.history import History, now, read_dir
from tests.soak.model import (
    CHECKPOINT_INTERVAL,
    COPY_TIDS,
    CROWD,
    GROUP,
    IN,
    IN_PARTITIONS,
    IN_SCHEMA,
    OUT,
    OUT_PARTITIONS,
    OUT_SCHEMA,
    SP,
    SP_PARTITIONS,
    SP_SCHEMA,
    TXN_TIMEOUT_MS,
    tp,
)
from tests.support.stores import StoreSpec

ROOT = Path(__file__).resolve().parents[2]
ONE_DAY = 86_400.0
#: How long clients get to finish their current operation once told to stop.
STOP_GRACE = 10.0
#: How long a client may take to start before its kill timer runs anyway.
READY_TIMEOUT = 30.0
#: how long a client stays down when it waits out its transaction's timeout (plus the
#: second of rounding of S3 object times, and the expirer's own pace)
DOWN_PAST_TIMEOUT = TXN_TIMEOUT_MS / 1000 + 2.5
#: what the histories cannot show: a crowd producer's batch staged in the log
#: (read from the store; a crowd producer stages one when it loses the race for the end)
STAGED = "a staged batch"
#: the Spark writer goes on after the soak until killed this often (a Spark
#: session takes 10-30 s to start: a short soak would kill it once or not at all)
SPARK_KILLS = 2
#: ... but no longer than this after the soak
SPARK_OVERTIME = 300.0
#: how long the soak may go on past its seconds until its clients have done
#: the work that makes it worth checking (tests.soak.checker.work_missing)
OVERTIME = 60.0
#: ... and in it, the clients' lives (``pace``) double now and after every so many seconds
SLOWER_EVERY = 15.0
#: how long a Spark client killed alone may leave its JVM and planner running
#: before they are killed
ORPHAN_WAIT = 5.0


class Process:
    """A client process forked by the zygote."""

    def __init__(self, pid: int) -> None:
        self.pid = pid
        self.ready = threading.Event()
        self.done = threading.Event()
        self.returncode: int | None = None

    def kill(self, *, alone: bool = False) -> None:
        """SIGKILL its process group (itself and whatever it started), or
        ``alone`` the process itself, unless it has ended already."""
        if not self.done.is_set():
            with contextlib.suppress(ProcessLookupError):
                if alone:
                    os.kill(self.pid, signal.SIGKILL)
                    return
                try:
                    os.killpg(self.pid, signal.SIGKILL)
                except ProcessLookupError:  # not yet the leader of its group
                    os.kill(self.pid, signal.SIGKILL)


class Zygote:
    """Talks to ``python -m tests.soak.zygote``, which forks the clients."""

    def __init__(self, logs: Path) -> None:
        env = {**os.environ, "PYTHONPATH": str(ROOT)}
        with (logs / "zygote.log").open("ab") as err:
            self._proc = subprocess.Popen(
                [sys.executable, "-m", "tests.soak.zygote"],
                cwd=ROOT, env=env, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=err,
            )  # fmt: skip
        self._pids: queue.Queue[int] = queue.Queue()
        self._procs: dict[int, Process] = {}
        self._early: dict[int, list[tuple[str, int]]] = {}
        self._lock = threading.Lock()
        self._spawning = threading.Lock()
        self._listener = threading.Thread(target=self._listen, daemon=True)
        self._listener.start()

    def _listen(self) -> None:
        assert self._proc.stdout is not None
        for raw in self._proc.stdout:
            what, *rest = raw.decode().split()
            if what == "PID":
                self._pids.put(int(rest[0]))
            elif what in ("READY", "EXIT"):
                pid, code = int(rest[0]), int(rest[1]) if what == "EXIT" else 0
                with self._lock:
                    proc = self._procs.get(pid)
                    if proc is None:
                        self._early.setdefault(pid, []).append((what, code))
                        continue
                _apply(proc, what, code)

    def spawn(self, argv: list[str], log: Path) -> Process:
        assert self._proc.stdin is not None
        with self._spawning:  # PID replies come back in request order
            self._proc.stdin.write((json.dumps({"argv": argv, "log": str(log)}) + "\n").encode())
            self._proc.stdin.flush()
            pid = self._pids.get(timeout=120)
        proc = Process(pid)
        with self._lock:
            self._procs[pid] = proc
            early = self._early.pop(pid, [])
        for what, code in early:
            _apply(proc, what, code)
        return proc

    def close(self) -> None:
        with contextlib.suppress(OSError):
            assert self._proc.stdin is not None
            self._proc.stdin.close()
        try:
            self._proc.wait(timeout=STOP_GRACE + 10)
        except subprocess.TimeoutExpired:
            self._proc.kill()
            self._proc.wait()
        self._listener.join(timeout=10)
        assert self._proc.stdout is not None
        self._proc.stdout.close()


def _apply(proc: Process, what: str, code: int) -> None:
    if what == "READY":
        proc.ready.set()
    else:
        proc.returncode = code
        proc.done.set()


@dataclass(frozen=True)
class Plan:
    """How one client process ends: SIGKILLed after ``timer`` seconds, or at a
    protocol point (its own store kills it) with ``timer`` as a backstop."""

    timer: float
    point: KillPoint | None = None
    #: the timer kills the process alone, not its group (what it started lives on)
    alone: bool = False


class Soak:
    def __init__(
        self,
        spec: StoreSpec,
        *,
        seconds: float,
        seed: int,
        workdir: Path,
        spark: bool = False,
        overtime: float = OVERTIME,
    ) -> None:
        self.spec = spec
        self.spark = spark
        self.seconds = seconds
        self.overtime = overtime
        #: how long the run went on past ``seconds``, and what it still lacked then
        self.went_on = 0.0
        self.lacking: list[str] = []
        self.staged_seen = False
        #: in overtime, the roles whose work is done: they are not restarted,
        #: and running ones are killed, so the machine serves the others
        self.resting: frozenset[str] = frozenset()
        self.roles: frozenset[str] = frozenset()  # of the slots (not the Spark writer's)
        self.seed = seed
        self.workdir = workdir
        self.histories = workdir / "history"
        self.logs = workdir / "logs"
        self.stop_file = workdir / "STOP"
        self.tables = workdir / "tables"
        self.stopping = threading.Event()
        #: the Spark writer outlives the soak until it was killed enough (SPARK_KILLS)
        self.spark_stop_file = workdir / "STOP-spark"
        self.spark_stopping = threading.Event()
        # Requests to S3 take tens of milliseconds, not tens of microseconds:
        # clients there live longer between kills, or they would do nothing.
        self.pace = 2.0 if spec.kind == "s3" else 1.0
        self.history = History(self.histories / "parent.jsonl", slot="parent", role="parent")
        self._procs: set[Process] = set()
        self._lock = threading.Lock()

    # --- one client process ---------------------------------------------------------

    def _spawn(self, slot: str, role: str, seed: int, extra: list[str]) -> Process:
        stop_file = self.spark_stop_file if role == "spark" else self.stop_file
        argv = [role, *self.spec.argv(), "--history", str(self.histories), "--slot", slot,
                "--seed", str(seed), "--stop-file", str(stop_file), *extra]  # fmt: skip
        proc = self.zygote.spawn(argv, self.logs / f"{slot}.log")
        with self._lock:
            self._procs.add(proc)
        return proc

    def run_client(
        self, slot: str, role: str, rng: random.Random, extra: list[str], plan: Plan | None = None
    ) -> str | None:
        """Run one client process to its end (planned kill, exit, or stop); how
        it was killed (``timer``, ``point``, ``stop``), or None."""
        plan = plan or self._plan(role, rng)
        spark = role == "spark"
        stopping = self.spark_stopping if spark else self.stopping
        if plan.point is not None:
            extra = [*extra, "--die-at", plan.point.text()]
        if role == "expirer":
            extra = [*extra, "--clock-skew", str(rng.choice([ONE_DAY, -ONE_DAY]))]
        proc = self._spawn(slot, role, rng.randrange(2**31), extra)
        self.history.event("spawn", proc=proc.pid, client=slot, client_role=role,
                           timer=plan.timer, point=plan.point and plan.point.text(),
                           alone=plan.alone, args=extra)  # fmt: skip
        killed = None
        # The timer starts once the client is up: a client killed before its
        # first request tests nothing.
        deadline = time.monotonic() + (spark_writer.READY_TIMEOUT if spark else READY_TIMEOUT)
        started = False
        while not proc.done.is_set():
            if not started and proc.ready.is_set():
                started = True
                deadline = time.monotonic() + plan.timer * self.pace
            if role in self.resting:
                proc.kill()
                killed = "rest"
                break
            if stopping.is_set():
                if not proc.done.wait(STOP_GRACE):
                    proc.kill()
                    killed = "stop"
                break
            if time.monotonic() >= deadline:
                proc.kill(alone=plan.alone)
                killed = "timer"
                break
            proc.done.wait(0.05)
        proc.done.wait(60)
        code = proc.returncode
        with self._lock:
            self._procs.discard(proc)
        if killed is None and code == -9:
            killed = "point"  # its own store (or its planner) killed it where the plan said
        self.history.event("exit", proc=proc.pid, client=slot, client_role=role,
                           returncode=code, killed=killed)  # fmt: skip
        if spark:
            self._reap_group(proc, slot, killed)
        return killed

    def _reap_group(self, proc: Process, slot: str, killed: str | None) -> None:
        """What a Spark client started (its JVM, the JVM's planner) may outlive
        it when it was killed alone: record for how long, then kill it."""
        started = time.monotonic()
        alive = _live_members(proc.pid)
        while alive and time.monotonic() - started < ORPHAN_WAIT:
            time.sleep(0.1)
            alive = _live_members(proc.pid)
        self.history.event("orphans", proc=proc.pid, client=slot, alive=alive, killed=killed,
                           seconds=round(time.monotonic() - started, 2))  # fmt: skip
        with contextlib.suppress(ProcessLookupError):
            os.killpg(proc.pid, signal.SIGKILL)

    def _plan(self, role: str, rng: random.Random) -> Plan:
        patterns = KILL_PATTERNS[role]
        draw = rng.random()
        if role == "reader":  # it writes nothing: a kill mostly costs reads
            return Plan(rng.uniform(5.0, 20.0))
        if role == "exporter":  # long enough to finish an export now and then
            return Plan(rng.uniform(2.0, 12.0))
        if patterns and draw < 0.35:
            point = KillPoint(
                rng.choice(patterns), rng.randint(1, 30), rng.choice(["before", "after"])
            )
            return Plan(rng.uniform(3.0, 10.0), point)
        if draw < 0.85:
            return Plan(rng.uniform(1.0, 5.0))
        return Plan(rng.uniform(8.0, 20.0))

    # --- slots ----------------------------------------------------------------------

    def _slot(self, slot: str, role: str, extra: list[str]) -> None:
        rng = random.Random(f"{self.seed}/{slot}")
        while not self.stopping.is_set():
            if role in self.resting:
                self.stopping.wait(0.5)
                continue
            self.run_client(slot, role, rng, extra)
            # Now and then a transactional client stays down past its
            # transaction's timeout, so that the expirer (not the next instance)
            # ends what it left open.
            down = DOWN_PAST_TIMEOUT if role in ("copier", "job") and rng.random() < 0.2 else 0.0
            self.stopping.wait(down + rng.uniform(0.05, 0.4))

    def _spark(self) -> None:
        """The Spark writer, one instance after another, each killed; once the
        soak is over and it was killed SPARK_KILLS times, a last instance
        (never killed) that writes two versions and ends."""
        rng = random.Random(f"{self.seed}/spark")
        first = rng.randrange(len(spark_writer.STEPS))
        kills = n = 0
        while not (self.stopping.is_set() and kills >= SPARK_KILLS):
            if self.spark_stopping.is_set():
                return
            plan = Plan(*spark_writer.plan(rng, n, first))
            n += 1
            if self.run_client("spark", "spark", rng, [], plan=plan) in ("timer", "point"):
                kills += 1
            self.spark_stopping.wait(rng.uniform(0.05, 0.4))
        last = Plan(spark_writer.READY_TIMEOUT)
        self.run_client("spark", "spark", rng, ["--max-txns", "2"], plan=last)

    def _twins(self) -> None:
        """Now and then, one or two more processes for a copier's transactional id,
        started at the same instant: their inits race each other and the main
        copier's, and whoever loses is a zombie until it notices."""
        rng = random.Random(f"{self.seed}/twins")
        threads = []
        n = 0
        while not self.stopping.wait(rng.uniform(1.5, 4.0) * self.pace):
            if "copier" in self.resting:
                continue
            tid = rng.choice(COPY_TIDS)
            start_at = now() + 1.0
            for _ in range(rng.choice([1, 1, 2])):
                n += 1
                extra = [
                    "--tid",
                    tid,
                    "--max-txns",
                    str(rng.randint(1, 3)),
                    "--start-at",
                    str(start_at),
                ]
                twin_rng = random.Random(rng.randrange(2**31))
                t = threading.Thread(
                    target=self.run_client,
                    args=(f"twin{n}", "copier", twin_rng, extra),
                    daemon=True,
                )
                t.start()
                threads.append(t)
        for t in threads:
            t.join()

    def _recreate(self) -> None:
        """Delete ``exp`` and create it again, once, a little before halfway."""
        if self.stopping.wait(self.seconds * 0.4):
            return
        with arrowlog.connect(self.spec.url, self.spec.options, config=CLIENT_CONFIG) as log:
            exports.recreate(log, self.history)

    # --- the run --------------------------------------------------------------------

    def setup(self) -> None:
        for d in (self.histories, self.logs):
            d.mkdir(parents=True, exist_ok=True)
        with contextlib.suppress(FileNotFoundError):
            self.stop_file.unlink()
        config = TopicConfig(checkpoint_interval=CHECKPOINT_INTERVAL)
        with self.spec.connect() as log:
            log.create_topic(IN, IN_SCHEMA, partitions=IN_PARTITIONS, config=config)
            log.create_topic(OUT, OUT_SCHEMA, partitions=OUT_PARTITIONS, config=config)
            if self.spark:
                log.create_topic(SP, SP_SCHEMA, partitions=SP_PARTITIONS, config=config)
            exports.create_topic(log)
        self.tables.mkdir(parents=True, exist_ok=True)

    def run(self) -> Report:
        self.setup()
        self.zygote = Zygote(self.logs)
        slots: list[tuple[str, str, list[str]]] = [
            (role, role, []) for role in ("producer", "job", "expirer", "reader")
        ]
        slots += [(tid, "copier", ["--tid", tid]) for tid in COPY_TIDS]
        slots += [(f"crowd.{i}", "crowd", []) for i in range(CROWD)]
        slots += [(role, role, []) for role in ("feeder", "compactor", "vacuum")]
        slots += [
            (f"{kind}.{twin}", "exporter", ["--kind", kind, "--tables", str(self.tables)])
            for kind in exports.EXPORT_KINDS
            for twin in ("a", "b")
        ]
        self.roles = frozenset(role for _, role, _ in slots)
        threads = [threading.Thread(target=self._slot, args=s, daemon=True) for s in slots]
        threads.append(threading.Thread(target=self._twins, daemon=True))
        threads.append(threading.Thread(target=self._recreate, daemon=True))
        spark = threading.Thread(target=self._spark, daemon=True)
        self.history.event("soak", seed=self.seed, seconds=self.seconds, url=self.spec.url,
                           spark=self.spark)  # fmt: skip
        try:
            for t in threads:
                t.start()
            if self.spark:
                spark.start()
            self.stopping.wait(self.seconds)
            self._until_worth_checking()
        finally:
            self.stop_file.touch()
            self.stopping.set()
            for t in threads:
                t.join(timeout=STOP_GRACE + 30)
            if self.spark:
                spark.join(timeout=SPARK_OVERTIME)
                self.spark_stop_file.touch()
                self.spark_stopping.set()
                spark.join(timeout=STOP_GRACE + 30)
            with self._lock:
                for proc in self._procs:
                    proc.kill()
            self.zygote.close()
        final_sp = None
        if self.spark:
            with self.spec.connect() as log:
                final_sp = {"before_recovery": spark_checker.final_read(log)}
        self.recover()
        with arrowlog.connect(self.spec.url, self.spec.options, config=CLIENT_CONFIG) as log:
            export_errors = exports.final_export(log, self.tables, self.history)
            final_exp = {**exports.final_read(log), "export_errors": export_errors}
        self.history.close()
        with self.spec.connect() as log:
            final = final_read(log)
        tables = exports.read_tables(self.tables)
        (self.workdir / "final.json").write_text(json.dumps(final))
        (self.workdir / "final-exports.json").write_text(json.dumps({**final_exp, **tables}))
        events = read_dir(self.histories)
        report = check(events, final)
        exports.check_exports(events, final_exp, tables, report)
        if final_sp is not None:
            with self.spec.connect() as log:
                final_sp["after_recovery"] = spark_checker.final_read(log)
            (self.workdir / "final-spark.json").write_text(json.dumps(final_sp))
            spark_checker.check_spark(events, final_sp, report)
        return report

    def _until_worth_checking(self) -> None:
        """Go on past ``seconds`` until the clients' histories show the work
        that makes the run worth checking, for at most ``overtime`` seconds:
        the clients it starts meanwhile live longer, and only the roles whose
        work is lacking run (on a busy machine the crowd's sixteen producers
        can starve a transaction for a minute)."""
        started = slowed = time.monotonic()
        self.lacking = self._work_missing()
        if self.lacking:
            self.pace *= 2
        while self.lacking and time.monotonic() - started < self.overtime:
            self._rest()
            time.sleep(1.0)
            self.lacking = self._work_missing()
            if time.monotonic() - slowed >= SLOWER_EVERY:
                # Clients killed before they finish anything (an export on a
                # machine this busy): the next ones live longer.
                slowed = time.monotonic()
                self.pace *= 2
        self.went_on = time.monotonic() - started
        self.history.event("overtime", seconds=round(self.went_on, 1), lacking=self.lacking)

    def _work_missing(self) -> list[str]:
        lacking = work_missing(read_dir(self.histories))
        if not self.staged_seen:
            try:
                with self.spec.connect() as log:
                    summaries = log.partition(IN, 0).summaries()
            except ArrowLogError:
                summaries = []
            self.staged_seen = any(s.at is not None for s in summaries)
        return lacking if self.staged_seen else [*lacking, STAGED]

    def _rest(self) -> None:
        """Rest every role but those doing the work still lacking (all work
        if no client was killed yet)."""
        if KILLED in self.lacking:
            self.resting = frozenset()
            return
        needed = {role for what, _, roles in WORK if what in self.lacking for role in roles}
        needed |= {"crowd"} if STAGED in self.lacking else set()
        if self.resting != self.roles - needed:
            self.resting = self.roles - needed
            self.history.event("rest", roles=sorted(self.resting), lacking=self.lacking)

    def recover(self) -> None:
        """Finish whatever the killed clients left open, as an operator would."""
        with self.spec.connect() as log:
            self._recover(log)

    def _recover(self, log: arrowlog.ArrowLog) -> None:
        for tid in log.admin.transactional_ids():
            op = self.history.invoke("recover", inst="parent", tid=tid)
            try:
                info = log.admin.abort_transaction(tid)
            except ArrowLogError as e:
                op.fail(e)
                continue
            op.ok(expired=[{"tid": tid, "producer_id": info.producer_id,
                            "producer_epoch": info.producer_epoch, "state": info.state.value,
                            "txn_epoch": info.txn_epoch, "txn_started_ms": info.txn_started_ms,
                            "timeout_ms": info.timeout_ms}])  # fmt: skip


def _live_members(pgid: int) -> list[str]:
    """The processes of group ``pgid`` that are not zombies (a SIGKILLed
    process stays in its group until it is reaped), as ``pid:command``."""
    live = []
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            text = stat.read_text()
        except OSError:
            continue
        command, _, rest = text.rpartition(")")
        fields = rest.split()
        if len(fields) > 2 and fields[0] != "Z" and int(fields[2]) == pgid:
            live.append(f"{stat.parent.name}:{command.partition('(')[2]}")
    return live


def final_read(log: arrowlog.ArrowLog) -> dict[str, Any]:
    """Everything the checker compares the histories with: every segment of every
    partition with its header and record ids (read_uncommitted), the records a
    read_committed consumer returns partition by partition, end offsets, LSOs
    and the group's committed offsets."""
    final: dict[str, Any] = {"segments": {}, "committed": {}, "end": {}, "lso": {}, "group": {},
                             "errors": []}  # fmt: skip
    consumer = log.consumer(group_id=GROUP)
    for topic, count in ((IN, IN_PARTITIONS), (OUT, OUT_PARTITIONS)):
        for q in range(count):
            key = tp(topic, q)
            try:
                final["segments"][key] = _segments(log, topic, q)
                final["committed"][key] = consumer.read(topic, q).column("rid").to_pylist()
                final["end"][key] = log.partition(topic, q).end_offset()
                final["lso"][key] = consumer.stable_offset(topic, q)
            except ArrowLogError as e:
                final["errors"].append(f"{key}: {type(e).__name__}: {e}")
    for i in range(IN_PARTITIONS):
        final["group"][tp(IN, i)] = consumer.committed(IN, i)
    return final


def _segments(log: arrowlog.ArrowLog, topic: str, partition: int) -> list[dict[str, Any]]:
    out = []
    for header, batch in log.partition(topic, partition).iter_segments():
        who = header.identity
        seg: dict[str, Any] = {
            "base": header.base_offset, "count": header.record_count, "pid": who.producer_id,
            "epoch": who.producer_epoch, "seq": who.base_sequence, "txn": who.transactional,
            "control": who.control_type, "tid": who.transactional_id, "staged": header.staged,
        }  # fmt: skip
        if not who.control:
            seg["rids"] = batch.column("rid").to_pylist()
            if topic == OUT:
                seg["src"] = batch.column("src").to_pylist()
        out.append(seg)
    return out


# --- stores for the command line -----------------------------------------------------


@contextlib.contextmanager
def store_for(kind: str, workdir: Path) -> Iterator[StoreSpec]:
    """A fresh store of ``kind``: a directory under ``workdir``, or a prefix on
    SeaweedFS (started here, or the server named by ARROWLOG_TEST_S3_ENDPOINT),
    Azurite or fake-gcs-server (started here)."""
    if kind == "local":
        yield StoreSpec("local", str(workdir / "store"), {"fsync": False})
        return
    prefix = f"soak-{uuid.uuid4().hex[:12]}"
    if kind == "azure":
        with azurite.running(workdir) as emulator:
            yield StoreSpec(kind, emulator.url(prefix), emulator.storage_options)
        return
    if kind == "gcs":
        with fakegcs.running(workdir) as gcs:
            yield StoreSpec(kind, gcs.url(prefix), gcs.storage_options)
        return
    endpoint = os.environ.get("ARROWLOG_TEST_S3_ENDPOINT")
    if endpoint:
        server = seaweedfs.S3Server(
            endpoint=endpoint,
            bucket=os.environ.get("ARROWLOG_TEST_S3_BUCKET", "arrowlog"),
            access_key=os.environ["ARROWLOG_TEST_S3_KEY"],
            secret_key=os.environ["ARROWLOG_TEST_S3_SECRET"],
        )
    else:
        server = seaweedfs.start(workdir / "seaweedfs")
    try:
        yield StoreSpec("s3", server.url(prefix), server.storage_options)
    finally:
        server.stop()


def run(
    spec: StoreSpec,
    *,
    seconds: float,
    seed: int,
    workdir: Path,
    spark: bool = False,
    overtime: float = OVERTIME,
    say: Callable[[str], None] = print,
) -> Report:
    """Run one soak and return the checker's report (also printed with ``say``).
    ``spark``: with the Spark writer (:mod:`tests.soak.spark_writer`).
    ``overtime``: at most this long past ``seconds`` until the clients have
    done the work that makes the run worth checking (a committed transaction,
    a read, an export, a kill: :func:`tests.soak.checker.work_missing`; and a
    staged batch: STAGED)."""
    say(f"arrowlog soak: store={spec.kind} seconds={seconds:g} seed={seed} spark={spark} "
        f"workdir={workdir}")  # fmt: skip
    started = time.monotonic()
    soak = Soak(spec, seconds=seconds, seed=seed, workdir=workdir, spark=spark, overtime=overtime)
    report = soak.run()
    say(report.format())
    took = time.monotonic() - started
    if soak.went_on >= 1.0:
        still = f"; it still lacked {', '.join(soak.lacking)}" if soak.lacking else ""
        say(f"went on {soak.went_on:.0f} s past {seconds:g} s until its clients had done "
            f"the work worth checking{still}")  # fmt: skip
    replay = f"python -m tests.soak --store {spec.kind} --seconds {seconds:g} --seed {seed}"
    replay += " --spark" if spark else ""
    say(f"took {took:.0f} s; replay: {replay}")
    return report
