"""What the coordinator and group logs share: entries numbered from 0 under
one prefix, keyed by inverted numbers (a LIST shows the newest first), and
what cleanup (docs/protocol.md, "Cleaning up") does to them.

Cleanup removes old entries from the bottom. Before it removes any, it puts a
*start* object, ``<prefix>start-<n>.json``: the log begins at entry ``n``
from then on. Its name sorts after every entry's, so a LIST of the newest
entry never shows it, and one LIST from ``:`` shows every start object. A
write that lands in a key below the start (a late PUT into a key cleanup
freed) is a *stray*: below the log, never part of it, whatever it holds.
"""

from __future__ import annotations

import contextlib

from arrowlog import _clock
from arrowlog.config import LATE_OUTCOME_MS, RetryPolicy
from arrowlog.storage import Store

_INVERT = 10**20 - 1
_START = "start-"


def entry_name(n: int) -> str:
    return f"{_INVERT - n:020d}.json"


def parse_entry_name(name: str) -> int | None:
    """The number of an :func:`entry_name` (None for other names)."""
    if len(name) != 25 or not name.endswith(".json") or not name[:20].isdigit():
        return None
    return _INVERT - int(name[:20])


def start_name(n: int) -> str:
    return f"{_START}{n:020d}.json"


def parse_start_name(name: str) -> int | None:
    """The entry number of a :func:`start_name` (None for other names)."""
    digits = name[len(_START) : -len(".json")]
    if not name.startswith(_START) or not name.endswith(".json") or len(digits) != 20:
        return None
    return int(digits) if digits.isdigit() else None


def starts(store: Store, retry: RetryPolicy, prefix: str) -> list[int]:
    """The start objects of the log under ``prefix``: one LIST, after every
    entry key (entry names are digits; ``:`` sorts after them)."""
    infos = retry.call(lambda: list(store.list(prefix, start_after=prefix + ":")))
    return sorted(
        n for info in infos if (n := parse_start_name(info.key[len(prefix) :])) is not None
    )


def log_start(store: Store, retry: RetryPolicy, prefix: str) -> int:
    """The number of the log's first entry: below it, cleanup removed the
    entries, and what lies there is a stray. One LIST."""
    return max(starts(store, retry, prefix), default=0)


def is_stray(store: Store, retry: RetryPolicy, prefix: str, n: int) -> bool:
    """Whether entry ``n`` lies below the log's start (a write that landed in
    a key cleanup had freed: docs/protocol.md, "Cleaning up"). One LIST."""
    return n < log_start(store, retry, prefix)


def remove_entry(store: Store, retry: RetryPolicy, prefix: str, n: int) -> None:
    with contextlib.suppress(FileNotFoundError):
        retry.call(lambda: store.delete(prefix + entry_name(n)))


def landed(store: Store, retry: RetryPolicy, prefix: str, n: int, seen_at: float) -> bool:
    """Whether entry ``n``, just written after a read that began at
    ``seen_at`` (:func:`arrowlog._clock.elapsed`), is the log's. A write whose
    outcome came more than LATE_OUTCOME_MS after that read, or a first entry
    (its "no entry yet" no later check can date), may have landed in a key
    cleanup had freed: then it is a stray, and is removed."""
    if n > 0 and _clock.elapsed() - seen_at <= LATE_OUTCOME_MS / 1000:
        return True
    if not is_stray(store, retry, prefix, n):
        return True
    remove_entry(store, retry, prefix, n)
    return False
