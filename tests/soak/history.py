"""Histories: what each client process was told, one JSON line per event.

Every client process appends to its own file. An operation is two lines, as in
Jepsen: an ``invoke`` line written (and flushed to the kernel, so a SIGKILL
cannot lose it) before the call, and an ``ok`` or ``fail`` line after it. An
invoke with no completion is an operation whose outcome the client never
learnt (it was killed). Times are the real wall clock (``time.time`` as it was
when this module was imported: a client whose clock is skewed on purpose still
writes true times), taken before and after each call.

Lines::

    {"type": "invoke", "id": OP, "f": KIND, "t": T0, "slot", "role", "pid", "inst", ...args}
    {"type": "ok",     "id": OP, "t": T1, "result": {...}}
    {"type": "fail",   "id": OP, "t": T1, "error": NAME, "retriable": B, "maybe_applied": B|null,
                       "message": TEXT}
    {"type": "event",  "f": KIND, "t": T, "slot", "role", "pid", ...fields}
"""

from __future__ import annotations

import json
import os
import threading
import time
import uuid
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

#: The true clock, captured before any client skews ``time.time``.
now = time.time

Status = Literal["ok", "fail", "unknown"]


def new_instance() -> str:
    """A short unique name for one client instance (a producer, a reader)."""
    return uuid.uuid4().hex[:12]


class History:
    """Appends events to one JSONL file; safe to share between threads."""

    def __init__(self, path: Path, *, slot: str, role: str) -> None:
        path.parent.mkdir(parents=True, exist_ok=True)
        self._fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644)
        self._base = {"slot": slot, "role": role, "pid": os.getpid()}
        self._nonce = uuid.uuid4().hex[:8]
        self._count = 0
        self._lock = threading.Lock()

    def _write(self, line: dict[str, Any]) -> None:
        data = (json.dumps(line, separators=(",", ":")) + "\n").encode()
        with self._lock:
            # One write per line with O_APPEND: a kill never leaves half a line
            # behind a whole one, and the kernel has the line once this returns.
            os.write(self._fd, data)

    def event(self, f: str, **fields: Any) -> None:
        self._write({"type": "event", "f": f, "t": now(), **self._base, **fields})

    def invoke(self, f: str, **args: Any) -> Op:
        with self._lock:
            self._count += 1
            op_id = f"{self._nonce}.{self._count}"
        self._write({"type": "invoke", "id": op_id, "f": f, "t": now(), **self._base, **args})
        return Op(self, op_id)

    def close(self) -> None:
        os.close(self._fd)


class Op:
    """One invoked operation; record its outcome with :meth:`ok` or :meth:`fail`."""

    def __init__(self, history: History, op_id: str) -> None:
        self._history = history
        self.id = op_id

    def ok(self, **result: Any) -> None:
        self._history._write({"type": "ok", "id": self.id, "t": now(), "result": result})

    def fail(self, error: BaseException) -> None:
        maybe = getattr(error, "maybe_applied", None)
        self._history._write(
            {
                "type": "fail",
                "id": self.id,
                "t": now(),
                "error": type(error).__name__,
                "retriable": bool(getattr(error, "retriable", False)),
                "maybe_applied": maybe if isinstance(maybe, bool) else None,
                "message": str(error)[:300],
            }
        )


# --- reading -----------------------------------------------------------------------


def read_events(paths: Iterable[Path]) -> Iterator[dict[str, Any]]:
    """Every event of the given files. A torn last line (a kill mid-write on a
    file system that splits writes) is skipped."""
    for path in paths:
        with path.open() as f:
            for line in f:
                try:
                    yield json.loads(line)
                except json.JSONDecodeError:
                    continue


def read_dir(directory: Path) -> list[dict[str, Any]]:
    return list(read_events(sorted(directory.glob("*.jsonl"))))


@dataclass
class Operation:
    """An invoke paired with its completion (if any)."""

    id: str
    f: str
    slot: str
    role: str
    pid: int
    inst: str | None
    t0: float
    t1: float | None
    status: Status
    args: dict[str, Any]
    result: dict[str, Any] = field(default_factory=dict)
    error: str | None = None
    retriable: bool | None = None
    maybe_applied: bool | None = None
    message: str = ""

    @property
    def ok(self) -> bool:
        return self.status == "ok"

    def describe(self) -> str:
        what = f"{self.f}[{self.slot} inst={self.inst} t={self.t0:.3f}"
        if self.t1 is not None:
            what += f"..{self.t1:.3f}"
        outcome = self.status if self.error is None else f"{self.status}:{self.error}"
        return f"{what} {outcome}]"


_COMMON = ("type", "id", "f", "t", "slot", "role", "pid", "inst")


def pair(events: Iterable[dict[str, Any]]) -> tuple[list[Operation], list[dict[str, Any]]]:
    """Operations (ordered by invoke time) and plain events, from raw lines."""
    ops: dict[str, Operation] = {}
    plain = []
    done: dict[str, dict[str, Any]] = {}
    for e in events:
        kind = e.get("type")
        if kind == "invoke":
            ops[e["id"]] = Operation(
                id=e["id"], f=e["f"], slot=e.get("slot", "?"), role=e.get("role", "?"),
                pid=int(e.get("pid", 0)), inst=e.get("inst"), t0=float(e["t"]), t1=None,
                status="unknown", args={k: v for k, v in e.items() if k not in _COMMON},
            )  # fmt: skip
        elif kind in ("ok", "fail"):
            done[e["id"]] = e
        elif kind == "event":
            plain.append(e)
    for op_id, e in done.items():
        op = ops.get(op_id)
        if op is None:
            continue
        op.t1 = float(e["t"])
        if e["type"] == "ok":
            op.status = "ok"
            op.result = dict(e.get("result") or {})
        else:
            op.status = "fail"
            op.error = e.get("error")
            op.retriable = e.get("retriable")
            op.maybe_applied = e.get("maybe_applied")
            op.message = e.get("message", "")
    return sorted(ops.values(), key=lambda o: o.t0), sorted(plain, key=lambda e: e["t"])
