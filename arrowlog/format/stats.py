"""Per-segment column statistics, and the predicates they decide.

Every data segment's header carries, for each top-level column of a primitive
type, its minimum, maximum and null count (``SegmentHeader.stats``); the
checkpoint keeps them in its segment summaries, so a reader decides which
segments can hold a matching row without fetching any. A bound is either exact
or absent (``None``, unknown), never wrong:

- strings and binaries: bounds only where the segment stores the column
  dictionary-encoded (compressed topics, repetitive values), from the
  dictionary; the minimum is cut to its first 64 bytes (a prefix is still a
  lower bound), a maximum longer than that is left out (a prefix is not an
  upper bound);
- floats: NaN is left out of both bounds by Arrow, and in Spark NaN is larger
  than every number, so a column holding a NaN has no maximum;
- a column of nulls only has neither bound.

Predicates are pyarrow's (and delta-rs') filter tuples, AND-ed:
``[("kind", "==", "click"), ("amount", ">", 10)]``; ops ``== = != < <= > >= in
not in``, and ``is null`` / ``is not null`` with value None.
"""

from __future__ import annotations

import base64
import dataclasses
import datetime
import decimal
import enum
import functools
import math
from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from arrowlog.errors import InvalidConfigError, UnknownColumnError

#: longest string or binary bound kept
MAX_BOUND_BYTES = 64

#: min, max and null count of one column, JSON-ready (see :func:`to_json_value`)
ColumnStats = list[Any]
Stats = dict[str, ColumnStats]
Predicate = tuple[str, str, Any]

_OPS = ("==", "=", "!=", "<", "<=", ">", ">=", "in", "not in", "is null", "is not null")


def is_stringy(t: pa.DataType) -> bool:
    """String and binary types (not views): those compressed segments store as
    dictionaries, and whose bounds come from those dictionaries."""
    return bool(
        pa.types.is_string(t)
        or pa.types.is_large_string(t)
        or pa.types.is_binary(t)
        or pa.types.is_large_binary(t)
    )


def _kept(t: pa.DataType) -> bool:
    # Arrow has no min_max for half floats and durations: they get none
    return bool(
        pa.types.is_integer(t)
        or (pa.types.is_floating(t) and not pa.types.is_float16(t))
        or pa.types.is_boolean(t)
        or pa.types.is_decimal(t)
        or (pa.types.is_temporal(t) and not pa.types.is_interval(t) and not pa.types.is_duration(t))
        or is_stringy(t)
    )


def column_stats(
    batch: pa.RecordBatch, dictionaries: Mapping[int, pa.Array[Any]] | None = None
) -> Stats | None:
    """The statistics of ``batch``'s primitive top-level columns (None if none).

    String and binary columns get bounds only from ``dictionaries`` (column
    index to the values of its dictionary encoding, which a compressed segment
    stores anyway): the min/max of a plain string column cost as much as
    encoding it. Their null count is always there."""
    out: Stats = {}
    kinds = _kinds(batch.schema)
    for i, (f, column) in enumerate(zip(batch.schema, batch.columns, strict=True)):
        kind = kinds[i]
        if kind is _Kind.NONE:
            continue
        nulls = column.null_count
        if nulls == len(column):
            out[f.name] = [None, None, nulls]
            continue
        t = f.type
        if kind is _Kind.NUMBER and nulls == 0:
            # numpy on Arrow's own buffer: a tenth of min_max's cost on small batches
            values = column.to_numpy(zero_copy_only=True)
            out[f.name] = [values.min().item(), values.max().item(), 0]
            continue
        if kind is _Kind.STRING:
            found = (dictionaries or {}).get(i)
            if found is None:
                out[f.name] = [None, None, nulls]
                continue
            column = found
        lo, hi = _bounds(column, t)
        if isinstance(lo, str | bytes):
            lo = _prefix(lo)
        if isinstance(hi, str | bytes) and _too_long(hi):
            hi = None
        out[f.name] = [_encode(lo, t), _encode(hi, t), nulls]
    return out or None


class _Kind(enum.Enum):
    NONE = "none"  # no statistics: nested, dictionary, interval, ...
    NUMBER = "number"  # integers: numpy's min and max are exact
    STRING = "string"  # bounds from a dictionary only
    OTHER = "other"  # floats (NaN), decimals, booleans, temporal: Arrow's min_max


@functools.lru_cache(maxsize=256)
def _kinds(schema: pa.Schema) -> tuple[_Kind, ...]:
    """What each column of a schema gets (pa.Schema hashes by its fields)."""

    def kind(t: pa.DataType) -> _Kind:
        if not _kept(t):
            return _Kind.NONE
        if pa.types.is_integer(t):
            return _Kind.NUMBER
        if is_stringy(t):
            return _Kind.STRING
        return _Kind.OTHER

    return tuple(kind(f.type) for f in schema)


def _bounds(column: pa.Array[Any], t: pa.DataType) -> tuple[Any, Any]:
    if pa.types.is_floating(t):
        if column.null_count == 0 and t.bit_width in (32, 64):
            # numpy: Arrow's NaN-aware min_max took 20 times as long
            values = column.to_numpy(zero_copy_only=True)
            if not np.isnan(values).any():
                return _finite(values.min().item()), _finite(values.max().item())
            finite = values[~np.isnan(values)]
            return (_finite(finite.min().item()) if len(finite) else None), None
        bounds = pc.min_max(column)
        lo = to_json_value(bounds["min"], t)
        if pc.any(pc.is_nan(column)).as_py():
            return (None if lo is None or math.isnan(lo) else lo), None  # NaN: above all
        return lo, to_json_value(bounds["max"], t)
    bounds = pc.min_max(column)
    return to_json_value(bounds["min"], t), to_json_value(bounds["max"], t)


def _finite(value: float) -> float | None:
    """A float bound, or None for an infinite one (not JSON; it prunes nothing)."""
    return None if math.isinf(value) else value


def _too_long(value: str | bytes) -> bool:
    raw = value.encode() if isinstance(value, str) else value
    return len(raw) > MAX_BOUND_BYTES


def _prefix(value: str | bytes) -> str | bytes:
    if isinstance(value, bytes):
        return value[:MAX_BOUND_BYTES]
    return value.encode()[:MAX_BOUND_BYTES].decode(errors="ignore")  # whole characters


def to_json_value(scalar: pa.Scalar[Any], t: pa.DataType) -> Any:
    """A scalar in the comparable Python form bounds use: temporal values as
    integers of their unit, the rest as ``as_py``."""
    if not scalar.is_valid:
        return None
    if pa.types.is_temporal(t):
        width = pa.int32() if t.bit_width == 32 else pa.int64()
        return scalar.cast(width).as_py()
    value = scalar.as_py()
    if isinstance(value, float) and math.isinf(value):
        return None  # not JSON; an infinite bound prunes nothing anyway
    return value


def _encode(value: Any, t: pa.DataType) -> Any:
    if value is None:
        return None
    if isinstance(value, bytes):
        return base64.b64encode(value).decode()
    if isinstance(value, decimal.Decimal):
        return str(value)
    return value


def _decode(value: Any, t: pa.DataType) -> Any:
    if value is None:
        return None
    if pa.types.is_binary(t) or pa.types.is_large_binary(t):
        return base64.b64decode(value)
    if pa.types.is_decimal(t):
        return decimal.Decimal(value)
    return value


def check_predicates(schema: pa.Schema, where: Sequence[Predicate]) -> list[Predicate]:
    """``where`` as a list of checked predicates.

    Raises:
        UnknownColumnError: a predicate names a column the topic lacks.
        InvalidConfigError: a predicate is not a ``(column, op, value)`` tuple of
            a known op.
    """
    if isinstance(where, tuple) and len(where) == 3 and isinstance(where[1], str):
        raise InvalidConfigError(f"where takes a list of (column, op, value), got {where!r}")
    checked = []
    for p in where:
        if not isinstance(p, tuple | list) or len(p) != 3:
            raise InvalidConfigError(f"a predicate is (column, op, value), got {p!r}")
        column, op, value = p
        if column not in schema.names:
            raise UnknownColumnError(f"no column {column!r}: the topic has {schema.names}")
        if op not in _OPS:
            raise InvalidConfigError(f"predicate {p!r}: op must be one of {', '.join(_OPS)}")
        if op in ("in", "not in") and (isinstance(value, str | bytes) or not _iterable(value)):
            raise InvalidConfigError(f"predicate {p!r}: {op} takes a list of values")
        checked.append((column, op, value))
    if not checked:
        return checked
    # pyarrow decides which values each column type compares with: ask it now,
    # on no rows, rather than after the first segment is fetched
    empty = pa.RecordBatch.from_arrays([pa.nulls(0, f.type) for f in schema], schema=schema)
    try:
        row_filter(empty, checked)
    except (pa.ArrowException, TypeError, ValueError, OverflowError) as e:
        raise InvalidConfigError(
            f"where {checked!r} does not apply to the topic's columns: {e}"
        ) from None
    return checked


def _iterable(value: Any) -> bool:
    return isinstance(value, Iterable)


def may_match(stats: Mapping[str, ColumnStats] | None, schema: pa.Schema,
              where: Sequence[Predicate], rows: int) -> bool:  # fmt: skip
    """False only if the statistics prove that no row of ``rows`` satisfies
    every predicate of ``where``; True whenever anything is unknown."""
    if not stats:
        return True
    for column, op, value in where:
        entry = stats.get(column)
        if entry is None:
            continue
        t = schema.field(column).type
        if not _may(entry, t, op, value, rows):
            return False
    return True


def _may(entry: ColumnStats, t: pa.DataType, op: str, value: Any, rows: int) -> bool:
    lo, hi, nulls = _decode(entry[0], t), _decode(entry[1], t), entry[2]
    if op == "is null":
        return bool(nulls > 0)
    if op == "is not null":
        return bool(nulls < rows)
    if op == "not in":
        return True  # pyarrow's not-in holds for nulls; and a range says little of absence
    if nulls >= rows:
        return False  # only nulls: no comparison holds
    if op == "in":
        return any(_may_hold(lo, hi, v, t) for v in value)
    v = _comparable(value, t)
    if isinstance(v, _Unknown):
        return True
    try:
        low = None if lo is None else v.down(lo)
        high = None if hi is None else v.up(hi)
        if op in ("==", "="):
            return _may_equal(lo, hi, v)
        if op == "!=":
            return not (low is not None and low == high == v.below == v.above and lo == hi)
        if op == "<":
            return low is None or low < v.above
        if op == "<=":
            return low is None or low <= v.above
        if op == ">":
            return high is None or high > v.below
        return high is None or high >= v.below  # ">="
    except TypeError:
        return True  # a value of another kind: let the exact filter decide


def _may_equal(lo: Any, hi: Any, v: _Value | _Unknown) -> bool:
    if isinstance(v, _Unknown):
        return True
    try:
        return (lo is None or v.down(lo) <= v.above) and (hi is None or v.below <= v.up(hi))
    except TypeError:
        return True


def _may_hold(lo: Any, hi: Any, value: Any, t: pa.DataType) -> bool:
    """Whether a segment may hold ``value`` of an ``in`` list. pyarrow casts the
    list to the column's type first, rounding: only a value the column's type
    holds exactly is compared."""
    try:
        given = pa.scalar(value)
        cast = given.cast(t)
        if not cast.cast(given.type).equals(given):
            return True
        exact = isinstance(value, int | float | decimal.Decimal)
        if pa.types.is_floating(t) and exact and decimal.Decimal(cast.as_py()) != value:
            return True  # Decimal compares exactly with ints, floats and decimals
    except (pa.ArrowException, TypeError, ValueError, OverflowError):
        return True
    return _may_equal(lo, hi, _comparable(value, t))


class _Unknown:
    """A predicate value with no form the bounds compare with."""


_UNKNOWN = _Unknown()


def _same(bound: Any) -> Any:
    return bound


@dataclasses.dataclass(frozen=True)
class _Value:
    """A predicate's value against a column's bounds, on a grid both lie on.

    ``below`` and ``above`` are the grid points at or below and at or above
    the value (equal when it lies on the grid); ``down`` and ``up`` take a
    lower and an upper bound of the column onto the grid. Each rounds away
    from pruning, so a comparison of the rounded values fails only where the
    exact one does, whichever engine compares: a millisecond column against a
    microsecond bound (grid: the millisecond, the bound rounded), a nanosecond
    column against a microsecond bound (grid: the microsecond, the column's
    bounds rounded, as Spark sees the column), an integer column against
    ``2.5``, a decimal column against a double (compared as doubles, so the
    value is widened to its neighbouring doubles)."""

    below: Any
    above: Any
    down: Callable[[Any], Any] = _same
    up: Callable[[Any], Any] = _same


#: ticks per day of each temporal unit (each divides the finer ones)
_PER_DAY = {"s": 86_400, "ms": 86_400_000, "us": 86_400_000_000, "ns": 86_400_000_000_000}


def _ticks(t: pa.DataType) -> tuple[str, int] | None:
    """What a temporal type measures (an instant or a time of day) and its
    ticks per day; None for other types."""
    if pa.types.is_timestamp(t):
        return "instant", _PER_DAY[t.unit]
    if pa.types.is_date32(t):
        return "instant", 1
    if pa.types.is_date64(t):
        return "instant", _PER_DAY["ms"]
    if pa.types.is_time(t):
        return "time", _PER_DAY[t.unit]
    return None


def _comparable(value: Any, t: pa.DataType) -> _Value | _Unknown:
    """A predicate's value in the bounds' form, or _UNKNOWN if it has none
    (NaN, a value pyarrow cannot take as the column's type)."""
    if value is None:
        return _UNKNOWN
    if isinstance(value, float) and math.isnan(value):
        return _UNKNOWN
    if pa.types.is_temporal(t):
        return _temporal(value, t)
    if pa.types.is_boolean(t):
        return _Value(value, value) if isinstance(value, bool) else _UNKNOWN
    if isinstance(value, decimal.Decimal) and not value.is_finite():
        return _UNKNOWN
    if pa.types.is_decimal(t):
        if isinstance(value, float):
            return _doubles(value, decimal.Decimal)
        if isinstance(value, int | str):
            try:
                exact = decimal.Decimal(str(value))
            except decimal.InvalidOperation:
                return _UNKNOWN
            return _UNKNOWN if not exact.is_finite() else _Value(exact, exact)
        return _Value(value, value)
    if pa.types.is_integer(t) and isinstance(value, float):
        if math.isinf(value) or abs(value) >= 2**53:
            return _UNKNOWN  # pyarrow compares such integers as (rounded) doubles
        return _Value(math.floor(value), math.ceil(value))
    if pa.types.is_floating(t):
        if isinstance(value, int) and not isinstance(value, bool) and abs(value) >= 2**53:
            return _UNKNOWN  # pyarrow compares it as a (rounded) double
        if isinstance(value, decimal.Decimal):
            return _doubles(float(value), float)
    return _Value(value, value)


def _doubles(value: float, to: Callable[[float], Any]) -> _Value | _Unknown:
    """A double compared with a column whose values pyarrow turns into doubles
    (rounding them): its neighbouring doubles bound every value that rounds to it."""
    if math.isinf(value):
        return _UNKNOWN
    return _Value(to(math.nextafter(value, -math.inf)), to(math.nextafter(value, math.inf)))


def _temporal(value: Any, t: pa.DataType) -> _Value | _Unknown:
    column = _ticks(t)
    if isinstance(value, datetime.datetime) and value.tzinfo is None:
        value = value.replace(tzinfo=datetime.timezone.utc)  # a naive bound is UTC
    try:
        scalar = pa.scalar(value)
        given = _ticks(scalar.type)
        if column is None or given is None or given[0] != column[0]:
            return _UNKNOWN
        ticks = scalar.cast(pa.int64()).as_py()
    except (pa.ArrowException, TypeError, ValueError, OverflowError):
        return _UNKNOWN
    if ticks is None:
        return _UNKNOWN
    # the column's unit, or the microsecond where the column is finer (Spark
    # sees no finer): a bound in a finer unit is rounded onto it
    grid = min(column[1], max(given[1], _PER_DAY["us"]))
    per_bound = column[1] // grid
    if given[1] >= grid:
        per_value = given[1] // grid
        below, above = ticks // per_value, -(-ticks // per_value)
    else:
        below = above = ticks * (grid // given[1])
    if per_bound == 1:
        return _Value(below, above)
    return _Value(
        below,
        above,
        down=lambda bound: bound // per_bound,
        up=lambda bound: -(-bound // per_bound),
    )


def expression(where: Sequence[Predicate]) -> pc.Expression:
    """``where`` as one pyarrow expression (every predicate must hold)."""
    result: pc.Expression | None = None
    for column, op, value in where:
        f = pc.field(column)
        if op == "is null":
            e = f.is_null()
        elif op == "is not null":
            e = ~f.is_null()
        elif op in ("in", "not in"):
            e = f.isin(list(value))
            e = e if op == "in" else ~e
        else:
            name = {"==": "equal", "=": "equal", "!=": "not_equal", "<": "less",
                    "<=": "less_equal", ">": "greater", ">=": "greater_equal"}[op]  # fmt: skip
            e = getattr(pc, name)(f, pc.scalar(value))
        result = e if result is None else result & e
    assert result is not None, "no predicates"
    return result


def row_filter(batch: pa.RecordBatch, where: Sequence[Predicate]) -> pa.RecordBatch:
    """The rows of ``batch`` that satisfy ``where``, by pyarrow's semantics (a
    comparison with null is not true)."""
    table = pa.Table.from_batches([batch]).filter(expression(where))
    if table.num_rows == 0:
        return batch.slice(0, 0)
    return table.combine_chunks().to_batches()[0]


def json_bound(schema: pa.Schema) -> int:
    """More bytes than :func:`column_stats` of any batch of ``schema`` takes as
    JSON: a bound is at most 64 bytes of text, 6 bytes each escaped."""
    per_bound = 6 * MAX_BOUND_BYTES + 48
    return 2 + sum(6 * len(f.name) + 2 * per_bound + 32 for f in schema if _kept(f.type))
