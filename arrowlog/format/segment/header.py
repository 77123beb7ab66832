"""The segment header: who wrote a batch and where it sits, stored in the
schema metadata and readable from the first bytes of a segment."""

from __future__ import annotations

import dataclasses
import json
import struct
from dataclasses import dataclass, field
from typing import Any

import crc32c
import pyarrow as pa

from arrowlog.errors import CorruptSegmentError
from arrowlog.format.segment.framing import CONTINUATION, MAGIC

FORMAT_VERSION = 1
#: the version of a staged data object's header and of a commit object's (see
#: :class:`Ref`): readers that predate them refuse them by this number
STAGED_VERSION = 2
HEADER_KEY = b"arrowlog.header"
HEADER_CRC_KEY = b"arrowlog.header_crc32c"
CRC_KEY = b"arrowlog.crc32c"
#: the column statistics (JSON; see :mod:`arrowlog.format.stats`) and their CRC32C: a
#: key of their own, which readers of the header alone parse only when asked
STATS_KEY = b"arrowlog.stats"
STATS_CRC_KEY = b"arrowlog.stats_crc32c"
#: in a compacted object only: what it holds (JSON, see :class:`Compaction`)
COMPACTED_KEY = b"arrowlog.compacted"
COMPACTED_CRC_KEY = b"arrowlog.compacted_crc32c"
#: in a commit object only: the staged data objects it commits (JSON, see :class:`Ref`)
REFS_KEY = b"arrowlog.refs"
REFS_CRC_KEY = b"arrowlog.refs_crc32c"
#: JSON list of the columns stored dictionary-encoded (compressed topics only)
DICTIONARY_KEY = b"arrowlog.dictionary"
# Enough for the schema message of any ordinary topic; larger schemas cost one more
# ranged read.
HEAD_BYTES = 16 * 1024


@dataclass(frozen=True, kw_only=True, slots=True)
class WriterIdentity:
    """Who wrote a batch, and in what role; defaults describe a plain append."""

    producer_id: int = -1
    producer_epoch: int = -1
    base_sequence: int = -1
    transactional: bool = False
    #: "COMMIT" or "ABORT" for a control record (a transaction marker), else None.
    control_type: str | None = None
    transactional_id: str | None = None
    #: for a marker: the transaction's records in this partition lie below this
    #: offset (its bound, fixed at PREPARE_COMMIT); records of it at or past the
    #: bound never belong to it
    txn_bound: int = -1

    @property
    def control(self) -> bool:
        return self.control_type is not None


PLAIN_APPEND = WriterIdentity()
# raw_decode of a str: json.loads of bytes first sniffs their encoding, which
# was a third of a small segment's header parse
_DECODER = json.JSONDecoder()
_IDENTITY_FIELDS = tuple(WriterIdentity.__dataclass_fields__)


@dataclass(frozen=True, slots=True)
class Compaction:
    """What a compacted object holds: the records of offsets ``[start, end)``
    that a read_committed reader sees, as runs ``(base, count, timestamp_ms)``,
    one per segment they came from, in offset order, one after another in the
    batch. The offsets between runs held aborted records or markers."""

    start: int
    end: int
    runs: tuple[tuple[int, int, int], ...]
    #: each run's base -> ``(row, count, timestamp_ms)``: where in the batch the
    #: records of the segment at that base begin (derived from ``runs``)
    _rows: dict[int, tuple[int, int, int]] = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        rows = {}
        row = 0
        for base, count, ts in self.runs:
            rows[base] = (row, count, ts)
            row += count
        object.__setattr__(self, "_rows", rows)

    def run_of(self, base: int, end: int, *, droppable: bool, key: str) -> tuple[int, int] | None:
        """Where the records of the segment ``[base, end)`` lie in the batch (its
        first row) and their timestamp; None if the object left them out and the
        segment is ``droppable`` (aborted records or a marker may be).

        Raises:
            CorruptSegmentError: left out though not droppable, or held with
                another count than the log's.
        """
        found = self._rows.get(base)
        if found is None:
            if droppable:
                return None
            raise CorruptSegmentError(
                f"compacted object leaves out the records of [{base}, {end}), which the "
                "log says it holds",
                key=key,
            )
        row, count, timestamp_ms = found
        if count != end - base:
            raise CorruptSegmentError(
                f"compacted object holds {count} records at {base}, the log says [{base}, {end})",
                key=key,
            )
        return row, timestamp_ms

    def to_json(self) -> bytes:
        fields = {"start": self.start, "end": self.end, "runs": [list(r) for r in self.runs]}
        return json.dumps(fields, separators=(",", ":")).encode()

    @classmethod
    def from_json(cls, raw: bytes, *, key: str, records: int) -> Compaction:
        try:
            fields = json.loads(raw)
            start, end = int(fields["start"]), int(fields["end"])
            runs = tuple((int(b), int(c), int(t)) for b, c, t in fields["runs"])
        except (ValueError, TypeError, KeyError) as e:
            raise CorruptSegmentError(f"unreadable compaction table: {e}", key=key) from e
        at = start
        for base, count, _ in runs:
            if base < at or count < 1:
                raise CorruptSegmentError("compaction table runs out of order", key=key)
            at = base + count
        if at > end or sum(c for _, c, _ in runs) != records:
            raise CorruptSegmentError("compaction table does not match its records", key=key)
        return cls(start, end, runs)


@dataclass(frozen=True, kw_only=True, slots=True)
class Ref:
    """One staged data object that a commit object commits: where it is
    (``at``, relative to the partition's directory), how many records it holds
    and who wrote them. Its offsets follow from its place in the commit: the
    first ref starts at the commit's base offset, each next one where the one
    before ends (docs/protocol.md, "Staged appends")."""

    at: str
    record_count: int
    size: int
    timestamp_ms: int
    append_id: str
    identity: WriterIdentity = PLAIN_APPEND
    stats: dict[str, list[Any]] | None = None

    def to_dict(self) -> dict[str, Any]:
        fields: dict[str, Any] = {
            "at": self.at, "n": self.record_count, "size": self.size,
            "ts": self.timestamp_ms, "id": self.append_id,
        }  # fmt: skip
        who = self.identity
        if who.producer_id >= 0:
            fields["pid"] = [who.producer_id, who.producer_epoch, who.base_sequence]
        if who.transactional:
            fields["txn"] = who.transactional_id
        if self.stats:
            fields["stats"] = self.stats
        return fields

    @classmethod
    def from_dict(cls, fields: dict[str, Any]) -> Ref:
        """Raises: KeyError, TypeError, ValueError: not a ref."""
        pid, epoch, sequence = fields.get("pid", (-1, -1, -1))
        txn = fields.get("txn")
        identity = WriterIdentity(
            producer_id=int(pid), producer_epoch=int(epoch), base_sequence=int(sequence),
            transactional="txn" in fields, transactional_id=None if txn is None else str(txn),
        )  # fmt: skip
        ref = cls(
            at=str(fields["at"]), record_count=int(fields["n"]), size=int(fields["size"]),
            timestamp_ms=int(fields["ts"]), append_id=str(fields["id"]), identity=identity,
            stats=fields.get("stats"),
        )  # fmt: skip
        if ref.record_count < 1 or ref.size < 1 or not ref.at.startswith("staged/"):
            raise ValueError(f"impossible ref {fields!r}")
        return ref


@dataclass(frozen=True, kw_only=True, slots=True)
class SegmentHeader:
    """What a segment says about itself. Offsets ``[base_offset, next_offset)``."""

    base_offset: int
    record_count: int
    timestamp_ms: int
    append_id: str
    identity: WriterIdentity = PLAIN_APPEND
    #: min, max and null count per primitive column (written beside the header,
    #: not in its JSON: see :func:`stats_metadata`)
    stats: dict[str, list[Any]] | None = None
    #: in a compacted object, what it holds (a key of its own beside the header
    #: JSON, see :func:`compaction_metadata`); None in a segment
    compaction: Compaction | None = None
    #: a staged data object: its records' offsets are given by the commit
    #: object that references it, not by ``base_offset`` (written as 0)
    staged: bool = False
    #: in a commit object: the staged data objects it commits, in offset order
    #: (a key of its own beside the header JSON, see :func:`refs_metadata`)
    refs: tuple[Ref, ...] | None = None

    @property
    def next_offset(self) -> int:
        return self.base_offset + self.record_count

    @property
    def last_offset(self) -> int:
        return self.base_offset + self.record_count - 1

    def to_json(self) -> bytes:
        # One flat JSON object: the identity's fields sit beside the offsets.
        fields: dict[str, Any] = {
            "v": STAGED_VERSION if self.staged or self.refs is not None else FORMAT_VERSION,
            "base_offset": self.base_offset,
            "record_count": self.record_count,
            "timestamp_ms": self.timestamp_ms,
            "append_id": self.append_id,
            # not dataclasses.asdict: its deep copy was a tenth of an append's CPU
            **{name: getattr(self.identity, name) for name in _IDENTITY_FIELDS},
        }
        if self.staged:
            fields["staged"] = True
        return json.dumps(fields, sort_keys=True, separators=(",", ":")).encode()

    @classmethod
    def from_json(cls, raw: bytes, *, key: str) -> SegmentHeader:
        try:
            fields, end = _DECODER.raw_decode(raw.decode())
            if end != len(raw) or not isinstance(fields, dict):
                raise ValueError("not one JSON object")
            version = fields.pop("v")
            if version not in (FORMAT_VERSION, STAGED_VERSION):
                raise CorruptSegmentError(f"unsupported segment format version {version}", key=key)
            identity = {f: fields.pop(f) for f in _IDENTITY_FIELDS if f in fields}
            header = cls(**fields, identity=WriterIdentity(**identity))
        except CorruptSegmentError:
            raise
        except (ValueError, TypeError, KeyError) as e:
            raise CorruptSegmentError(f"unreadable segment header: {e}", key=key) from e
        if header.base_offset < 0 or header.record_count < 0:
            raise CorruptSegmentError("segment header has impossible offsets", key=key)
        if header.staged and (version != STAGED_VERSION or header.base_offset != 0):
            raise CorruptSegmentError("staged data object with an impossible header", key=key)
        return header


def hex8(value: int) -> bytes:
    return b"%08x" % value


def read_header(head: bytes | memoryview, *, key: str) -> SegmentHeader | int:
    """The header from the first bytes of a segment, checked by its own CRC.

    Returns the number of bytes needed instead, if ``head`` is too short to hold
    the whole schema message.

    Raises:
        CorruptSegmentError: the bytes are not the start of a segment.
    """
    schema = head_schema(head, key)
    if isinstance(schema, int):
        return schema
    return header_from_metadata(schema.metadata, key)


def head_length(head: bytes | memoryview, key: str) -> int:
    """How many first bytes of a segment hold its schema message (and so its
    header), from at least its first 16.

    Raises:
        CorruptSegmentError: the bytes are not the start of a segment.
    """
    if len(head) < 16 or head[:6] != MAGIC:
        raise CorruptSegmentError("not an Arrow IPC file", key=key)
    continuation, schema_len = struct.unpack_from("<Ii", head, 8)
    if continuation != CONTINUATION or schema_len <= 0:
        raise CorruptSegmentError("bad IPC framing", key=key)
    return int(16 + schema_len)


def head_schema(head: bytes | memoryview, key: str) -> pa.Schema | int:
    """The schema message from the first bytes of a segment, or how many bytes
    it needs."""
    need = head_length(head, key)
    if len(head) < need:
        return need
    try:
        return pa.ipc.read_schema(pa.py_buffer(head[8:need]))
    except (pa.ArrowException, OSError) as e:  # a bad flatbuffer is an OSError
        raise CorruptSegmentError(f"unreadable schema message: {e}", key=key) from e


def header_from_metadata(
    metadata: dict[bytes, bytes] | None, key: str, *, stats: bool = True
) -> SegmentHeader:
    """The header, with its column statistics unless ``stats`` is false (a
    whole-segment read has no use for them)."""
    metadata = metadata or {}
    raw = metadata.get(HEADER_KEY)
    crc = metadata.get(HEADER_CRC_KEY)
    if raw is None or crc is None:
        raise CorruptSegmentError("no arrowlog header: not a segment", key=key)
    if crc != hex8(crc32c.crc32c(raw)):
        raise CorruptSegmentError("header checksum mismatch", key=key)
    header = SegmentHeader.from_json(raw, key=key)
    compacted = metadata.get(COMPACTED_KEY)
    if compacted is not None:
        if metadata.get(COMPACTED_CRC_KEY) != hex8(crc32c.crc32c(compacted)):
            raise CorruptSegmentError("compaction table checksum mismatch", key=key)
        table = Compaction.from_json(compacted, key=key, records=header.record_count)
        header = dataclasses.replace(header, compaction=table)
    elif header.record_count < 1:  # only a compacted object may hold no records
        raise CorruptSegmentError("segment header has impossible offsets", key=key)
    refs = metadata.get(REFS_KEY)
    if refs is not None:
        header = dataclasses.replace(header, refs=_parse_refs(metadata, refs, header, key))
    found = metadata.get(STATS_KEY)
    if not stats or found is None:
        return header
    if metadata.get(STATS_CRC_KEY) != hex8(crc32c.crc32c(found)):
        raise CorruptSegmentError("column statistics checksum mismatch", key=key)
    try:
        parsed = json.loads(found)
        if not isinstance(parsed, dict) or not all(
            isinstance(v, list) and len(v) == 3 and type(v[2]) is int for v in parsed.values()
        ):
            raise ValueError("not a map of [min, max, nulls]")
    except ValueError as e:
        raise CorruptSegmentError(f"unreadable column statistics: {e}", key=key) from e
    return dataclasses.replace(header, stats=parsed)


def stats_metadata(header: SegmentHeader) -> dict[bytes, bytes]:
    """The schema metadata entries of a header's column statistics."""
    if not header.stats:
        return {}
    raw = json.dumps(header.stats, separators=(",", ":"), allow_nan=False).encode()
    return {STATS_KEY: raw, STATS_CRC_KEY: hex8(crc32c.crc32c(raw))}


def refs_metadata(header: SegmentHeader) -> dict[bytes, bytes]:
    """The schema metadata entries of a commit object's refs."""
    if header.refs is None:
        return {}
    raw = json.dumps(
        [r.to_dict() for r in header.refs], separators=(",", ":"), allow_nan=False
    ).encode()
    return {REFS_KEY: raw, REFS_CRC_KEY: hex8(crc32c.crc32c(raw))}


def _parse_refs(
    metadata: dict[bytes, bytes], raw: bytes, header: SegmentHeader, key: str
) -> tuple[Ref, ...]:
    if metadata.get(REFS_CRC_KEY) != hex8(crc32c.crc32c(raw)):
        raise CorruptSegmentError("commit refs checksum mismatch", key=key)
    try:
        refs = tuple(Ref.from_dict(r) for r in json.loads(raw))
    except (ValueError, TypeError, KeyError) as e:
        raise CorruptSegmentError(f"unreadable commit refs: {e}", key=key) from e
    if not refs or sum(r.record_count for r in refs) != header.record_count or header.staged:
        raise CorruptSegmentError("commit refs do not cover the commit's offsets", key=key)
    if len({r.at for r in refs}) != len(refs) or len({r.append_id for r in refs}) != len(refs):
        raise CorruptSegmentError("a commit names one staged object twice", key=key)
    return refs


def compaction_metadata(header: SegmentHeader) -> dict[bytes, bytes]:
    """The schema metadata entries of a compacted object's table."""
    if header.compaction is None:
        return {}
    raw = header.compaction.to_json()
    return {COMPACTED_KEY: raw, COMPACTED_CRC_KEY: hex8(crc32c.crc32c(raw))}


def user_metadata(metadata: dict[bytes, bytes] | None) -> dict[bytes, bytes] | None:
    kept = {k: v for k, v in (metadata or {}).items() if not k.startswith(b"arrowlog.")}
    return kept or None
