"""What the records would weigh packed in blocks of columns instead of a row each with three
indexes: a measurement for the choice of a record store, not a store.

    python bench/run.py --keep --dir D ...        # leaves D/served.db
    python bench/record_blocks.py D/served.db [--hours 24] [--hours 1]

Each block holds one endpoint's records of one period (--hours; repeat it to compare), ordered
by time then id, one column after another: ids and times as differences from the previous
record's, every other column narrowed to the fewest bytes its values need (NULL a value of its
own), then compressed with zlib. The blocks are stored as rows of a table in a new SQLite file
(its pages, not the sum of the blobs, are what is reported), beside the database's own tables
but the record table and its indexes. Decoding is timed back to rows (the records as tuples),
all blocks one after another. Prints a markdown table.
"""

import argparse
import array
import itertools
import os
import sqlite3
import tempfile
import time
import zlib

# array typecodes by size, signed; NULL is the smallest value of the chosen size.
_CODES = ("b", "h", "i", "q")


def pack_column(values: list) -> bytes:
    """A column narrowed to the fewest bytes that hold its values and a NULL: its typecode
    first, then its offset from the smallest value, then the values."""
    known = [value for value in values if value is not None]
    low = min(known) if known else 0
    span = (max(known) - low) if known else 0
    for code in _CODES:
        size = array.array(code).itemsize
        if span < 2 ** (size * 8) - 1:
            break
    size = array.array(code).itemsize
    null = -(2 ** (size * 8 - 1))
    shifted = [null if value is None else value - low + null + 1 for value in values]
    return code.encode() + low.to_bytes(8, "little", signed=True) + array.array(code, shifted).tobytes()


def unpack_column(data: bytes, offset: int, count: int) -> tuple[list, int]:
    code = chr(data[offset])
    low = int.from_bytes(data[offset + 1 : offset + 9], "little", signed=True)
    size = array.array(code).itemsize
    null = -(2 ** (size * 8 - 1))
    column = array.array(code)
    end = offset + 9 + size * count
    column.frombytes(data[offset + 9 : end])
    return [None if value == null else value - null - 1 + low for value in column], end


def pack_block(rows: list, reals: set) -> bytes:
    """`rows` (tuples in the record table's column order, id and ts first) as one blob."""
    columns = list(zip(*rows, strict=True))
    parts = []
    for index, column in enumerate(columns):
        if index in (0, 1):  # id, ts: differences from the previous record's
            column = [column[0]] + [b - a for a, b in itertools.pairwise(column)]
        if index in reals:
            parts.append(b"d" + array.array("d", [float("nan") if v is None else v for v in column]).tobytes())
        else:
            parts.append(pack_column(list(column)))
    return zlib.compress(b"".join(parts), 6)


def unpack_block(blob: bytes, count: int, width: int, reals: set) -> list:
    data = zlib.decompress(blob)
    columns, offset = [], 0
    for index in range(width):
        if index in reals:
            column = array.array("d")
            end = offset + 1 + 8 * count
            column.frombytes(data[offset + 1 : end])
            columns.append([None if v != v else v for v in column])
            offset = end
            continue
        column, offset = unpack_column(data, offset, count)
        if index in (0, 1):
            column = list(itertools.accumulate(column))
        columns.append(column)
    return list(zip(*columns, strict=True))


def measure(database: str, hours: float) -> dict:
    source = sqlite3.connect(f"file:{database}?mode=ro", uri=True)
    names = [row[1] for row in source.execute("PRAGMA table_info(record)")]
    types = [row[2].upper() for row in source.execute("PRAGMA table_info(record)")]
    reals = {index for index, kind in enumerate(types) if kind in ("REAL", "DOUBLE", "FLOAT")}
    assert names[:2] == ["id", "ts"], names
    period = int(hours * 3_600_000)
    endpoint = names.index("endpoint")
    # Streamed, a block at a time: 10M records as tuples would not fit in memory.
    cursor = source.execute("SELECT * FROM record ORDER BY endpoint, ts, id")
    blocks, samples, records = [], [], 0
    for _, group in itertools.groupby(cursor, key=lambda row: (row[endpoint], row[1] // period)):
        group = list(group)
        blob = pack_block(group, reals)
        records += len(group)
        blocks.append(
            (
                group[0][endpoint],
                group[0][1],
                group[-1][1],
                min(r[0] for r in group),
                max(r[0] for r in group),
                len(group),
                blob,
            )
        )
        if len(blocks) % 50 == 1:
            samples.append((group, blob))
    with tempfile.TemporaryDirectory() as folder:
        path = os.path.join(folder, "blocks.db")
        target = sqlite3.connect(path)
        target.execute("PRAGMA page_size = 4096")
        target.execute(
            "CREATE TABLE record_block (id INTEGER PRIMARY KEY, endpoint INTEGER, first_ts INTEGER,"
            " last_ts INTEGER, first_id INTEGER, last_id INTEGER, n INTEGER, data BLOB)"
        )
        target.execute("CREATE INDEX record_block_endpoint_ts ON record_block (endpoint, first_ts)")
        target.executemany(
            "INSERT INTO record_block (endpoint, first_ts, last_ts, first_id, last_id, n, data)"
            " VALUES (?, ?, ?, ?, ?, ?, ?)",
            blocks,
        )
        target.commit()
        block_bytes = target.execute("SELECT SUM(pgsize) FROM dbstat").fetchone()[0]
    started = time.perf_counter()
    decoded = 0
    for *_, n, blob in blocks:
        decoded += len(unpack_block(blob, n, len(names), reals))
    seconds = time.perf_counter() - started
    for group, blob in samples:  # every 50th block comes back exactly
        assert unpack_block(blob, len(group), len(names), reals) == group
    sizes = dict(source.execute("SELECT name, SUM(pgsize) FROM dbstat GROUP BY name").fetchall())
    record_parts = {name for (name,) in source.execute("SELECT name FROM sqlite_master WHERE tbl_name = 'record'")}
    rest = sum(size for name, size in sizes.items() if name not in record_parts)
    return {
        "hours": hours,
        "records": records,
        "blocks": len(blocks),
        "row_bytes": sum(sizes.get(name, 0) for name in record_parts) / records,
        "block_bytes": block_bytes / records,
        "rest_bytes": rest / records,
        "decode_rate": decoded / seconds,
    }


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("database", help="a served database that bench/run.py --keep left")
    parser.add_argument("--hours", type=float, action="append", help="a block's period (default: 24 and 1)")
    args = parser.parse_args()
    print(
        "| block period | records a block | record table and indexes | blocks | the rest | "
        "whole database, rows / blocks | decoding, records a second |"
    )
    print("|---|---|---|---|---|---|---|")
    for hours in args.hours or [24, 1]:
        found = measure(args.database, hours)
        rows_total = found["row_bytes"] + found["rest_bytes"]
        blocks_total = found["block_bytes"] + found["rest_bytes"]
        print(
            f"| {hours:g} h | {found['records'] / found['blocks']:,.0f} | {found['row_bytes']:.1f} B"
            f" | {found['block_bytes']:.1f} B | {found['rest_bytes']:.1f} B | {rows_total:.0f} B / {blocks_total:.0f} B"
            f" | {found['decode_rate']:,.0f} |"
        )
    print(f"\n{found['records']:,} records in {args.database}; bytes are per record, as SQLite's pages hold them.")


if __name__ == "__main__":
    main()
