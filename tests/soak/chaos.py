"""Faults inside a soak client: the store stack each client talks through.

    client -> FaultyStore (random: lost replies, failures, 503s)
           -> ScriptedStore (scheduled: late PUTs, held requests, hidden keys, bursts)
           -> KillSwitch (SIGKILL this process at the n-th write of a kind)
           -> the real store

A :class:`Chaos` thread adds one scheduled fault at a time to the ScriptedStore
(seeded), lands late PUTs after a random delay (or drops them, like a request
that never arrived), releases held requests, and writes the cumulative fault
counts to the client's history.
"""

from __future__ import annotations

import collections
import fnmatch
import os
import random
import signal
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import Any

from arrowlog.errors import TransientStoreError
from arrowlog.storage import Blob, ObjectInfo, Store
from arrowlog.storage.local import LocalStore
from arrowlog.testing.faulty import Faults, FaultyStore
from arrowlog.testing.scripted import Gate, LatePut, ScriptedStore
from tests.soak.history import History, now

SEGMENTS_IN = "in/*/segments/*"
SEGMENTS_OUT = "out/*/segments/*"
STAGED_IN = "in/*/staged/*"
COORDINATOR = "_arrowlog/coordinator/*"
GROUPS = "_arrowlog/groups/*"
#: How recent a key must be for a listing to miss it (seconds).
FRESH = 1.0


@dataclass(frozen=True)
class Profile:
    """Which faults a client gets. Probabilities are per request."""

    lose_ack: float = 0.0
    fail_before: float = 0.0
    slowdown: float = 0.0
    #: key patterns whose put-if-absent may be made late
    late: tuple[str, ...] = ()
    #: (operation, key pattern) pairs a request of which may be held
    hold: tuple[tuple[str, str], ...] = ()
    #: key patterns that may be left out of a listing
    hide: tuple[str, ...] = ()
    #: key patterns that may get a burst of 503s
    throttle: tuple[str, ...] = ()
    #: seconds between two scheduled faults
    every: tuple[float, float] = (0.3, 1.5)
    #: relative weights of the scheduled kinds (late, hold, hide, throttle)
    weights: tuple[int, int, int, int] = (3, 2, 1, 1)


@dataclass(frozen=True)
class KillPoint:
    """SIGKILL the process around its ``nth`` put-if-absent matching ``pattern``."""

    pattern: str
    nth: int
    when: str  # "before" or "after" the write

    def text(self) -> str:
        return f"{self.pattern}:{self.nth}:{self.when}"

    @classmethod
    def parse(cls, text: str) -> KillPoint:
        pattern, nth, when = text.rsplit(":", 2)
        if when not in ("before", "after"):
            raise ValueError(f"kill point {text!r}: 'before' or 'after'")
        return cls(pattern, int(nth), when)


class KillSwitch:
    """A store that SIGKILLs its own process at a chosen write."""

    def __init__(self, inner: Store, point: KillPoint | None, history: History) -> None:
        self.inner = inner
        self._point = point
        self._history = history
        self._seen = 0
        self._lock = threading.Lock()

    @property
    def url(self) -> str:
        return self.inner.url

    @property
    def atomic_put_if_absent(self) -> bool:
        return self.inner.atomic_put_if_absent

    def _die(self, key: str, when: str) -> None:
        self._history.event("die", key=key, when=when)
        os.kill(os.getpid(), signal.SIGKILL)
        time.sleep(60)  # never reached: the signal is immediate

    def put_if_absent(self, key: str, data: Blob) -> None:
        point = self._point
        fire = False
        if point is not None and fnmatch.fnmatchcase(key, point.pattern):
            with self._lock:
                self._seen += 1
                fire = self._seen == point.nth
        if fire and point is not None and point.when == "before":
            self._die(key, "before")
        self.inner.put_if_absent(key, data)
        if fire:
            self._die(key, "after")

    def get(self, key: str) -> Blob:
        return self.inner.get(key)

    def get_range(self, key: str, start: int, end: int) -> bytes:
        return self.inner.get_range(key, start, end)

    def get_range_tagged(self, key: str, start: int, end: int) -> tuple[bytes, str | None]:
        return self.inner.get_range_tagged(key, start, end)

    def head(self, key: str) -> ObjectInfo:
        return self.inner.head(key)

    def list(
        self, prefix: str, *, start_after: str | None = None, limit: int | None = None
    ) -> Iterator[ObjectInfo]:
        return self.inner.list(prefix, start_after=start_after, limit=limit)

    def delete(self, key: str) -> None:
        self.inner.delete(key)

    def close(self) -> None:
        self.inner.close()


@dataclass
class _Pending:
    due: float
    late: LatePut | None = None
    gate: Gate | None = None
    drop: bool = False


@dataclass
class Chaos:
    """Schedules faults into a client's store stack (see the module doc)."""

    base: Store
    profile: Profile
    seed: int
    history: History
    kill: KillPoint | None = None
    counts: collections.Counter[str] = field(default_factory=collections.Counter)

    def __post_init__(self) -> None:
        self._rng = random.Random(self.seed)
        self.killswitch = KillSwitch(self.base, self.kill, self.history)
        self.scripted = ScriptedStore(self.killswitch)
        p = self.profile
        self.faulty = FaultyStore(
            self.scripted,
            Faults(lose_ack=p.lose_ack, fail_before=p.fail_before, slowdown=p.slowdown,
                   seed=self._rng.randrange(2**31)),
        )  # fmt: skip
        self._stop = threading.Event()
        self._lock = threading.Lock()
        self._watch: list[_Pending] = []
        self._rules: list[tuple[str, Any]] = []  # (kind, LatePut or ScriptedStore rule)
        self._reported: dict[str, int] = {}
        self._drops: dict[int, int] = {}  # id(LatePut) -> deferred writes dropped

    @property
    def store(self) -> Store:
        """The store the client uses."""
        return self.faulty

    def start(self) -> None:
        threading.Thread(target=self._schedule, name="chaos", daemon=True).start()
        threading.Thread(target=self._resolve, name="chaos-resolve", daemon=True).start()

    def stop(self) -> None:
        self._stop.set()
        self.report()

    # --- the scheduler --------------------------------------------------------------

    def _schedule(self) -> None:
        p = self.profile
        # Only a local directory's listing can miss a fresh key (readdir racing
        # link); an S3 LIST shows every completed PUT, and a chained append is
        # only written after the one before it completed.
        hide = p.hide if isinstance(self.base, LocalStore) else ()
        choices = [
            (kind, weight)
            for kind, present, weight in zip(
                ("late", "hold", "hide", "throttle"),
                (p.late, p.hold, hide, p.throttle),
                p.weights,
                strict=True,
            )
            if present and weight
        ]
        kinds, weights = [k for k, _ in choices], [w for _, w in choices]
        while not self._stop.wait(self._rng.uniform(*p.every)):
            if kinds:
                kind = self._rng.choices(kinds, weights)[0]
                getattr(self, f"_add_{kind}")()
            self.report()

    def _add_late(self) -> None:
        rng = self._rng
        pattern = rng.choice(self.profile.late)
        # Mostly one late PUT; sometimes an outage in which every reply is lost
        # until the rule runs out, long enough to outlast the client's deadline.
        times = rng.choice([1, 1, 1, 2, 40])
        late = self.scripted.late_put(pattern, nth=rng.randint(1, 3), times=times)
        with self._lock:
            self._rules.append(("late", late))

    def _add_hold(self) -> None:
        op, pattern = self._rng.choice(self.profile.hold)
        gate = self.scripted.hold(op, pattern, nth=self._rng.randint(1, 3))
        with self._lock:
            self._watch.append(_Pending(due=0.0, gate=gate))

    def _add_hide(self) -> None:
        fresh = self._fresh(self._rng.choice(self.profile.hide))
        rule = self.scripted.hide(fresh, nth=self._rng.randint(1, 3), times=self._rng.randint(1, 2))
        with self._lock:
            self._rules.append(("hide", rule))

    def _add_throttle(self) -> None:
        pattern = self._rng.choice(self.profile.throttle)
        rule = self.scripted.throttle(
            "put_if_absent",
            pattern,
            nth=self._rng.randint(1, 3),
            times=self._rng.choice([2, 3, 5, 20]),
        )
        with self._lock:
            self._rules.append(("throttle", rule))

    def _fresh(self, pattern: str) -> Callable[[str], bool]:
        """Keys matching ``pattern`` written less than a second ago: a listing
        racing writes may miss one of those (and show a later one), never a key
        that has been there for a while."""
        assert isinstance(self.base, LocalStore)
        root = self.base.root

        def fresh(key: str) -> bool:
            if not fnmatch.fnmatchcase(key, pattern):
                return False
            try:
                return now() - os.stat(root.joinpath(*key.split("/"))).st_mtime < FRESH
            except OSError:
                return False

        return fresh

    # --- landing, releasing, counting -----------------------------------------------

    def _resolve(self) -> None:
        """Land late PUTs and release held requests when they are due."""
        rng = random.Random(self.seed + 1)
        landed: dict[int, int] = {}  # id(LatePut) -> deferred writes already queued
        while not self._stop.wait(0.01):
            now = time.monotonic()
            with self._lock:
                lates = [r for kind, r in self._rules if kind == "late"]
                for late in lates:
                    assert isinstance(late, LatePut)
                    queued = landed.get(id(late), 0)
                    deferred = len(late.pending) + len(late.landed) + self._drops.get(id(late), 0)
                    for _ in range(deferred - queued):
                        self.counts["late_put"] += 1
                        self._watch.append(
                            _Pending(
                                now + rng.uniform(0.02, 2.5), late=late, drop=rng.random() < 0.15
                            )
                        )
                    landed[id(late)] = deferred
                due = [p for p in self._watch if self._is_due(p, now, rng)]
                self._watch = [p for p in self._watch if p not in due]
            for p in due:
                self._fire(p)

    def _is_due(self, p: _Pending, now: float, rng: random.Random) -> bool:
        if p.gate is not None and p.due == 0.0:
            if p.gate.reached.is_set():
                self.counts["hold"] += 1
                p.due = now + rng.uniform(0.05, 1.0)
            return False
        return now >= p.due

    def _fire(self, p: _Pending) -> None:
        if p.gate is not None:
            p.gate.release()
            return
        late = p.late
        assert late is not None
        if not late.pending:
            return
        if p.drop:
            with self._lock:
                late.pending.pop(0)
                self._drops[id(late)] = self._drops.get(id(late), 0) + 1
            self.counts["late_put_dropped"] += 1
            return
        with self._lock:  # pending + landed must not be counted halfway through
            try:
                if late.land():
                    self.counts["late_put_landed"] += 1
                else:
                    self.counts["late_put_key_taken"] += 1
            except TransientStoreError:
                late.landed.append(False)
                self.counts["late_put_dropped"] += 1

    def report(self) -> None:
        """Write the cumulative counts to the history if they changed."""
        counts = dict(self.counts)
        counts.update(self.faulty.injected)
        with self._lock:
            for kind, rule in self._rules:
                if kind in ("hide", "throttle"):
                    fired = max(0, min(rule.seen - rule.first + 1, rule.times))
                    counts[kind] = counts.get(kind, 0) + fired
                    if fired == rule.times:
                        rule.stop()  # spent: no more matching work per request
        if counts != self._reported:
            self._reported = counts
            self.history.event("faults", counts=counts)
