"""hypothesis strategies for Arrow schemas and record batches."""

from __future__ import annotations

import datetime
import decimal
from typing import Any

import pyarrow as pa
from hypothesis import strategies as st

_PRIMITIVES: list[tuple[pa.DataType, st.SearchStrategy[Any]]] = [
    (pa.bool_(), st.booleans()),
    (pa.int8(), st.integers(-(2**7), 2**7 - 1)),
    (pa.int32(), st.integers(-(2**31), 2**31 - 1)),
    (pa.int64(), st.integers(-(2**63), 2**63 - 1)),
    (pa.uint16(), st.integers(0, 2**16 - 1)),
    (pa.float32(), st.floats(width=32, allow_nan=False)),
    (pa.float64(), st.floats(allow_nan=False)),
    (pa.string(), st.text(max_size=20)),
    (pa.large_string(), st.text(max_size=20)),
    (pa.binary(), st.binary(max_size=20)),
    (pa.date32(), st.dates(min_value=datetime.date(1, 1, 1))),
    (pa.timestamp("us", tz="UTC"), st.datetimes(timezones=st.just(datetime.timezone.utc))),
    (
        pa.decimal128(12, 3),
        st.decimals(
            min_value=-(10**8), max_value=10**8, places=3, allow_nan=False, allow_infinity=False
        ),
    ),
]


@st.composite
def data_types(draw: st.DrawFn, depth: int = 2) -> tuple[pa.DataType, st.SearchStrategy[Any]]:
    kinds = ["prim"] + (["list", "struct"] if depth > 0 else [])
    kind = draw(st.sampled_from(kinds))
    if kind == "prim":
        primitive: tuple[pa.DataType, st.SearchStrategy[Any]] = draw(st.sampled_from(_PRIMITIVES))
        return primitive
    inner_type, inner_values = draw(data_types(depth - 1))
    if kind == "list":
        return pa.list_(inner_type), st.lists(st.one_of(st.none(), inner_values), max_size=4)
    other_type, other_values = draw(data_types(depth - 1))
    struct = pa.struct([("a", inner_type), ("b", other_type)])
    return struct, st.fixed_dictionaries(
        {"a": st.one_of(st.none(), inner_values), "b": st.one_of(st.none(), other_values)}
    )


_NAMES = st.text(st.characters(codec="utf-8", exclude_categories=["Cs"]), min_size=1, max_size=12)


@st.composite
def record_batches(draw: st.DrawFn, min_rows: int = 1, max_rows: int = 30) -> pa.RecordBatch:
    names = draw(st.lists(_NAMES, min_size=1, max_size=6, unique=True))
    rows = draw(st.integers(min_rows, max_rows))
    arrays = []
    fields = []
    for name in names:
        dtype, values = draw(data_types())
        nullable = draw(st.booleans())
        cell = st.one_of(st.none(), values) if nullable else values
        column = draw(st.lists(cell, min_size=rows, max_size=rows))
        if dtype == pa.decimal128(12, 3):
            column = [None if v is None else decimal.Decimal(v) for v in column]
        arrays.append(pa.array(column, type=dtype))
        fields.append(pa.field(name, dtype, nullable=nullable))
    metadata = draw(
        st.one_of(
            st.none(),
            st.dictionaries(st.binary(min_size=1, max_size=8), st.binary(max_size=8), max_size=2),
        )
    )
    schema = pa.schema(fields, metadata=metadata)  # type: ignore[arg-type]
    return pa.RecordBatch.from_arrays(arrays, schema=schema)
