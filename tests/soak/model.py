"""What the soak workload writes, named so that every record explains itself.

Topic ``in`` holds plain idempotent appends; each record id is
``<producer instance>.<n>``. Topic ``out`` holds transactional writes; each
record id names its transaction and every partition that transaction wrote to,
with counts, so a checker that sees one record knows what else must be there:

    copy.0~3f9a2c1b7d4e~5|0:3,2:2|2.1
    ^tag (transactional id ~ instance ~ n) ^parts    ^partition 2, record 1 of 2

A record a writer adds after its transaction committed (a straggler: see the
``job`` client) is marked ``x``: ``...|2.x0``. It was never declared, so it
must never be visible.

Copied records carry ``src``, the id of the input record they copy; the
transaction that copies input partition ``i`` up to offset ``u`` commits
``{"in/i": u}`` for group ``soak``, so a committed offset names the
transaction that got there.
"""

from __future__ import annotations

from dataclasses import dataclass

import pyarrow as pa

IN = "in"
OUT = "out"
IN_PARTITIONS = 2
OUT_PARTITIONS = 3
GROUP = "soak"
COPY_TIDS = tuple(f"copy.{i}" for i in range(IN_PARTITIONS))
JOB_TID = "job.0"
#: Transaction timeout of every soak producer: short, so that expiry has work.
TXN_TIMEOUT_MS = 4_000
#: Segments per checkpoint: small, so that reads cross checkpoints all the time.
CHECKPOINT_INTERVAL = 12
#: idempotent producers that all write to partition 0 of ``in`` with staged
#: appends: many writers of one partition helping each other
CROWD = 16

IN_SCHEMA = pa.schema([("rid", pa.string())])
OUT_SCHEMA = pa.schema([("rid", pa.string()), ("src", pa.string())])


def tp(topic: str, partition: int) -> str:
    """The text key of a partition in histories and final reads: ``out/2``."""
    return f"{topic}/{partition}"


def txn_tag(tid: str, instance: str, n: int) -> str:
    return f"{tid}~{instance}~{n}"


def tid_of(tag: str) -> str:
    return tag.split("~", 1)[0]


def encode_parts(parts: dict[int, int]) -> str:
    return ",".join(f"{q}:{c}" for q, c in sorted(parts.items()))


def decode_parts(text: str) -> dict[int, int]:
    out = {}
    for item in text.split(","):
        q, _, c = item.partition(":")
        out[int(q)] = int(c)
    return out


def out_rid(
    tag: str, parts: dict[int, int], partition: int, index: int, *, extra: bool = False
) -> str:
    return f"{tag}|{encode_parts(parts)}|{partition}.{'x' if extra else ''}{index}"


@dataclass(frozen=True)
class OutRecord:
    """What an ``out`` record id says about its transaction."""

    tag: str
    parts: dict[int, int]
    partition: int
    index: int
    extra: bool

    @property
    def tid(self) -> str:
        return tid_of(self.tag)


def parse_out_rid(rid: str) -> OutRecord:
    tag, parts, where = rid.split("|")
    q, _, j = where.partition(".")
    extra = j.startswith("x")
    return OutRecord(tag, decode_parts(parts), int(q), int(j[1:] if extra else j), extra)


def tag_of(rid: str) -> str:
    return rid.split("|", 1)[0]


def declared_rids(tag: str, parts: dict[int, int]) -> dict[int, list[str]]:
    """Every record a transaction declared, by ``out`` partition."""
    return {q: [out_rid(tag, parts, q, j) for j in range(c)] for q, c in parts.items()}


def in_rid(instance: str, n: int) -> str:
    return f"{instance}.{n}"


# --- the Spark writer (tests.soak.spark_writer) --------------------------------------

#: the topic the Spark writer's jobs write to, keyed by ``key``
SP = "sp"
SP_PARTITIONS = 3
SP_SCHEMA = pa.schema([("rid", pa.string()), ("key", pa.string())])
#: the jobs' ``txnAppId``: version v of it writes :func:`sp_rows` of v
SP_APP = "soak"
#: the jobs' transaction timeout: long beside a job (a second or two), short
#: beside a soak, so that the expirer may end what a killed job left open
SP_TXN_TIMEOUT_MS = 8_000


def sp_count(version: int) -> int:
    """How many rows version ``version`` writes."""
    return 30 + (version * 37) % 50


def sp_key(version: int, i: int) -> str:
    """The key of row ``i`` of ``version`` (the Spark job computes the same in SQL:
    :data:`SP_KEY_SQL`)."""
    return f"k{(i * 7 + version) % 13}"


#: :func:`sp_key` and :func:`sp_rid` as Spark SQL over ``spark.range``'s ``id``
SP_KEY_SQL = "concat('k', (id * 7 + {v}) % 13)"
SP_RID_SQL = "concat('sp.{v}.{x}', id)"


def sp_rid(version: int, i: int, *, failed: bool = False) -> str:
    """Row ``i`` of ``version``; ``failed``: of the attempt of that version that
    fails on purpose (``sp.3.x7``), which must never be visible."""
    return f"sp.{version}.{'x' if failed else ''}{i}"


def parse_sp_rid(rid: str) -> tuple[int, int, bool]:
    """(version, row, failed attempt) of an ``sp`` record id."""
    _, version, row = rid.split(".")
    failed = row.startswith("x")
    return int(version), int(row[1:] if failed else row), failed
