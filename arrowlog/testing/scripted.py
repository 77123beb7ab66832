"""A store whose faults are scripted per request, for deterministic tests.

:class:`~arrowlog.testing.faulty.FaultyStore` rolls dice on every request; the
bugs that matter need two events in a given order ("this PUT times out on the
client but lands 1.6 s later, after the resend met a 503"). A test scripts them
here instead: it names the request (operation, key pattern, the n-th match) and
what happens to it, runs the client in a thread, and steps through the schedule.

    store = ScriptedStore(inner)
    late = store.late_put("t/0/segments/*")          # the next segment PUT
    store.throttle("put_if_absent", "t/0/segments/*", times=3)
    ...                                              # the client sends
    late.land()                                      # the write lands now

Every rule fires on matching requests in the order they arrive; a request that
no rule claims goes straight to the inner store.
"""

from __future__ import annotations

import fnmatch
import threading
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field

from arrowlog.errors import TransientStoreError
from arrowlog.storage import Blob, ObjectInfo, Store

KeyMatch = str | Callable[[str], bool]
Action = Callable[[str, Blob | None], None]

#: How long a held request waits for its release before failing the test run
#: instead of hanging it.
MAX_HOLD_SECONDS = 60.0


def _matcher(match: KeyMatch) -> Callable[[str], bool]:
    if callable(match):
        return match
    return lambda key: fnmatch.fnmatchcase(key, match)


@dataclass
class _Rule:
    op: str
    match: Callable[[str], bool]
    first: int  # the first matching call (1-based) the rule acts on
    times: int  # how many matching calls from there
    act: Action
    seen: int = 0
    stopped: bool = False

    def claims(self, op: str, key: str) -> bool:
        if self.stopped or op != self.op or not self.match(key):
            return False
        self.seen += 1
        return self.first <= self.seen < self.first + self.times

    def stop(self) -> None:
        """The rule acts no more."""
        self.stopped = True


class Gate:
    """A held request: ``reached`` is set when it arrives; it waits there until
    :meth:`release`."""

    def __init__(self) -> None:
        self.reached = threading.Event()
        self._open = threading.Event()
        self.keys: list[str] = []
        self.threads: list[str] = []  # the name of the thread each request came in

    def release(self) -> None:
        self._open.set()

    def wait_reached(self, timeout: float = 10.0) -> str:
        """Wait until the held request arrives; its key."""
        if not self.reached.wait(timeout):
            raise TimeoutError("the scripted request never arrived")
        return self.keys[-1]

    def _hold(self, key: str) -> None:
        self.keys.append(key)
        self.threads.append(threading.current_thread().name)
        self.reached.set()
        if not self._open.wait(MAX_HOLD_SECONDS):
            raise TimeoutError(f"{key}: held request never released")


@dataclass
class LatePut:
    """A put-if-absent whose reply timed out and whose write lands later."""

    store: ScriptedStore
    pending: list[tuple[str, bytes]] = field(default_factory=list)
    reached: threading.Event = field(default_factory=threading.Event)
    #: per landing: True if the write landed, False if the key was taken by then
    landed: list[bool] = field(default_factory=list)
    rule: _Rule | None = None

    def stop(self) -> None:
        """Later matching puts go through."""
        if self.rule is not None:
            self.rule.stop()

    def _defer(self, key: str, data: Blob | None) -> None:
        assert data is not None
        self.pending.append((key, bytes(data)))
        self.reached.set()
        raise TransientStoreError(f"put_if_absent {key}: scripted timeout", maybe_applied=True)

    def land(self) -> bool:
        """Apply the oldest deferred write now; False if the key was taken."""
        if not self.pending:
            raise AssertionError("no deferred write to land")
        key, data = self.pending.pop(0)
        try:
            self.store.inner.put_if_absent(key, data)
        except FileExistsError:
            self.landed.append(False)
            return False
        self.landed.append(True)
        return True


class ScriptedStore:
    """Wraps ``inner``; rules added with the methods below decide the fate of
    chosen requests. ``history`` lists every request as (operation, key)."""

    def __init__(self, inner: Store) -> None:
        self.inner = inner
        self.history: list[tuple[str, str]] = []
        self._rules: list[_Rule] = []
        self._lock = threading.Lock()

    @property
    def url(self) -> str:
        return self.inner.url

    @property
    def atomic_put_if_absent(self) -> bool:
        return self.inner.atomic_put_if_absent

    # --- scripting ----------------------------------------------------------------

    def _add(self, op: str, match: KeyMatch, nth: int, times: int, act: Action) -> _Rule:
        rule = _Rule(op, _matcher(match), nth, times, act)
        with self._lock:
            self._rules.append(rule)
        return rule

    def _claim(self, op: str, key: str) -> _Rule | None:
        # Every rule counts every matching call, so "the n-th match" of a rule
        # does not depend on the rules added before it.
        with self._lock:
            claiming = [r for r in self._rules if r.claims(op, key)]
        return claiming[0] if claiming else None

    def hold(self, op: str, match: KeyMatch, *, nth: int = 1) -> Gate:
        """Pause the ``nth`` matching request until the gate is released: the
        client stops between two protocol steps while others act."""
        gate = Gate()
        self._add(op, match, nth, 1, lambda key, _: gate._hold(key))
        return gate

    def late_put(self, match: KeyMatch, *, nth: int = 1, times: int = 1) -> LatePut:
        """The matching put-if-absent calls time out on the client without being
        applied; each is applied when the test calls :meth:`LatePut.land`."""
        late = LatePut(self)
        late.rule = self._add("put_if_absent", match, nth, times, late._defer)
        return late

    def fail(
        self, op: str, match: KeyMatch, *, nth: int = 1, times: int = 1, maybe_applied: bool = True
    ) -> _Rule:
        """The matching requests fail before reaching the store (to the client a
        write failed this way looks like a lost reply when ``maybe_applied``)."""

        def act(key: str, _: Blob | None) -> None:
            raise TransientStoreError(f"{op} {key}: scripted failure", maybe_applied=maybe_applied)

        return self._add(op, match, nth, times, act)

    def throttle(self, op: str, match: KeyMatch, *, nth: int = 1, times: int = 1) -> _Rule:
        """The matching requests get 503 SlowDown: refused, nothing applied."""

        def act(key: str, _: Blob | None) -> None:
            raise TransientStoreError(f"{op} {key}: scripted 503 SlowDown", maybe_applied=False)

        return self._add(op, match, nth, times, act)

    def hide(self, match: KeyMatch, *, nth: int = 1, times: int = 1) -> _Rule:
        """The matching keys are left out of the ``nth`` listing(s) that would
        show them: a LIST racing writes that shows N+1 without N."""
        return self._add("list-hide", match, nth, times, lambda key, _: None)

    # --- the store protocol -------------------------------------------------------

    def _before(self, op: str, key: str, data: Blob | None = None) -> None:
        with self._lock:
            self.history.append((op, key))
        rule = self._claim(op, key)
        if rule is not None:
            rule.act(key, data)

    def get(self, key: str) -> Blob:
        self._before("get", key)
        return self.inner.get(key)

    def get_range(self, key: str, start: int, end: int) -> bytes:
        self._before("get_range", key)
        return self.inner.get_range(key, start, end)

    def get_range_tagged(self, key: str, start: int, end: int) -> tuple[bytes, str | None]:
        self._before("get_range", key)
        return self.inner.get_range_tagged(key, start, end)

    def head(self, key: str) -> ObjectInfo:
        self._before("head", key)
        return self.inner.head(key)

    def put_if_absent(self, key: str, data: Blob) -> None:
        self._before("put_if_absent", key, data)
        self.inner.put_if_absent(key, data)

    def list(
        self, prefix: str, *, start_after: str | None = None, limit: int | None = None
    ) -> Iterator[ObjectInfo]:
        self._before("list", prefix)
        found = list(self.inner.list(prefix, start_after=start_after, limit=None))
        hidden = {info.key for info in found if self._claim("list-hide", info.key)}
        shown = [info for info in found if info.key not in hidden]
        return iter(shown if limit is None else shown[:limit])

    def delete(self, key: str) -> None:
        self._before("delete", key)
        self.inner.delete(key)

    def close(self) -> None:
        self.inner.close()
