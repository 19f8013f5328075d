"""The block codec (models/records/blocks.py) against any rows the record table can hold (hypothesis):
a block gives back exactly its rows, whole or the ones wanted, and its Bloom filters never
miss a value they were made of."""

import functools
import operator

from hypothesis import given, settings
from hypothesis import strategies as st
from peewee import DoubleField

from catalogue import BOOLEAN, FIELDS_BY_SQL
from models.records import blocks
from models.schema.tables import Record

LOWEST, HIGHEST = -(2**63), 2**63 - 1
INT64 = st.integers(LOWEST, HIGHEST)
# How far apart a column's values may lie: every width and shift the codec chooses between,
# up to both ends of the 64-bit range.
SPANS = st.sampled_from([0, 1, 2**7, 2**8, 2**15 + 1, 2**16, 2**31, 2**32 + 5, 2**63, 2**64 - 2, 2**64 - 1])
FIELDS = Record._meta.sorted_fields
ROWS = 10
SETTINGS = settings(max_examples=60, deadline=None)


@st.composite
def integer_column(draw, count: int, nullable: bool):
    low = draw(INT64)
    high = min(HIGHEST, low + draw(SPANS))
    values = st.integers(low, high)
    column = draw(st.lists(values | st.none() if nullable else values, min_size=count, max_size=count))
    if draw(st.booleans()):  # both ends of the range, where the codec ran out of room before
        column[: min(count, 2)] = [LOWEST, HIGHEST][: min(count, 2)]
    return column


@st.composite
def record_rows(draw):
    """Rows of the record table's columns, each column of its kind: integers over the whole
    int64 range (id unique, as the table keeps it), 0 or 1 for booleans, floats (NaN is how a
    block writes NULL, so no record holds it) and NULL wherever the column allows it."""
    count = draw(st.integers(1, ROWS))
    columns = []
    for field in FIELDS:
        if isinstance(field, DoubleField):
            column = draw(st.lists(st.floats(allow_nan=False) | st.none(), min_size=count, max_size=count))
        elif getattr(FIELDS_BY_SQL.get(field.column_name), "storage", None) == BOOLEAN:
            column = draw(st.lists(st.sampled_from([0, 1, None]), min_size=count, max_size=count))
        elif field.column_name == "id":
            column = draw(st.lists(INT64, min_size=count, max_size=count, unique=True))
        else:
            column = draw(integer_column(count, field.null))
        columns.append(column)
    return list(zip(*columns, strict=True))


def in_block_order(rows):
    return sorted(rows, key=lambda row: (row[blocks.SORTED], row[1], row[0]))


def same(found, expected):
    """Equal, and with the same types and signs (-0.0 is not 0.0 here)."""
    assert found == expected
    assert [repr(v) for row in found for v in row] == [repr(v) for row in expected for v in row]


@SETTINGS
@given(record_rows())
def test_a_block_gives_back_exactly_the_rows_it_was_given(rows):
    same(blocks.unpack(blocks.pack(rows)), in_block_order(rows))


@SETTINGS
@given(record_rows(), st.data())
def test_a_block_gives_back_exactly_the_rows_holding_the_values_wanted(rows, data):
    packed = blocks.pack(rows)
    ordered = in_block_order(rows)
    column = data.draw(st.sampled_from([i for i in range(len(FIELDS)) if i not in blocks.REALS]), "column")
    held = sorted({row[column] for row in rows}, key=repr)
    wanted = {
        blocks.SORTED: set(data.draw(st.lists(st.sampled_from(sorted({row[blocks.SORTED] for row in rows}))))),
        column: {*data.draw(st.lists(st.sampled_from(held))), *data.draw(st.lists(INT64, max_size=2))},
    }
    only = sorted(data.draw(st.sets(st.integers(0, len(FIELDS) - 1), min_size=1)))
    expected = [tuple(row[i] for i in only) for row in ordered if all(row[i] in v for i, v in wanted.items())]
    same(blocks.unpack(packed, wanted=wanted, only=only), expected)


@settings(max_examples=200, deadline=None)
@given(st.lists(INT64 | st.none(), max_size=300))
def test_a_filter_holds_every_value_it_was_made_of(values):
    made = blocks.bloom(values)
    known = [value for value in values if value is not None]
    assert all(blocks.may_hold(made, [value]) for value in known)
    if known:
        assert blocks.Wanted([known[-1], LOWEST, HIGHEST]).may_be_in(made)
    # The bits are those of its values' probes, least significant first: the layout on disk.
    bits = len(made) * 8
    probes = {probe for value in known for probe in blocks._probes(value, bits)}
    assert int.from_bytes(made, "little") == functools.reduce(operator.or_, (1 << p for p in probes), 0)
