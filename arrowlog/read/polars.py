"""A :class:`~arrowlog.read.topic_scan.TopicScan` as a Polars LazyFrame, through
Polars' IO plugin API (``polars.io.plugins.register_io_source``).

Polars hands the source the columns a query needs and its predicate. The
source reads only those columns, and turns the predicate's conjuncts of the
form ``column op literal`` into filter tuples for the scan's plan (segments
and partitions they rule out are not read); the predicate itself is then
applied to every row, as the API asks. A predicate read wrongly could drop
rows, so only forms known exactly are turned into tuples (the expression's
JSON, ``Expr.meta.serialize``); anything else is only applied to the rows.
"""

from __future__ import annotations

import datetime
import json
from collections.abc import Iterator
from typing import TYPE_CHECKING, Any, Protocol

import pyarrow as pa

from arrowlog.errors import MissingDependencyError
from arrowlog.format.stats import Predicate

if TYPE_CHECKING:
    import polars as pl


class Scan(Protocol):
    """What of a :class:`~arrowlog.read.topic_scan.TopicScan` the frame uses."""

    @property
    def schema(self) -> pa.Schema: ...

    def narrowed(self, columns: list[str] | None, hints: list[Predicate] | None) -> Scan: ...

    def to_batches(self) -> Iterator[pa.RecordBatch]: ...


_OPS = {"Eq": "==", "NotEq": "!=", "Lt": "<", "LtEq": "<=", "Gt": ">", "GtEq": ">="}
_MIRROR = {"==": "==", "!=": "!=", "<": ">", "<=": ">=", ">": "<", ">=": "<="}
_UNITS = {"Microseconds": 1, "Milliseconds": 1_000, "Nanoseconds": None}
_SCALARS = (
    "Boolean", "String", "Int8", "Int16", "Int32", "Int64", "UInt8", "UInt16", "UInt32",
    "UInt64", "Float32", "Float64",
)  # fmt: skip


def lazy_frame(scan: Scan) -> pl.LazyFrame:
    """``scan``'s rows as a LazyFrame (see the module's docstring).

    Raises:
        MissingDependencyError: polars is not installed.
    """
    try:
        import polars as pl
        from polars.io.plugins import register_io_source
    except ImportError as e:
        raise MissingDependencyError(
            f"TopicScan.to_polars needs polars: pip install polars ({e})", name="polars"
        ) from e
    schema = pl.DataFrame(pa.Table.from_batches([], scan.schema)).schema

    def source(
        with_columns: list[str] | None,
        predicate: pl.Expr | None,
        n_rows: int | None,
        batch_size: int | None,
    ) -> Iterator[pl.DataFrame]:
        needed = None
        if with_columns is not None:
            names = set(with_columns)
            if predicate is not None:
                names |= set(predicate.meta.root_names())
            needed = [n for n in scan.schema.names if n in names]
        tuples = conjuncts(predicate) if predicate is not None else []
        hints = [t for t in tuples if _pruned_alike(scan.schema, t[0])]
        narrowed = scan.narrowed(needed, hints or None)
        left = n_rows
        for batch in narrowed.to_batches():
            frame = pl.DataFrame(pl.from_arrow(batch))
            if predicate is not None:
                frame = frame.filter(predicate)
            if with_columns is not None:
                frame = frame.select(with_columns)
            if left is not None:
                frame = frame.head(left)
                left -= frame.height
            if frame.height:
                yield frame
            if left is not None and left <= 0:
                return

    return register_io_source(source, schema=schema)


def _pruned_alike(schema: pa.Schema, column: str) -> bool:
    """Whether statistics decide a tuple on ``column`` as Polars compares:
    not on a float narrower than a double (Polars takes a float literal as
    the column's type, ``0.1`` as float32's ``0.1``) nor a decimal."""
    if column not in schema.names:
        return False
    t = schema.field(column).type
    return not (pa.types.is_decimal(t) or (pa.types.is_floating(t) and t.bit_width < 64))


def conjuncts(predicate: pl.Expr) -> list[Predicate]:
    """The top-level conjuncts of a Polars predicate that are filter tuples
    (none where its JSON form is not one known here)."""
    try:
        tree = json.loads(predicate.meta.serialize(format="json"))
    except (ValueError, TypeError, AttributeError):
        return []
    out: list[Predicate] = []
    _collect(tree, out)
    return out


def _collect(node: Any, out: list[Predicate]) -> None:
    binary = node.get("BinaryExpr") if isinstance(node, dict) else None
    if binary is not None and binary.get("op") == "And":
        _collect(binary.get("left"), out)
        _collect(binary.get("right"), out)
        return
    try:
        found = _predicate(node)
    except (KeyError, TypeError, ValueError, IndexError, AttributeError):
        return
    if found is not None:
        out.append(found)


def _predicate(node: dict[str, Any]) -> Predicate | None:
    if "BinaryExpr" in node:
        binary = node["BinaryExpr"]
        op = _OPS.get(binary["op"])
        if op is None:
            return None
        left, right = binary["left"], binary["right"]
        if _column(left) is not None and _literal(right) is not _NONE:
            return (_column(left), op, _literal(right))  # type: ignore[return-value]
        if _column(right) is not None and _literal(left) is not _NONE:
            return (_column(right), _MIRROR[op], _literal(left))  # type: ignore[return-value]
        return None
    if "Function" in node:
        function = node["Function"]
        inputs = function["input"]
        kind = function["function"]
        if len(inputs) == 1 and _column(inputs[0]) is not None:
            if kind == {"Boolean": "IsNull"}:
                return (_column(inputs[0]), "is null", None)  # type: ignore[return-value]
            if kind == {"Boolean": "IsNotNull"}:
                return (_column(inputs[0]), "is not null", None)  # type: ignore[return-value]
    return None


def _column(node: Any) -> str | None:
    if isinstance(node, dict) and isinstance(node.get("Column"), str):
        return str(node["Column"])
    return None


_NONE = object()


def _literal(node: Any) -> Any:
    """A literal's Python value (``_NONE``: not a literal known here; a null
    is none either: a comparison with it keeps no row)."""
    if not isinstance(node, dict) or "Literal" not in node:
        return _NONE
    literal = node["Literal"]
    if "Dyn" in literal:
        ((kind, value),) = literal["Dyn"].items()
        if kind in ("Int", "Float") and isinstance(value, (int, float)):
            return value
        if kind == "Str" and isinstance(value, str):
            return value
        return _NONE
    if "Scalar" in literal:
        scalar = literal["Scalar"]
        if not isinstance(scalar, dict) or len(scalar) != 1:
            return _NONE
        ((kind, value),) = scalar.items()
        if kind in _SCALARS and value is not None:
            return value
        if kind == "Datetime" and isinstance(value, list) and len(value) == 3:
            ticks, unit, zone = value
            if isinstance(zone, dict):  # {"inner": "UTC"} in Polars 2
                zone = zone.get("inner")
            per_us = _UNITS.get(unit)
            if zone != "UTC" or per_us is None or not isinstance(ticks, int):
                return _NONE  # naive or another zone: the metadata time is UTC
            micros = ticks * per_us
            epoch = datetime.datetime(1970, 1, 1, tzinfo=datetime.timezone.utc)
            return epoch + datetime.timedelta(microseconds=micros)
    return _NONE
