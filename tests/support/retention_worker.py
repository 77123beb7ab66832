"""A vacuum in its own OS process that SIGKILLs itself at a chosen write:
``python -m tests.support.retention_worker ROOT N WHEN`` runs ``vacuum()`` on
the local directory ROOT and kills itself just before (WHEN=before) or just
after (WHEN=after) its N-th PUT or DELETE. Prints the writes it made if it
was not killed."""

from __future__ import annotations

import json
import os
import signal
import sys

import arrowlog
from arrowlog.storage import Store
from arrowlog.storage.url import open_store


class KillAt:
    def __init__(self, inner: Store, n: int, when: str) -> None:
        self.inner = inner
        self.n = n
        self.when = when
        self.count = 0
        self.writes: list[list[str]] = []

    def __getattr__(self, name: str):  # type: ignore[no-untyped-def]
        return getattr(self.inner, name)

    def _write(self, op: str, key: str, call):  # type: ignore[no-untyped-def]
        self.count += 1
        if self.count == self.n and self.when == "before":
            os.kill(os.getpid(), signal.SIGKILL)
        out = call()
        self.writes.append([op, key])
        if self.count == self.n and self.when == "after":
            os.kill(os.getpid(), signal.SIGKILL)
        return out

    def put_if_absent(self, key, data):  # type: ignore[no-untyped-def]
        return self._write("put", key, lambda: self.inner.put_if_absent(key, data))

    def delete(self, key):  # type: ignore[no-untyped-def]
        return self._write("delete", key, lambda: self.inner.delete(key))

    # explicit pass-throughs (the Store protocol)
    def get(self, key):  # type: ignore[no-untyped-def]
        return self.inner.get(key)

    def get_range(self, key, start, end):  # type: ignore[no-untyped-def]
        return self.inner.get_range(key, start, end)

    def get_range_tagged(self, key, start, end):  # type: ignore[no-untyped-def]
        return self.inner.get_range_tagged(key, start, end)

    def head(self, key):  # type: ignore[no-untyped-def]
        return self.inner.head(key)

    def list(self, prefix, *, start_after=None, limit=None):  # type: ignore[no-untyped-def]
        return self.inner.list(prefix, start_after=start_after, limit=limit)

    @property
    def url(self) -> str:
        return self.inner.url

    @property
    def atomic_put_if_absent(self) -> bool:
        return True

    def close(self) -> None:
        self.inner.close()


def main() -> None:
    root, n, when = sys.argv[1], int(sys.argv[2]), sys.argv[3]
    store = KillAt(open_store(root, {"fsync": False}), n, when)
    log = arrowlog.connect(store)
    log.maintenance.vacuum()
    print(json.dumps(store.writes), flush=True)


if __name__ == "__main__":
    main()
