"""The horizons of cleanup (:mod:`arrowlog.cleanup`), apart so that the
writers whose rules they bound (coordinator and group logs, partitions) can
import them without importing cleanup."""

from __future__ import annotations

from arrowlog.errors import InvalidConfigError

DAY_MS = 24 * 3600 * 1000
#: what vacuum keeps by default: 7 days, Kafka's transactional.id.expiration.ms
DEFAULT_RETAIN_MS = 7 * DAY_MS
#: the shortest horizon vacuum accepts. Writers of entry logs check a write whose
#: outcome arrived later than :data:`LATE_OUTCOME_MS` after the view it was made
#: on; removal is safe only with a horizon well above that.
MIN_RETAIN_MS = 3600 * 1000
#: a write whose outcome arrives this long after the read it was based on is
#: checked for having landed in a key cleanup had freed
LATE_OUTCOME_MS = 10 * 60 * 1000


def check_retain(retain_ms: object) -> int:
    """``retain_ms`` if it is an int in [1 hour, 10 years].

    Raises:
        InvalidConfigError: anything else; nothing is written.
    """
    if (
        isinstance(retain_ms, bool)
        or not isinstance(retain_ms, int)
        or not MIN_RETAIN_MS <= retain_ms <= 3650 * DAY_MS
    ):
        raise InvalidConfigError(
            f"retain_ms must be an int between {MIN_RETAIN_MS} (1 hour) and "
            f"{3650 * DAY_MS} (10 years), got {retain_ms!r}"
        )
    return retain_ms
