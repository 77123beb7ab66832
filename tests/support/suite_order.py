"""How ``make test``'s two workers share the test files (``--dist loadfile``).

xdist's own file scheduling hands each file to one worker, the files with the
most tests first, and a worker takes its next file as it nears the end of the
last. Two things cost time with it:

- every Spark test file may land on either worker, and each worker then starts
  a Spark session of its own (a JVM whose start and warm-up cost 10-20 s of
  CPU on a machine whose two cores the suite keeps busy);
- the files of a few long tests (soaks, Spark in processes of their own, the
  personas) came last, and one worker finished alone with them while the
  other idled.

:class:`SuiteScheduling` makes ``tests/spark`` one unit of work, so one worker
runs every test of the shared session, and hands out the units longest first:
``tests/spark``, then :data:`LONG_FILES` in order, then the other files, most
tests first. tests/conftest.py installs it for ``--dist loadfile``.
"""

from __future__ import annotations

from collections import OrderedDict
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    import pytest

#: the directory whose files run as one unit: the tests of the shared Spark session
SPARK_UNIT = "tests/spark"

#: the files outside tests/spark that took about 40 s or more of a worker's
#: time in ``make test`` (measured on 2 cores, longest first). A stale entry
#: costs nothing but its place; tests/test_docs.py checks that each one exists.
LONG_FILES = (
    "tests/partition/test_append_races.py",
    "tests/soak/test_soak.py",
    "tests/maintenance/test_retention.py",
    "tests/maintenance/test_compaction.py",
    "tests/txn/test_zombie_and_killed_processes.py",
    "tests/maintenance/test_compaction_schedules.py",
    "tests/txn/test_exactly_once_copier.py",
    "tests/jobs/test_export_schedules.py",
    "tests/test_personas.py",
    "tests/storage/test_backends.py",
    "tests/maintenance/test_retention_schedules.py",
    "tests/maintenance/test_cleanup_schedules.py",
    "tests/partition/test_partition_log.py",
)


def unit_of(nodeid: str) -> str:
    """The unit of work a test belongs to: ``tests/spark``, or its file."""
    path = nodeid.split("::", 1)[0]
    return SPARK_UNIT if path.startswith(SPARK_UNIT + "/") else path


#: the place of each unit named above in the queue
_PLACES = {unit: i for i, unit in enumerate((SPARK_UNIT, *LONG_FILES))}


def rank(unit: str, tests: int) -> tuple[int, int]:
    """Where a unit of ``tests`` tests goes in the queue: the lower, the sooner."""
    if unit in _PLACES:
        return _PLACES[unit], 0
    return len(_PLACES), -tests


class _LongestFirst(OrderedDict[str, dict[str, bool]]):
    """xdist's queue of units (unit -> {nodeid: done}), from which it pops the
    first: this one pops the unit :func:`rank` puts first."""

    def popitem(self, last: bool = True) -> tuple[str, dict[str, bool]]:
        if not self:
            raise KeyError("popitem(): dictionary is empty")
        unit = min(self, key=lambda name: rank(name, len(self[name])))
        return unit, self.pop(unit)


def make_scheduler(config: pytest.Config, log: Any) -> Any:
    from xdist.scheduler import LoadFileScheduling  # type: ignore[import-untyped]

    class SuiteScheduling(LoadFileScheduling):  # type: ignore[misc]  # untyped
        def __init__(self, config: pytest.Config, log: Any = None) -> None:
            super().__init__(config, log)
            self.workqueue = _LongestFirst()

        def _split_scope(self, nodeid: str) -> str:
            return unit_of(nodeid)

    return SuiteScheduling(config, log)
