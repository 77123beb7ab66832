"""The stores the benchmarks run on: arrowlog's URL and options for one, and
obstore's own client on the same place for the baselines."""

from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import Any

import crc32c
import obstore
import pyarrow as pa
from obstore.store import LocalStore, S3Store

from arrowlog.format.segment.codec import SMALL_DECODE_MAX_BYTES


def open_raw(spec: dict[str, Any]) -> Any:
    """A new obstore store (no connection made yet) from a :attr:`Backend.raw_spec`:
    plain data, so that a process of its own can open the same one
    (:mod:`bench.sides`)."""
    if spec["kind"] == "local":
        return LocalStore(spec["root"], mkdir=True)
    return S3Store(
        spec["bucket"],
        prefix=spec["prefix"],
        endpoint=spec["endpoint"],
        access_key_id=spec["access_key"],
        secret_access_key=spec["secret_key"],
        region="us-east-1",
        client_options={"allow_http": True},
    )


@dataclass
class Backend:
    """One store for the benchmarks: arrowlog's URL and options, and a raw
    obstore store on the same place for the baselines."""

    name: str
    url: str
    options: dict[str, Any]
    #: where the raw obstore store is rooted (where arrowlog's root is): see open_raw
    raw_spec: dict[str, Any]
    raw: Any = field(init=False)  # that store, opened once

    def __post_init__(self) -> None:
        self.raw = open_raw(self.raw_spec)

    def new_raw(self) -> Any:
        """A new obstore store like ``raw`` (a new client: no connection made yet)."""
        return open_raw(self.raw_spec)

    def fetch(self, key: str, raw: Any = None, crc: bool = False) -> pa.Table:
        """The baseline's read of one object: an obstore GET, decoded by
        pyarrow, without Arrow's threads for a small object, as arrowlog
        decodes one (see SMALL_DECODE_MAX_BYTES): the fastest way to decode it.
        With ``crc``, the object's CRC32C is computed too (the check arrowlog
        keeps: what a user who checks what they read pays)."""
        data = obstore.get(self.raw if raw is None else raw, key).bytes()
        if crc:
            crc32c.crc32c(data)
        options = pa.ipc.IpcReadOptions(use_threads=len(data) >= SMALL_DECODE_MAX_BYTES)
        return pa.ipc.open_file(pa.py_buffer(memoryview(data)), options=options).read_all()

    def table(
        self, keys: list[str], pool: ThreadPoolExecutor, raw: Any = None, crc: bool = False
    ) -> pa.Table:
        """The baseline's read of objects into one table, as ``log.read``
        returns them: every object's memory held until the last arrives (a
        count of rows that dropped each one as it came would reuse the same
        memory over and over, which a read into a table cannot)."""
        return pa.concat_tables(list(pool.map(lambda key: self.fetch(key, raw, crc), keys)))
