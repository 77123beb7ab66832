"""Each side of a read measurement in a process of its own, as a user runs one
or the other, never both.

In one process, the two sides share glibc's malloc arenas, the pages they have
grown and the threads' memory, so that what one side did changes what the other
costs. Measured (64 x 1 MiB plain segments on SeaweedFS, paired rounds, each
side's reads in the same run): the baseline's new-client read took 89.9 ms and
68 ms of CPU in the process where arrowlog read too, and 95.1 ms and 79 ms of
CPU in a process of its own; the same GETs and checks on arrowlog's fetch
threads faulted in 3,271 pages a read, on the baseline's pool none. A side in a
process of its own pays for its own memory, as it would in a user's job.

The parent starts a :class:`Side` for each, then asks each for one read at a
time, alternating, so that both sides of a round still share the machine's and
the server's state (see :func:`bench.core.paired_ratio`). A side times its read
itself: the request and the reply are not in the time.

    python -m bench.sides    # a side's process: a spec, then the reads asked for
"""

from __future__ import annotations

import json
import subprocess
import sys
import time
from concurrent.futures import ThreadPoolExecutor
from typing import IO, Any

import obstore
import pyarrow as pa

import arrowlog
from arrowlog.config import RetryPolicy
from arrowlog.format.segment import decode_segment
from arrowlog.format.topic import parse_segment_key, segment_prefix
from arrowlog.log.topics import TopicVersions
from arrowlog.partition.fetch import check_segment
from arrowlog.storage.url import open_store
from bench.backend import Backend

#: arrowlog's reads, by name; the others (plain, plain_crc, listed, listed_crc)
#: are the baseline's, and ``checked`` is :mod:`bench.ceiling`'s
OURS = ("ours", "to_end", "cold")


class Side:
    """A process that runs the reads of one side (arrowlog's, ``OURS``, or the
    baseline's) of a partition's read, on request. ``spec``: the backend's name, URL, options
    and raw store (:attr:`Backend.raw_spec`), the topic, its segments' keys and
    its count of rows."""

    def __init__(self, spec: dict[str, Any]) -> None:
        self._process = subprocess.Popen(
            [sys.executable, "-m", "bench.sides"],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            text=True,
        )
        self._ask(json.dumps(spec))

    def time(self, read: str) -> float:
        """The seconds ``read`` took in the side's process."""
        return float(self._ask(read))

    def _ask(self, line: str) -> str:
        stdin, stdout = self._process.stdin, self._process.stdout
        assert stdin is not None and stdout is not None
        stdin.write(line + "\n")
        stdin.flush()
        answer = stdout.readline()
        if not answer:
            raise RuntimeError(f"the side's process ended (exit {self._process.wait()})")
        return answer.strip()

    def close(self) -> None:
        if self._process.stdin is not None:
            self._process.stdin.close()
        self._process.wait(timeout=60)

    def __enter__(self) -> Side:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def _reads(spec: dict[str, Any]) -> dict[str, Any]:
    """The reads of both sides on ``spec``'s partition, by name (a side's
    process runs only its own: the others' clients are never opened)."""
    backend = Backend(spec["name"], spec["url"], spec["options"], spec["raw_spec"])
    topic, keys, rows = spec["topic"], spec["keys"], spec["rows"]
    log: arrowlog.ArrowLog | None = None
    pool = ThreadPoolExecutor(max_workers=8)

    def client() -> arrowlog.ArrowLog:
        nonlocal log
        if log is None:
            log = arrowlog.connect(backend.url, backend.options)
        return log

    def ours() -> None:  # a committed range: its end known, as a planned read has it
        assert client().read(topic, 0, 0, rows).num_rows == rows

    def to_end() -> None:  # up to wherever the log ends now: a LIST first
        assert client().read(topic, 0).num_rows == rows

    def cold() -> None:  # a new client: it knows nothing of the partition
        fresh = arrowlog.connect(backend.url, backend.options)
        assert fresh.read(topic, 0).num_rows == rows
        fresh.close()

    def plain(crc: bool = False) -> None:
        assert backend.table(keys, pool, crc=crc).num_rows == rows

    def listed(crc: bool = False) -> None:  # what a new client must do at least: LIST, then GET
        raw = backend.new_raw()
        prefix = keys[0].rsplit("/", 1)[0] + "/"
        listing = obstore.list(raw, prefix)
        found = [o["path"] for page in listing for o in page if o["path"].endswith(".arrow")]
        assert backend.table(found, pool, raw, crc).num_rows == rows

    def checked() -> None:  # a new client that keeps arrowlog's checks and does nothing else
        store = open_store(backend.url, backend.options)
        entry = TopicVersions(store, RetryPolicy()).latest_topic(topic)
        listed = store.list(segment_prefix(entry.prefix, 0))
        found = [info.key for info in listed if parse_segment_key(info.key) is not None]
        # each segment's file CRC, header and columns; the offsets chained from 0
        items = pool.map(lambda key: decode_segment(store.get(key), key=key), found)
        end, batches = 0, []
        for key, item in zip(found, items, strict=True):
            header, batch = check_segment(item, key, end, item[0].next_offset, entry.schema, None)
            end = header.next_offset
            batches.append(batch)
        assert pa.Table.from_batches(batches, schema=entry.schema).num_rows == rows

    return {"ours": ours, "to_end": to_end, "cold": cold, "plain": plain,
            "plain_crc": lambda: plain(True), "listed": listed,
            "listed_crc": lambda: listed(True), "checked": checked}  # fmt: skip


def serve(requests: IO[str], replies: IO[str]) -> None:
    """A side's process: the spec on the first line, then one read's name per
    line, each answered with the seconds it took."""
    reads = _reads(json.loads(requests.readline()))
    replies.write("ready\n")
    replies.flush()
    for line in requests:
        run = reads[line.strip()]
        started = time.perf_counter()
        run()
        replies.write(f"{time.perf_counter() - started!r}\n")
        replies.flush()


if __name__ == "__main__":
    serve(sys.stdin, sys.stdout)
