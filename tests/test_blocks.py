"""Records packed into blocks (models/records/blocks.py): exactly the rows they were given back, in the
block's order (client, ts, id)."""

import random
import zlib

import pytest

from models.records import blocks

REALS = frozenset({5})


def rows_of(count, seed):
    pick = random.Random(seed)
    ids = pick.sample(range(1, 10**9), count)
    start = pick.randrange(0, 2**41)
    rows = []
    for i, ident in enumerate(ids):
        rows.append(
            (
                ident,
                start + i * pick.choice([0, 1, 17, 86_400_000]),
                pick.choice([None, 0, -1, 2**62, -(2**62), pick.randrange(-(2**63), 2**63)]),
                pick.choice([1, 2, 3, 2**40]),  # the client entry (blocks.SORTED): never NULL
                pick.randrange(0, 300),
                pick.choice([None, 0.0, -0.0, 0.1, 1e300, -3.5, float(pick.randrange(10**6))]),
            )
        )
    return rows


def in_block_order(rows):
    return sorted(rows, key=lambda row: (row[blocks.SORTED], row[1], row[0]))


def test_a_block_gives_back_exactly_the_rows_it_was_given():
    assert blocks.SORTED == 3
    for seed in range(200):
        rows = in_block_order(rows_of(random.Random(seed).randrange(1, 300), seed))
        back = blocks.unpack(blocks.pack(rows[::-1], REALS), 6)
        assert back == rows
        assert [repr(v) for row in back for v in row] == [repr(v) for row in rows for v in row], "types and signs"


def test_columns_of_one_value_and_of_nulls_only_pack_small():
    rows = [(7, 1_700_000_000_000, 7, 5, 0, None)] * 10_000
    packed = blocks.pack(rows, REALS)
    assert blocks.unpack(packed, 6) == rows
    assert len(packed) < 2_000


def test_a_filter_holds_every_value_it_was_made_of_and_few_others():
    pick = random.Random(7)
    values = pick.sample(range(1, 10**7), 500)
    made = blocks.bloom([*values, None])
    assert all(blocks.may_hold(made, [value]) for value in values)
    others = [value for value in range(10**7, 10**7 + 10_000)]
    assert sum(blocks.may_hold(made, [value]) for value in others) < 300, "about 1 % false positives"


def test_a_block_packed_before_a_column_was_added_reads_it_unknown():
    rows = in_block_order(rows_of(10, 1))
    assert blocks.unpack(blocks.pack(rows, REALS), 8) == [(*row, None, None) for row in rows]


def test_a_block_gives_back_only_the_rows_holding_the_values_wanted():
    for seed in range(100):
        rows = in_block_order(rows_of(random.Random(seed).randrange(1, 300), seed))
        packed = blocks.pack(rows, REALS)
        names = set(random.Random(seed).sample(range(300), 60))
        for wanted in ({3: {1, 3}, 4: names}, {4: names, 3: {2**40}}, {3: {2, 3, 7}}, {4: names}):
            expected = [row for row in rows if all(row[i] in values for i, values in wanted.items())]
            assert blocks.unpack(packed, 7, wanted) == [(*row, None) for row in expected]
        assert blocks.unpack(packed, 6, {3: {4}}) == []
        assert blocks.unpack(packed, 6, {2: {"no such value"}}) == []


def test_a_read_of_the_key_columns_alone_leaves_the_others_packed():
    rows = in_block_order(rows_of(200, 3))
    packed = blocks.pack(rows, REALS)
    key = sorted(blocks.KEY)
    assert key == [0, 1, 2, 3, 5]
    assert blocks.unpack(packed, 6, only={1, 3}) == [(row[1], row[3]) for row in rows]
    wanted = {3: {2}}
    expected = [(row[0], row[5]) for row in rows if row[3] == 2]
    assert blocks.unpack(packed, 7, wanted, only={0, 5}) == expected
    # The other columns' stream is not even inflated: spoiled, the key columns still read.
    _, _, _, key_size = blocks._HEADER.unpack_from(packed)
    spoiled = packed[: blocks._HEADER.size + key_size] + b"\x00" * 40
    assert blocks.unpack(spoiled, 6, only=key) == [tuple(row[i] for i in key) for row in rows]
    with pytest.raises(zlib.error):
        blocks.unpack(spoiled, 6, only={0, 4})
