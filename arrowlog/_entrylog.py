"""What the coordinator and group logs share: entries numbered from 0 under
one prefix, keyed by inverted numbers (a LIST shows the newest first), and
what cleanup (docs/protocol.md, "Cleaning up") does to them: it removes
entries from the bottom, each only once the entry after it is older than its
horizon. A write that lands in a key it freed is a *stray*: below the log,
never part of it.
"""

from __future__ import annotations

from collections.abc import Callable

from arrowlog._retain import LATE_OUTCOME_MS
from arrowlog.config import RetryPolicy
from arrowlog.storage import ObjectInfo, Store

_INVERT = 10**20 - 1


def entry_name(n: int) -> str:
    return f"{_INVERT - n:020d}.json"


def parse_entry_name(name: str) -> int | None:
    """The number of an :func:`entry_name` (None for other names)."""
    if len(name) != 25 or not name.endswith(".json") or not name[:20].isdigit():
        return None
    return _INVERT - int(name[:20])


def inverted(older: ObjectInfo, newer: ObjectInfo) -> bool:
    """Whether ``older`` (entry n) was written well after ``newer`` (entry
    n + 1): never so in a log, where n + 1 is written after n was read; so for
    a stray, put after n + 1 had been there longer than cleanup's horizon."""
    if older.modified_ms is None or newer.modified_ms is None:
        return False
    return older.modified_ms - newer.modified_ms > LATE_OUTCOME_MS


def is_stray(
    store: Store, retry: RetryPolicy, prefix: str, n: int, *, top: int | None = None
) -> bool:
    """Whether entry ``n`` of the log under ``prefix`` lies below the log. It
    does iff a newer entry exists and entry ``n + 1`` is gone (it was removed,
    so it lay below the log, and ``n`` under it) or was written before ``n``
    (:func:`inverted`). One LIST (none if ``top``, a newer entry known to
    exist, is given) and up to two HEADs."""
    if top is None:
        listed = retry.call(lambda: list(store.list(prefix, limit=1)))
        top = parse_entry_name(listed[0].key[len(prefix) :]) if listed else None
    if top is None or top <= n:
        return False
    try:
        after = retry.call(lambda: store.head(prefix + entry_name(n + 1)))
        own = retry.call(lambda: store.head(prefix + entry_name(n)))
    except FileNotFoundError:
        return True
    return inverted(own, after)


def kept_run(
    listed: dict[int, ObjectInfo], top: int, head: Callable[[int], ObjectInfo | None]
) -> int:
    """The first number of the run of entries that ends at ``top``: the
    entries kept. Below a gap or an :func:`inverted` pair lie only strays. A
    number missing from ``listed`` is asked by ``head`` first (a listing racing
    writes may miss one)."""
    first = top
    current = listed.get(top) or head(top)
    while first > 0:
        below = listed.get(first - 1) or head(first - 1)
        if below is None or current is None or inverted(below, current):
            break
        first, current = first - 1, below
    return first
