"""Elapsed time for the rules that bound how long a view may be trusted
(docs/protocol.md, "Deleting records", rule 2): a clock that never goes back
and keeps counting while the machine is suspended. Linux's CLOCK_MONOTONIC
(``time.monotonic``) stops during suspend: a writer whose laptop slept or whose
VM was paused for an hour would trust a view an hour old as if it were fresh.
CLOCK_BOOTTIME counts that hour. Elsewhere ``time.monotonic`` is the best there
is (macOS's counts sleep; Windows' does too).
"""

from __future__ import annotations

import time

#: how coarse a store's clock may be: S3 reports LastModified to the second, so
#: an object can look up to this much older than it is (whatever waits for an
#: age on the store's clock waits this much more)
CLOCK_GRAIN_MS = 1000

_BOOTTIME = getattr(time, "CLOCK_BOOTTIME", None)


def elapsed() -> float:
    """Seconds since some fixed point, counting time suspended."""
    if _BOOTTIME is not None:
        return time.clock_gettime(_BOOTTIME)
    return time.monotonic()
