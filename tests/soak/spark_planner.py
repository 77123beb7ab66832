"""The Spark writer's planner, with a kill switch: ``python -m tests.soak.spark_planner``.

The soak's Spark client points its session's ``spark.arrowlog.python`` at a
script that runs this module where the JVM driver would run ``python -m
arrowlog.spark.jvm_planner``. It is that planner, unchanged, except that every
store it opens is wrapped: at the step of the write protocol named by
``$ARROWLOG_SOAK_DIE_AT`` (``STEP:N:before|after``, see
:class:`~tests.soak.chaos.KillPoint`) it SIGKILLs its whole process group, that
is the Spark client, its JVM and this planner at once, as a machine that dies
does. Each step is counted over the planner's life:

- ``commit_object``: a put in ``sp``'s ``segments/`` by ``write_commit``
  before the transaction commits (a commit object naming staged objects);
- ``marker``: such a put while the transaction commits (a COMMIT marker);
- ``fence_marker``: such a put while a job begins (aborting an earlier attempt);
- a coordinator entry's state (``ONGOING``, ``PREPARE_COMMIT``,
  ``COMPLETE_COMMIT``, ``PREPARE_ABORT``, ...).
"""

from __future__ import annotations

import fnmatch
import json
import os
import signal
import sys
import threading
import time
import uuid
from collections.abc import Callable
from pathlib import Path
from typing import Any

import arrowlog.log.client
from arrowlog.spark import jvm_planner, jvm_writing, sink
from arrowlog.storage import Blob, Store
from tests.soak.chaos import COORDINATOR, KillPoint
from tests.soak.history import History
from tests.soak.model import SP

#: what the Spark client tells its planner, through the environment the JVM passes on
ENV_DIE_AT = "ARROWLOG_SOAK_DIE_AT"
ENV_HISTORY = "ARROWLOG_SOAK_HISTORY"
ENV_SLOT = "ARROWLOG_SOAK_SLOT"
SEGMENTS_SP = f"{SP}/*/segments/*"


class Steps:
    """Names each put of the write protocol, counts them, and dies at the planned one."""

    def __init__(self, point: KillPoint | None, history: History) -> None:
        self.point = point
        self.history = history
        self.phase = "begin"
        self.seen: dict[str, int] = {}
        self._lock = threading.Lock()

    def step(self, key: str, data: Blob) -> str | None:
        if fnmatch.fnmatchcase(key, SEGMENTS_SP):
            return {"commit": "commit_object", "finish": "marker"}.get(self.phase, "fence_marker")
        if fnmatch.fnmatchcase(key, COORDINATOR):
            try:
                return str(json.loads(bytes(data))["state"])
            except (ValueError, KeyError):
                return "coordinator"
        return None

    def around(self, key: str, data: Blob, put: Callable[[], None]) -> None:
        step = self.step(key, data)
        point = self.point
        fire = False
        if step is not None:
            with self._lock:
                n = self.seen[step] = self.seen.get(step, 0) + 1
            fire = point is not None and point.pattern == step and point.nth == n
        if fire and point is not None and point.when == "before":
            self.die(key, step, "before")
        put()
        if fire:
            self.die(key, step, "after")

    def die(self, key: str, step: str | None, when: str) -> None:
        self.history.event("die", key=key, step=step, when=when, phase=self.phase)
        os.killpg(os.getpgrp(), signal.SIGKILL)
        time.sleep(60)  # never reached: the signal is immediate


def _phased(steps: Steps, phase: str, fn: Callable[..., Any]) -> Callable[..., Any]:
    def run(*args: Any, **kwargs: Any) -> Any:
        before, steps.phase = steps.phase, phase
        try:
            return fn(*args, **kwargs)
        finally:
            steps.phase = before

    return run


def install(point: KillPoint | None, history: History) -> Steps:
    """Wrap every store the planner opens; name the phases of a write."""
    steps = Steps(point, history)
    client: Any = arrowlog.log.client  # connect() opens stores through its open_store
    real_open = client.open_store

    def open_store(*args: Any, **kwargs: Any) -> Store:
        # the put of this very object is wrapped (not the store, in a wrapper):
        # the planner decides by the store's class how executors upload
        store: Store = real_open(*args, **kwargs)
        put = store.put_if_absent

        def put_if_absent(key: str, data: Blob) -> None:
            steps.around(key, data, lambda: put(key, data))

        store.put_if_absent = put_if_absent  # type: ignore[method-assign]
        return store

    client.open_store = open_store
    jvm_writing.commit = _phased(steps, "commit", jvm_writing.commit)
    jvm_writing.begin = _phased(steps, "begin", jvm_writing.begin)
    sink.JobTransaction.commit = _phased(steps, "finish", sink.JobTransaction.commit)  # type: ignore[method-assign]
    return steps


def main() -> int:
    die_at = os.environ.get(ENV_DIE_AT)
    directory = Path(os.environ[ENV_HISTORY])
    slot = os.environ.get(ENV_SLOT, "spark")
    name = f"{slot}-planner-{os.getpid()}-{uuid.uuid4().hex[:6]}.jsonl"
    history = History(directory / name, slot=slot, role="spark-planner")
    history.event("planner", die_at=die_at)
    install(KillPoint.parse(die_at) if die_at else None, history)
    return jvm_planner.main()


if __name__ == "__main__":
    sys.exit(main())
