"""A scan's filter: the rows it keeps, exactly, and what of it the plan can use.

A filter is a pyarrow compute expression (``pc.field("kind") == "click"``) or
pyarrow's filter tuples (``[("kind", "==", "click")]``, AND-ed; see
:mod:`arrowlog.format.stats`). Every row a scan returns matches it: the scan
applies it to each batch. Besides, its conjuncts of the form ``column op
literal`` (and ``is_in``, ``is_null``, ``is_valid``) are handed to the plan, as
tuples: on the metadata columns they bound the partitions, offsets and append
times read, on the topic's columns they leave out segments whose statistics
prove that no row matches. A conjunct the plan cannot use is only applied to
the rows, so a conjunct is pushed only when it is implied by the filter: reading
less may never change the rows returned.

A pyarrow expression has no public tree. Its serialized form (what pickling it
writes: an Arrow IPC file whose schema metadata spells the tree in prefix order,
and whose one record batch holds the literals) is read here, through the Arrow C
data interface, which keeps the metadata's order and repeated keys. A form not
understood (another pyarrow) pushes nothing; the filter still applies.
"""

from __future__ import annotations

import ctypes
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc

from arrowlog.errors import InvalidConfigError
from arrowlog.format.stats import Predicate, check_predicates, expression

#: pyarrow's comparison functions, as filter-tuple ops (and their mirror:
#: ``5 < x`` is ``x > 5``)
_COMPARISONS = {
    "equal": ("==", "=="),
    "not_equal": ("!=", "!="),
    "less": ("<", ">"),
    "less_equal": ("<=", ">="),
    "greater": (">", "<"),
    "greater_equal": (">=", "<="),
}

#: a pyarrow expression, filter tuples, or one tuple
Filter = pc.Expression | Sequence[Predicate] | Predicate


@dataclass(frozen=True)
class ScanFilter:
    """``exact`` (None: every row) keeps the rows; every row it keeps matches
    each of ``conjuncts``, which the plan may use."""

    exact: pc.Expression | None
    conjuncts: tuple[Predicate, ...]

    def apply(self, batch: pa.RecordBatch) -> pa.RecordBatch:
        """The rows of ``batch`` the filter keeps."""
        if self.exact is None or batch.num_rows == 0:
            return batch
        # through a table: RecordBatch.filter takes expressions from pyarrow 17 on
        kept = pa.Table.from_batches([batch]).filter(self.exact).combine_chunks()
        return kept.to_batches()[0] if kept.num_rows else batch.slice(0, 0)


def scan_filter(value: Filter | None, schema: pa.Schema) -> ScanFilter:
    """The filter ``value`` over the columns of ``schema`` (a scan's output:
    the topic's columns and the metadata columns).

    Raises:
        InvalidConfigError: a tuple that is not ``(column, op, value)`` with a
            known op, or neither an expression nor a sequence of tuples.
        UnknownColumnError: a tuple names a column ``schema`` lacks.
    """
    if value is None:
        return ScanFilter(None, ())
    if isinstance(value, pc.Expression):
        _check_fields(value, schema)
        return ScanFilter(value, tuple(_conjuncts(value)))
    if isinstance(value, (str, bytes)) or not isinstance(value, Sequence):
        raise InvalidConfigError(
            "filter: a pyarrow compute expression (pc.field('x') > 5) or a list of "
            f"(column, op, value) tuples, not {type(value).__name__}"
        )
    checked = check_predicates(schema, _tuples(value))
    if not checked:
        return ScanFilter(None, ())
    return ScanFilter(expression(checked), tuple(checked))


def field_names(value: Filter | None) -> set[str] | None:
    """The columns a filter reads (None: not known, for an expression whose
    tree cannot be read)."""
    if value is None:
        return set()
    if not isinstance(value, pc.Expression):
        return {str(p[0]) for p in _tuples(value)}
    try:
        tree = _tree(value)
    except (_Unknown, pa.ArrowException, ValueError, IndexError, KeyError, TypeError):
        return None
    names: set[str] = set()
    stack = [tree]
    while stack:
        node = stack.pop()
        if isinstance(node, _Field):
            names.add(node.name)
        elif isinstance(node, _Call):
            stack.extend(node.args)
    return names


def _tuples(value: Sequence[Any]) -> list[tuple[Any, ...]]:
    """Filter tuples as given: a list of them, or one bare ``("x", ">", 5)``."""
    if value and isinstance(value[0], str):
        return [tuple(value)]
    return [tuple(p) if isinstance(p, (list, tuple)) else p for p in value]


def _check_fields(value: pc.Expression, schema: pa.Schema) -> None:
    """Binding the expression to the schema fails now, on bad input, not at
    the first batch read."""
    try:
        pa.table({f.name: pa.array([], f.type) for f in schema}).filter(value)
    except (pa.ArrowInvalid, pa.ArrowNotImplementedError, pa.ArrowTypeError) as e:
        raise InvalidConfigError(f"filter {value}: {e}") from None


# --- reading an expression's tree ------------------------------------------------------


@dataclass(frozen=True)
class _Field:
    name: str


@dataclass(frozen=True)
class _Literal:
    value: pa.Scalar[Any]


@dataclass(frozen=True)
class _Call:
    function: str
    args: tuple[Any, ...]
    options: pa.Scalar[Any] | None


class _Unknown(Exception):
    """A form of the serialized tree this reader does not know."""


def _conjuncts(value: pc.Expression) -> list[Predicate]:
    """The top-level conjuncts of ``value`` that are filter tuples, or none
    if its tree cannot be read."""
    try:
        tree = _tree(value)
    except (_Unknown, pa.ArrowException, ValueError, IndexError, KeyError, TypeError):
        return []
    out: list[Predicate] = []
    _collect(tree, out)
    return out


def _collect(node: Any, out: list[Predicate]) -> None:
    if isinstance(node, _Call) and node.function in ("and", "and_kleene"):
        for arg in node.args:
            _collect(arg, out)
        return
    predicate = _predicate(node)
    if predicate is not None:
        out.append(predicate)


def _predicate(node: Any) -> Predicate | None:
    """``node`` as a filter tuple, if it is one."""
    if not isinstance(node, _Call):
        return None
    if node.function in _COMPARISONS and len(node.args) == 2 and node.options is None:
        left, right = node.args
        op, mirrored = _COMPARISONS[node.function]
        if isinstance(left, _Field) and isinstance(right, _Literal):
            return _compare(left.name, op, right.value)
        if isinstance(left, _Literal) and isinstance(right, _Field):
            return _compare(right.name, mirrored, left.value)
        return None
    if len(node.args) != 1 or not isinstance(node.args[0], _Field):
        return None
    name = node.args[0].name
    if node.function == "is_valid" and node.options is None:
        return (name, "is not null", None)
    if node.function == "is_null" and _option(node.options, "nan_is_null") is False:
        return (name, "is null", None)
    if node.function == "is_in":
        values = _option(node.options, "value_set")
        # nulls in the set may match null values (by the options): not a tuple's "in"
        if isinstance(values, list) and None not in values:
            return (name, "in", values)
    return None


def _compare(name: str, op: str, value: pa.Scalar[Any]) -> Predicate | None:
    if not value.is_valid:
        return None  # a comparison with null keeps no row: nothing to push
    if _finer_than_python(value):
        return None
    return (name, op, value.as_py())


def _finer_than_python(value: pa.Scalar[Any]) -> bool:
    """A nanosecond literal off the microsecond: its Python value (a datetime,
    time or Timestamp, and what the plan makes of it) is rounded, and ``x < v``
    pushed with a rounded ``v`` would leave out rows equal to it."""
    t = value.type
    if not pa.types.is_temporal(t) or getattr(t, "unit", None) != "ns":
        return False
    return bool(value.cast(pa.int64()).as_py() % 1000 != 0)


def _option(options: pa.Scalar[Any] | None, name: str) -> Any:
    if options is None or not isinstance(options, pa.StructScalar):
        raise _Unknown(name)
    return options[name].as_py()


def _tree(value: pc.Expression) -> Any:
    reduced = value.__reduce__()
    buffer = reduced[1][0]
    if not isinstance(buffer, pa.Buffer):
        raise _Unknown("not a buffer")
    reader = pa.ipc.open_file(buffer)
    literals = reader.get_batch(0) if reader.num_record_batches else None
    pairs = _metadata_pairs(reader.schema)
    node, at = _node(pairs, 0, literals)
    if at != len(pairs):
        raise _Unknown("trailing entries")
    return node


def _node(pairs: list[tuple[str, str]], at: int, literals: pa.RecordBatch | None) -> Any:
    key, value = pairs[at]
    if key == "literal":
        if literals is None:
            raise _Unknown("no literals")
        return _Literal(literals.column(int(value))[0]), at + 1
    if key == "field_ref":
        return _Field(value), at + 1
    if key == "call":
        args: list[Any] = []
        options = None
        at += 1
        while pairs[at][0] != "end":
            if pairs[at][0] == "options":
                if literals is None:
                    raise _Unknown("no options")
                options = literals.column(int(pairs[at][1]))[0]
                at += 1
                continue
            arg, at = _node(pairs, at, literals)
            args.append(arg)
        if pairs[at][1] != value:
            raise _Unknown(f"call {value} ends as {pairs[at][1]}")
        return _Call(value, tuple(args), options), at + 1
    raise _Unknown(key)  # nested field refs and any form not known here


class _ArrowSchema(ctypes.Structure):
    """The Arrow C data interface's ``struct ArrowSchema``."""


_ArrowSchema._fields_ = [
    ("format", ctypes.c_char_p),
    ("name", ctypes.c_char_p),
    ("metadata", ctypes.c_void_p),
    ("flags", ctypes.c_int64),
    ("n_children", ctypes.c_int64),
    ("children", ctypes.c_void_p),
    ("dictionary", ctypes.c_void_p),
    ("release", ctypes.c_void_p),
    ("private_data", ctypes.c_void_p),
]


def _metadata_pairs(schema: pa.Schema) -> list[tuple[str, str]]:
    """``schema``'s metadata in order, repeated keys kept (``schema.metadata``
    is a dict): read from its C export, whose metadata is an int32 count and
    int32-length-prefixed keys and values (native byte order)."""
    c = _ArrowSchema()
    schema._export_to_c(ctypes.addressof(c))
    try:
        if not c.metadata:
            return []
        base = c.metadata

        def int32(offset: int) -> int:
            return int(ctypes.c_int32.from_address(base + offset).value)

        count, at = int32(0), 4
        pairs = []
        for _ in range(count):
            parts = []
            for _ in range(2):
                size = int32(at)
                parts.append(ctypes.string_at(base + at + 4, size).decode())
                at += 4 + size
            pairs.append((parts[0], parts[1]))
        return pairs
    finally:
        pa.Schema._import_from_c(ctypes.addressof(c))  # takes it back and releases it
