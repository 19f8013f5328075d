"""Records packed into blocks (models/records/blocks.py): exactly the rows they were given back, in the
block's order (client, ts, id)."""

import hashlib
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


def test_a_column_spanning_the_whole_int64_range_gives_back_its_values():
    lowest, highest = -(2**63), 2**63 - 1
    for extremes in ([lowest, highest], [lowest, highest - 1], [lowest, lowest + 1, highest - 1, highest]):
        for nulls in ([], [None], [None, None]):
            column = [*extremes, *nulls, 0, -1]
            rows = in_block_order([(i, 1_700_000_000_000, value, 1, 7, None) for i, value in enumerate(column)])
            back = blocks.unpack(blocks.pack(rows, REALS), 6)
            assert back == rows, (extremes, nulls)
            assert blocks.unpack(blocks.pack(rows, REALS), 6, {2: {lowest, None}}) == [
                row for row in rows if row[2] in (lowest, None)
            ]


def test_a_narrow_column_at_the_top_of_the_int64_range_gives_back_its_values():
    highest = 2**63 - 1
    for column in ([highest], [highest - 1, None], [highest - 200, highest], [highest - 40_000, highest - 3, None]):
        rows = in_block_order([(i, 1_700_000_000_000, value, 1, 7, None) for i, value in enumerate(column)])
        assert blocks.unpack(blocks.pack(rows, REALS), 6) == rows, column


# A block and a filter as the codec wrote them before it took the whole int64 range (block
# format 3): every integer kind (b, h, i, q; as they are and less their smallest), all NULL,
# reals with NULL and -0.0. Blocks on disk must read the same, and filters hold the same bits.
WRITTEN = bytes.fromhex(
    "03050000000900000053000000789c4b6280025e6e1e7ebe8cffcf9f9eef66646010ec636c106a606e606a2864"
    "40050e50bae13f2aa867848ac33540051898d0686664e3808a52602642a807f610fa473d8c9e53cad061f3c4bc"
    "0e0089ca21e4789ccbfcffff7f3d0310140a323670303034e832323430328031435e06031448fc616878c1cc0a"
    "6425c184402a1801c7610adf"
)
WRITTEN_ROWS = [
    (11, 1_700_000_000_000, None, 2, 7, 0.5, None, None, 1),
    (12, 1_700_000_000_017, -1, 2, 300, None, None, 1000, 0),
    (13, 1_700_000_003_600, 2**62, 1, 70_000, -0.0, None, -1000, None),
    (14, 1_700_000_000_001, -(2**63) + 1, 2**40, 2**31, 1e300, None, 0, 1),
    (15, 1_700_000_000_002, 2**63 - 1, 3, 0, None, None, 5, 0),
]
WRITTEN_FILTER = bytes.fromhex(
    "0410200000222d342020212418000000020410808585064d82820200224203019791f1c8e86a6030703819180d2e86050d275b4901"
)


def test_blocks_and_filters_written_before_read_and_are_written_the_same():
    assert blocks.unpack(WRITTEN, 9) == in_block_order(WRITTEN_ROWS)
    assert blocks.pack(WRITTEN_ROWS, REALS) == WRITTEN
    assert blocks.bloom([*range(1, 41), None, 2**63 - 1, -(2**63)]) == WRITTEN_FILTER
    values = random.Random(1).sample(range(1, 2**40), 20_000)
    digest = hashlib.sha256(blocks.bloom(values)).hexdigest()
    assert digest == "00419bf46de01d190ce3d2cd6e55880431016e8639ae52e6150bf8d399dc2c5a"
