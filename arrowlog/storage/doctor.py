"""The doctor: judges a store before a log goes on it (``arrowlog doctor URL``).

arrowlog's guarantees rest on what the store does, not on what it says it does:
MinIO ignored conditional PUTs without read quorum (#21603), a Ceph RGW
inverted If-None-Match (PR #69991). :func:`examine` therefore tries each thing
the log needs and judges it ``safe``, ``unsafe`` or ``unknown`` (with why):

- ``put-if-absent``: a second put of an existing key is refused, the first
  object kept;
- ``race``: several OS processes put-if-absent each of many keys at once:
  exactly one is told it won each key, and its object is the one there;
  ``unknown`` when no two puts of one key were in flight at once (racers that
  took turns tested nothing);
- ``list-after-put``: keys just written are listed at once, by prefix, in
  ascending order, after a key and up to a limit;
- ``ranged-get``: ranges inside, across and at or past an object's end;
- ``presigned-get``: a pre-signed GET URL (what the JVM reader's executors
  fetch) fetched by plain HTTP, whole and by a range; ``unknown`` for a store
  that makes no URLs (a local directory's files are read by path;
  ``memory://`` lives in one process);
- ``delete``: a deleted object is gone (to a HEAD, a GET, a listing); deleting
  a missing key is no error;
- ``clock``: the write time the store reports (its clock: retention, vacuum
  and transaction timeouts run on it) against this machine's, within
  ``max_clock_skew_ms``.

Everything it writes lives under one fresh prefix, ``_arrowlog/doctor/<uuid>/``,
and is removed at the end, also when a check or the run fails. With
``record=True`` it then writes its verdict to ``_arrowlog/doctor/verdict.json``
(replacing an earlier one), and :meth:`arrowlog.ArrowLog.create_topic` refuses
a store whose recorded verdict is unsafe (:func:`refuse_if_judged_unsafe`).
"""

from __future__ import annotations

import contextlib
import datetime
import json
import time
import urllib.error
import urllib.request
import uuid
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

from arrowlog.errors import (
    ArrowLogError,
    InvalidConfigError,
    StoreUnreachableError,
    TransientStoreError,
    UnsafeStoreError,
)
from arrowlog.storage import Store, read_start
from arrowlog.storage._doctor_race import RaceOutcome, contended, race, writer_of
from arrowlog.storage.local import LocalStore

__all__ = [
    "DOCTOR_PREFIX",
    "VERDICT_KEY",
    "Check",
    "Diagnosis",
    "examine",
    "record_verdict",
    "refuse_if_judged_unsafe",
]

DOCTOR_PREFIX = "_arrowlog/doctor/"
VERDICT_KEY = f"{DOCTOR_PREFIX}verdict.json"
#: NTP keeps clocks within milliseconds; S3's LastModified has whole seconds
DEFAULT_MAX_CLOCK_SKEW_MS = 5_000
_TIME_GRANULARITY_MS = 1_000
#: an earlier run's objects this old (on the store's clock) are a killed
#: run's: no run takes this long, so they are not a running doctor's
STALE_RUN_MS = 3_600_000
#: how long a racing process may take to start, or to race
_RACE_TIMEOUT_S = 60.0
_HTTP_TIMEOUT_S = 10.0

Status = Literal["safe", "unsafe", "unknown"]


@dataclass(frozen=True)
class Check:
    """One check's verdict, and why."""

    name: str
    status: Status
    reason: str


@dataclass(frozen=True)
class Diagnosis:
    """What :func:`examine` found. ``left_behind`` lists the objects it wrote
    and could not remove (none, normally)."""

    url: str
    checks: tuple[Check, ...]
    left_behind: tuple[str, ...] = ()
    checked_ms: int = 0

    @property
    def safe(self) -> bool:
        """No check found the store unsafe (an ``unknown`` is not a failure)."""
        return not self.failed

    @property
    def failed(self) -> tuple[str, ...]:
        """The names of the checks the store failed."""
        return tuple(c.name for c in self.checks if c.status == "unsafe")

    def to_dict(self) -> dict[str, Any]:
        return {
            "url": self.url,
            "safe": self.safe,
            "failed": list(self.failed),
            "checked_ms": self.checked_ms,
            "checks": [
                {"check": c.name, "status": c.status, "reason": c.reason} for c in self.checks
            ],
            "left_behind": list(self.left_behind),
        }


def examine(
    store: Store,
    *,
    processes: int = 4,
    keys: int = 64,
    max_clock_skew_ms: int = DEFAULT_MAX_CLOCK_SKEW_MS,
    record: bool = False,
) -> Diagnosis:
    """Judge ``store`` (see the module's docstring for the checks): ``processes``
    OS processes race for each of ``keys`` keys. Whatever it wrote under
    ``_arrowlog/doctor/<uuid>/`` is removed before it returns or raises.

    Raises:
        InvalidConfigError: ``processes`` outside 2..16, ``keys`` outside
            1..1000 or a negative ``max_clock_skew_ms``.
        StoreUnreachableError: the URL is no store it can examine at all
            (unreachable, not an object store, no such bucket, access refused);
            nothing was written.
    """
    if not 2 <= processes <= 16 or not 1 <= keys <= 1000 or max_clock_skew_ms < 0:
        raise InvalidConfigError(
            "the doctor races 2 to 16 processes for 1 to 1000 keys, with a clock skew "
            f">= 0 ms; got {processes} processes, {keys} keys, {max_clock_skew_ms} ms"
        )
    prefix = f"{DOCTOR_PREFIX}{uuid.uuid4().hex}/"
    probe = _Probe(store, prefix)
    checks: list[Check] = []
    try:
        if not probe.reach():
            checks.extend(_refuses_new_keys())
            raise _Stop
        probe.sweep_stale()
        checks.append(_run("put-if-absent", lambda: _put_if_absent(probe)))
        checks.append(_run("race", lambda: _race(probe, processes, keys)))
        checks.append(_run("list-after-put", lambda: _list_after_put(probe)))
        checks.append(_run("ranged-get", lambda: _ranged_get(probe)))
        checks.append(_run("presigned-get", lambda: _presigned_get(probe)))
        checks.append(_run("delete", lambda: _delete(probe)))
        checks.append(_run("clock", lambda: _clock(probe, max_clock_skew_ms)))
    except _Stop:
        pass
    finally:
        left = probe.clean_up()
    diagnosis = Diagnosis(store.url, tuple(checks), left, int(time.time() * 1000))
    if record:
        record_verdict(store, diagnosis)
    return diagnosis


def record_verdict(store: Store, diagnosis: Diagnosis) -> None:
    """Keep ``diagnosis`` as the store's verdict (``_arrowlog/doctor/verdict.json``),
    replacing an earlier one: :meth:`arrowlog.ArrowLog.create_topic` reads it.
    A hint nothing else depends on, so it is the one object arrowlog replaces."""
    data = json.dumps(diagnosis.to_dict(), sort_keys=True).encode()
    for _ in range(3):  # another doctor may record at the same time: last one stays
        store.delete(VERDICT_KEY)
        try:
            store.put_if_absent(VERDICT_KEY, data)
            return
        except FileExistsError:
            continue
    store.put_if_absent(VERDICT_KEY, data)


def refuse_if_judged_unsafe(store: Store) -> None:
    """Refuse a store ``arrowlog doctor --record`` judged unsafe: one GET of its
    verdict; a store never examined (no verdict) passes as before.

    Raises:
        UnsafeStoreError: the recorded verdict is unsafe, or cannot be read.
    """
    try:
        raw = bytes(store.get(VERDICT_KEY))
    except FileNotFoundError:
        return
    how = (
        "fix the store and run `arrowlog doctor --record` on it again, or pass "
        "allow_unsafe_store=True (arrowlog topics create --allow-unsafe-store) to go on anyway"
    )
    try:
        verdict = json.loads(raw)
        safe = verdict["safe"]
        checks = [(c["check"], c["status"], c["reason"]) for c in verdict["checks"]]
        when = time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime(int(verdict["checked_ms"]) / 1000))
    except (ValueError, KeyError, TypeError, OverflowError, OSError, RecursionError) as e:
        # OverflowError, OSError: a time no clock reaches; RecursionError: JSON nested deeper
        # than the parser goes
        raise UnsafeStoreError(
            f"{store.url}: the doctor's verdict ({VERDICT_KEY}) cannot be read ({e}); {how}",
            failed=(),
        ) from None
    failed = [(name, reason) for name, status, reason in checks if status == "unsafe"]
    if safe is True and not failed:  # "safe" beside an unsafe check is no safe verdict
        return
    said = "; ".join(f"{name}: {reason}" for name, reason in failed)
    raise UnsafeStoreError(
        f"{store.url} was judged unsafe by arrowlog doctor ({when}): {said}. A log on it "
        f"could lose or duplicate records; {how}",
        failed=tuple(name for name, _ in failed),
    )


class _Probe:
    """The doctor's objects: every key it may have written, to remove them all."""

    def __init__(self, store: Store, prefix: str) -> None:
        self.store = store
        self.prefix = prefix
        self._written: set[str] = set()

    def key(self, name: str) -> str:
        key = self.prefix + name
        self._written.add(key)  # before the put: a failed one may have landed
        return key

    def put(self, name: str, data: bytes) -> str:
        key = self.key(name)
        self.store.put_if_absent(key, data)
        return key

    def reach(self) -> bool:
        """Whether the URL is a store at all: a listing (writes nothing), then
        an object written and read back. False: it lists, but refuses a
        put-if-absent of a key nobody wrote (the condition inverted).

        Raises:
            StoreUnreachableError: either failed otherwise.
        """
        try:
            next(iter(self.store.list(self.prefix, limit=1)), None)
        except (ArrowLogError, OSError) as e:
            raise _unreachable(self.store, e) from None
        try:
            key = self.put("reach", b"arrowlog doctor")
        except FileExistsError:
            return False
        except (ArrowLogError, OSError) as e:
            raise _unreachable(self.store, e) from None
        try:
            back = bytes(self.store.get(key))
        except (ArrowLogError, OSError) as e:
            raise _unreachable(self.store, e) from None
        if back != b"arrowlog doctor":
            raise StoreUnreachableError(
                f"{self.store.url} is not an object store: it accepted a PUT and answered "
                "the GET of it with other bytes"
            )
        return True

    def sweep_stale(self) -> None:
        """Remove what earlier runs killed before their clean-up (SIGKILL, a
        lost machine) left under ``_arrowlog/doctor/<uuid>/``: a run whose
        newest object is older than :data:`STALE_RUN_MS` on the store's clock
        (this run's first object's write time). A store without write times
        keeps them: a running doctor's objects cannot be told apart."""
        with contextlib.suppress(ArrowLogError, OSError):
            now = self.store.head(self.prefix + "reach").modified_ms
            if now is None:
                return
            newest: dict[str, int] = {}
            for info in self.store.list(DOCTOR_PREFIX):
                run, slash, _ = info.key[len(DOCTOR_PREFIX) :].partition("/")
                if not slash or info.key.startswith(self.prefix):
                    continue  # the verdict, or this run's
                when = info.modified_ms if info.modified_ms is not None else now
                newest[run] = max(newest.get(run, when), when)
            for run, when in sorted(newest.items()):
                if now - when > STALE_RUN_MS:
                    stale = _Probe(self.store, f"{DOCTOR_PREFIX}{run}/")
                    stale.clean_up()

    def clean_up(self) -> tuple[str, ...]:
        """Remove what the doctor wrote; what could not be removed."""
        keys = set(self._written)
        with contextlib.suppress(ArrowLogError, OSError):
            keys.update(info.key for info in self.store.list(self.prefix))
        left: list[str] = []
        for key in sorted(keys):
            try:
                self.store.delete(key)
            except (ArrowLogError, OSError):
                left.append(key)
        with contextlib.suppress(ArrowLogError, OSError):
            left.extend(info.key for info in self.store.list(self.prefix) if info.key not in left)
        if isinstance(self.store, LocalStore):
            _remove_empty_directories(self.store.root, self.prefix)
        return tuple(sorted(set(left)))


def _remove_empty_directories(root: Path, prefix: str) -> None:
    """A local directory's store leaves the directories of removed keys: take
    away the doctor's, and ``_arrowlog/doctor`` and ``_arrowlog`` if empty."""
    top = root / prefix
    mine = sorted((p for p in top.rglob("*") if p.is_dir()), key=lambda p: -len(p.parts))
    for directory in [*mine, top]:
        with contextlib.suppress(OSError):
            directory.rmdir()
    for directory in top.parents:
        if directory == root or root not in directory.parents:
            return
        try:
            directory.rmdir()
        except OSError:  # not empty: the rest is not the doctor's
            return


class _Stop(Exception):
    """No further check can run."""


def _refuses_new_keys() -> list[Check]:
    refused = Check(
        "put-if-absent",
        "unsafe",
        "a put-if-absent of a fresh key nobody wrote was refused as if it existed: the store "
        "inverts If-None-Match (or refuses every conditional write), so no writer could claim "
        "an offset, and a key that exists may be overwritten",
    )
    rest = ("race", "list-after-put", "ranged-get", "presigned-get", "delete", "clock")
    return [
        refused,
        *(Check(name, "unknown", "not run: the store refuses new keys") for name in rest),
    ]


def _unreachable(store: Store, e: BaseException) -> StoreUnreachableError:
    text = " ".join(str(e).split()) or type(e).__name__
    if isinstance(e, FileNotFoundError):
        # an S3 listing's 404: any web server answers so, and a missing bucket
        text = "not found (is the endpoint an object store, and does the bucket exist?)"
    return StoreUnreachableError(f"{store.url} cannot be examined as a store: {text}")


def _run(name: str, check: Callable[[], tuple[Status, str]]) -> Check:
    """One check; a failure the store may not repeat is ``unknown``, any
    other failure of a request the log needs ``unsafe``."""
    try:
        status, reason = check()
    except TransientStoreError as e:
        return Check(name, "unknown", f"the store failed transiently: {_said(e)}")
    except (ArrowLogError, OSError) as e:
        return Check(name, "unsafe", f"a request failed: {_said(e)}")
    return Check(name, status, reason)


def _said(e: BaseException) -> str:
    return " ".join(f"{type(e).__name__}: {e}".split())


def _put_if_absent(probe: _Probe) -> tuple[Status, str]:
    key = probe.put("claim", b"first")
    try:
        probe.store.put_if_absent(key, b"second")
        refused = False
    except FileExistsError:
        refused = True
    kept = bytes(probe.store.get(key)) == b"first"
    if not refused:
        replaced = "" if kept else ", replacing the first object"
        return "unsafe", (
            f"a second put-if-absent of an existing key succeeded{replaced}: the store "
            "ignores the condition (If-None-Match: *), so two writers could claim one offset"
        )
    if not kept:
        return "unsafe", "a second put-if-absent was refused, yet the first object was replaced"
    return "safe", "a second put-if-absent of an existing key was refused; the first object kept"


def _race(probe: _Probe, processes: int, count: int) -> tuple[Status, str]:
    keys = [probe.key(f"race/{i:05d}") for i in range(count)]
    outcome = race(
        probe.store,
        keys,
        writers=processes,
        shared_probe=probe.key("race-shared"),
        timeout_s=_RACE_TIMEOUT_S,
    )
    if outcome.not_started is not None:
        return "unknown", outcome.not_started
    landed: dict[str, int | None] = {}
    for key in keys:
        try:
            landed[key] = writer_of(bytes(probe.store.get(key)))
        except FileNotFoundError:
            landed[key] = None
    return _judge_race(outcome, keys, landed)


def _judge_race(
    outcome: RaceOutcome, keys: list[str], landed: dict[str, int | None]
) -> tuple[Status, str]:
    """Exactly one winner per key, whose object is the one there. A key whose
    puts failed counts as undecided when its object is a failed writer's
    (its reply may have been lost after it landed)."""
    racers = (
        f"{outcome.writers} processes" if outcome.mode == "processes"
        else f"{outcome.writers} threads ({outcome.why_threads})"
    )  # fmt: skip
    wrong: list[str] = []
    decided = 0
    for key in keys:
        told = outcome.winners.get(key, [])
        failed = {int(m.split(":", 1)[0].split()[1]) for m in outcome.errors.get(key, [])}
        name = key.rsplit("/", 1)[-1]
        if len(told) > 1:
            wrong.append(f"{name}: writers {', '.join(map(str, sorted(told)))} all won")
        elif len(told) == 1 and landed[key] != told[0]:
            wrong.append(f"{name}: writer {told[0]} won, writer {landed[key]}'s object is there")
        elif not told and landed[key] is not None and landed[key] not in failed:
            wrong.append(f"{name}: nobody won, yet writer {landed[key]}'s object is there")
        elif len(told) == 1:
            decided += 1
    if wrong:
        return "unsafe", (
            f"{racers} raced for each of {len(keys)} keys: {len(wrong)} keys went wrong "
            f"({'; '.join(wrong[:2])})"
        )
    errors = sum(len(v) for v in outcome.errors.values())
    first = next(iter(outcome.errors.values()), [""])[0]
    if decided * 2 < len(keys):
        return "unknown", f"only {decided} of {len(keys)} keys were decided: {first}"
    overlapped = contended(outcome)
    if not overlapped:
        return "unknown", (
            f"{racers} took turns for each of {len(keys)} keys: no two puts of one key were "
            "in flight at once, so the race tested nothing (a store that is atomic only "
            "one request at a time would pass it)"
        )
    failures = f"; {errors} puts failed and were left out ({first})" if errors else ""
    return "safe", (
        f"{racers} raced for each of {len(keys)} keys: one winner each; {overlapped} keys "
        f"had puts in flight at once{failures}"
    )


def _list_after_put(probe: _Probe) -> tuple[Status, str]:
    store = probe.store
    base = probe.prefix + "list/"
    names = [f"{n:020d}.arrow" for n in (2, 0, 10, 1)]  # written out of order
    probe.put("list-", b"beside")  # shares the text of the prefix, not the prefix
    for i, name in enumerate(names):
        probe.put(f"list/{name}", b"x" * (i + 1))
    expected = sorted((base + name, i + 1) for i, name in enumerate(names))
    listed = [(info.key, info.size) for info in store.list(base)]
    missing = sorted({k for k, _ in expected} - {k for k, _ in listed})
    if missing:
        return "unsafe", (
            f"a listing right after the puts missed {len(missing)} of {len(expected)} keys: "
            "readers would not see records just written"
        )
    if [k for k, _ in listed] != sorted(k for k, _ in listed) or len(listed) != len(expected):
        return "unsafe", "a listing is not in ascending key order, or holds keys outside its prefix"
    if listed != expected:
        return "unsafe", "a listing reports sizes other than the objects'"
    after = [info.key for info in store.list(base, start_after=expected[1][0])]
    limited = [info.key for info in store.list(base, limit=2)]
    if after != [k for k, _ in expected[2:]] or limited != [k for k, _ in expected[:2]]:
        return "unsafe", "a listing after a key or with a limit skipped or repeated keys"
    return "safe", "keys just written were listed at once, by prefix, sorted; after a key and limit"


def _ranged_get(probe: _Probe) -> tuple[Status, str]:
    store = probe.store
    data = bytes(range(256))
    key = probe.put("range", data)
    cases = {(10, 20): data[10:20], (250, 300): data[250:], (256, 300): b"", (300, 400): b""}
    for (start, end), want in cases.items():
        got = store.get_range(key, start, end)
        if got != want:
            return "unsafe", (
                f"bytes [{start}, {end}) of a 256-byte object came back as {len(got)} bytes "
                f"other than the {len(want)} expected"
            )
    head, info, _ = read_start(store, key, 16)
    if head != data[:16] or info.size != len(data):
        return "unsafe", "the start of an object read with its info came back wrong"
    return "safe", "ranges inside, across, at and past an object's end read as they should"


def _presigned_get(probe: _Probe) -> tuple[Status, str]:
    presign = getattr(probe.store, "presigned_get", None)
    if presign is None:
        return "unknown", (
            "the store makes no pre-signed URLs (the JVM reader reads a local directory's "
            "files by path; memory:// and others need reader=python)"
        )
    data = bytes(range(256)) * 4
    key = probe.put("presigned", data)
    url = str(presign(key, 300))
    if not url.lower().startswith(("http://", "https://")):
        return "unsafe", f"a pre-signed URL is not http(s): {url.split('?')[0]}"
    try:
        whole = _fetch(url, None)
        part = _fetch(url, "bytes=100-199")
    except (urllib.error.URLError, OSError) as e:
        return "unsafe", f"a pre-signed GET failed by plain HTTP: {_said(e)}"
    if whole != data or part != data[100:200]:
        return "unsafe", "a pre-signed GET answered other bytes than the object's"
    return "safe", "a pre-signed GET URL was fetched by plain HTTP, whole and by a range"


def _fetch(url: str, byte_range: str | None) -> bytes:
    request = urllib.request.Request(url, headers={"Range": byte_range} if byte_range else {})
    with urllib.request.urlopen(request, timeout=_HTTP_TIMEOUT_S) as answer:  # http(s): checked
        body: bytes = answer.read()
    return body


def _delete(probe: _Probe) -> tuple[Status, str]:
    store = probe.store
    key = probe.put("delete", b"gone soon")
    store.delete(key)
    for what, look in (("a HEAD", lambda: store.head(key)), ("a GET", lambda: store.get(key))):
        try:
            look()
        except FileNotFoundError:
            continue
        return "unsafe", f"a deleted object is still there to {what}"
    if any(info.key == key for info in store.list(probe.prefix + "delete")):
        return "unsafe", "a deleted object is still listed"
    try:
        store.delete(probe.key("never-written"))
    except FileNotFoundError:
        return "unsafe", "deleting a missing key failed (it must be no error)"
    return "safe", "a deleted object is gone to HEAD, GET and LIST; deleting a missing key is fine"


def _utc(ms: int) -> str:
    """``ms`` since the epoch as a UTC time to the millisecond."""
    moment = datetime.datetime.fromtimestamp(ms / 1000, tz=datetime.UTC)
    return moment.strftime("%Y-%m-%dT%H:%M:%S.") + f"{ms % 1000:03d}Z"


def _clock(probe: _Probe, max_skew_ms: int) -> tuple[Status, str]:
    before = time.time_ns() // 1_000_000
    key = probe.put("clock", b"")
    after = time.time_ns() // 1_000_000
    stored = probe.store.head(key).modified_ms
    if stored is None:
        return "unknown", "the store reports no write times: arrowlog uses this machine's clock"
    # the write happened between before and after; the store may cut its time to seconds
    if stored > after:
        skew = stored - after
    elif stored < before - _TIME_GRANULARITY_MS:
        skew = stored - (before - _TIME_GRANULARITY_MS)
    else:
        skew = 0
    said = (
        f"skew {skew:+d} ms (store write time {_utc(stored)}, this machine "
        f"{_utc(before)} to {_utc(after)})"
    )
    if abs(skew) > max_skew_ms:
        return "unsafe", (
            f"{said}, beyond {max_skew_ms} ms: retention, vacuum and transaction timeouts "
            "run on the store's clock, record timestamps on their writers'"
        )
    return "safe", f"{said}, within {max_skew_ms} ms"
