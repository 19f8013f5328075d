"""Records packed into blocks: the form records take once they are old enough to be left alone
(models/records/freezing.py), about a fifth of their size as rows with three indexes.

A block holds records of one endpoint's hour (all, or a share of its clients), ordered by
client entry, time, id, one column after another: every integer column narrowed to the fewest
bytes its values need, less its smallest value where that narrows it (NULL a value of its own;
a column reaching both ends of the 64-bit range names a value it does not hold as NULL), real
columns as 8-byte floats (NULL as NaN); the KEY columns compressed with zlib, the others after
them apart. `unpack` gives back the rows `pack` was given (tuples in the record table's column
order), in the block's order.
"""

import array
import bisect
import struct
import zlib
from operator import itemgetter

from peewee import DoubleField

from models.engine.sql import placeholders
from models.records import block_formats
from models.schema.tables import Record

HOUR_MS = 3_600_000
# The record table's columns, in the order a block's rows hold them; the real ones by position.
COLUMNS = tuple(field.column_name for field in Record._meta.sorted_fields)
REALS = frozenset(i for i, field in enumerate(Record._meta.sorted_fields) if isinstance(field, DoubleField))
assert COLUMNS[:2] == ("id", "ts"), "blocks pack id and ts first"

# The columns every read of frozen records needs (and the NOT NULL ones): compressed apart from
# the others, so that a read of a client's or a name's records inflates only them.
KEY = frozenset(COLUMNS.index(column) for column in ("id", "ts", "endpoint", "client", "question"))
# A block's rows are ordered by this column (the client entry), then ts and id: a read of a few
# clients finds their rows by bisection, not by testing each row.
SORTED = COLUMNS.index("client")

# The blob's first byte: how what follows is laid out.
_FORMAT = 3
_HEADER = struct.Struct("<BIII")  # format, records, columns, bytes of the key columns' stream
_SHIFT = struct.Struct("<q")
# array typecodes by size, signed; in a column, NULL is the smallest value of the chosen size.
_CODES = ("b", "h", "i", "q")
_WIDTHS = {code: array.array(code).itemsize for code in _CODES}
_REAL = b"d"
_ALL_NULL = b"n"
# 8-byte values as they are, NULL a value the column does not hold, written where the shift would
# be: for a column too wide for the smallest 8-byte value to be left to NULL (both ends of int64).
_WIDE = b"w"
_NAN = float("nan")
_NAN_BITS = struct.pack("d", _NAN)
_ALL_NULL_BYTE, _REAL_BYTE, _WIDE_BYTE = _ALL_NULL[0], _REAL[0], _WIDE[0]
_LOWEST, _HIGHEST = -(2**63), 2**63 - 1
# A column's first byte -> (array typecode, bytes a value, the NULL value: None where not fixed).
_KINDS = {ord(code): (code, _WIDTHS[code], -(2 ** (_WIDTHS[code] * 8 - 1))) for code in _CODES}
_KINDS[_REAL_BYTE] = ("d", 8, None)
_KINDS[_WIDE_BYTE] = ("q", 8, None)


def pack(rows: list[tuple], reals: frozenset[int] = REALS) -> bytes:
    """`rows` (record rows, id then ts first; SORTED never NULL) as one blob, ordered by
    (SORTED, ts, id); the columns at the indexes `reals` hold floats, the others integers. Two
    zlib streams: the KEY columns, then the others."""
    rows = sorted(rows, key=itemgetter(SORTED, 1, 0))
    columns = list(zip(*rows, strict=True))
    streams = ([], [])
    for index, column in enumerate(columns):
        parts = streams[index not in KEY]
        if index in reals:
            parts.append(_REAL + array.array("d", [_NAN if v is None else v for v in column]).tobytes())
            continue
        parts.append(_integers(column))
    keys = zlib.compress(b"".join(streams[0]), 6)
    return _HEADER.pack(_FORMAT, len(rows), len(columns), len(keys)) + keys + zlib.compress(b"".join(streams[1]), 6)


def unpack(
    blob: bytes, columns_now: int = len(COLUMNS), wanted: dict[int, set] | None = None, only=None
) -> list[tuple]:
    """The rows `pack` was given, with NULL for the columns added since (of `columns_now`).
    `wanted`: {column index: values}: only the rows holding one of the values in each such
    column (a read after a few clients or names builds only their rows: most of the work).
    `only`: the column indexes to return (in their order; None: all); when they are all KEY
    columns, the other stream is not inflated. Rows come in the block's order: by (SORTED,
    ts, id); a client's rows are found by bisection and read as slices."""
    returned = range(columns_now) if only is None else sorted(only)
    block = Inflated(blob, {*returned, *(wanted or ())})
    ranges, rows = None, None  # the rows kept: ranges (low, high) of them, or their positions
    if wanted and SORTED in wanted and block.spans.get(SORTED) is not None:
        ranges = block.ranges(wanted[SORTED])
        if not ranges:
            return []
    for index, values in (wanted or {}).items():
        if index == SORTED and ranges is not None:
            continue
        column = block.column(index)
        if rows is None:
            rows = range(block.count) if ranges is None else [i for r in ranges for i in range(*r)]
        rows, ranges = [i for i in rows if column[i] in values], None
        if not rows:
            return []
    return block.rows(returned, rows, ranges)


class Inflated:
    """A block's columns, inflated once (the other stream only when `needed`, column indexes,
    holds one of its columns; None: all): rows are built from it as they are wanted."""

    def __init__(self, blob: bytes, needed=None):
        if blob[0] != _FORMAT:  # before the header: an older format's is shorter
            raise block_formats.refusal(blob, _FORMAT)
        _, self.count, width, key_size = _HEADER.unpack_from(blob)
        view = memoryview(blob)
        self.spans = _spans(zlib.decompress(view[_HEADER.size : _HEADER.size + key_size]), sorted(KEY), self.count)
        if needed is None or any(index not in KEY and index < width for index in needed):
            rest = [index for index in range(width) if index not in KEY]
            self.spans.update(_spans(zlib.decompress(view[_HEADER.size + key_size :]), rest, self.count))

    def ranges(self, values) -> list[tuple[int, int]]:
        """The ranges of positions of the rows whose SORTED column holds one of `values`."""
        column = self.column(SORTED)
        found = []
        for value in sorted(value for value in values if value is not None):
            low = bisect.bisect_left(column, value)
            high = bisect.bisect_right(column, value, low)
            if high > low:
                found.append((low, high))
        return found

    def values(self, index: int, ranges: list) -> list:
        """The values of the column at `index` in the ranges of positions `ranges`."""
        span = self.spans.get(index)
        return [None] * sum(high - low for low, high in ranges) if span is None else _values(span, None, ranges)

    def column(self, index: int) -> list:
        """Every value of the column at `index` (NULL when the block has none)."""
        span = self.spans.get(index)
        return [None] * self.count if span is None else _values(span)

    def rows(self, returned, rows: list | None = None, ranges: list | None = None) -> list[tuple]:
        """The rows at the positions `rows`, or in the ranges of positions `ranges` (neither:
        all), of the columns `returned` (indexes, in order)."""
        if rows is not None:
            kept = len(rows)
        else:
            kept = self.count if ranges is None else sum(high - low for low, high in ranges)
        nulls = [None] * kept  # one list for every column all NULL (or packed before it was added)
        columns = [nulls if self.spans.get(i) is None else _values(self.spans[i], rows, ranges) for i in returned]
        return list(zip(*columns, strict=True))


def _spans(data: bytes, indexes: list[int], count: int) -> dict[int, tuple | None]:
    """Where each column of a stream (the columns `indexes`, in order) lies, from the widths
    alone: {index: (view, typecode, start, end, NULL value, shift) or None: all NULL}."""
    view, spans, offset = memoryview(data), {}, 0
    for index in indexes:
        kind = data[offset]
        if kind == _ALL_NULL_BYTE:
            spans[index] = None
            offset += 1
            continue
        code, size, null = _KINDS[kind]
        shift = 0 if kind == _REAL_BYTE else _SHIFT.unpack_from(data, offset + 1)[0]
        if kind == _WIDE_BYTE:  # its 8 bytes name the NULL value; the values are as they are
            null, shift = shift, 0
        start = offset + (1 if kind == _REAL_BYTE else 9)
        offset = start + size * count
        spans[index] = (view, code, start, offset, null, shift)
    return spans


def _values(span: tuple, rows: list | None = None, ranges: list | None = None) -> list:
    """The values of a column (its span as `_spans` gives it), of the positions `rows` or the
    ranges of positions `ranges` (neither: all), read in place: only the values picked are
    made Python objects."""
    view, code, start, end, null, shift = span
    stored = view[start:end].cast(code)
    if ranges is not None:  # slices, at C speed: a client's rows are one range
        values = (
            stored[slice(*ranges[0])].tolist()
            if len(ranges) == 1
            else [v for r in ranges for v in stored[slice(*r)].tolist()]
        )
    elif rows is not None:
        values = [stored[i] for i in rows]
    else:
        values = stored.tolist()
    if code == "d":
        return [None if v != v else v for v in values] if _NAN_BITS in stored.tobytes() else values
    if null in values:
        return [None if v == null else v + shift for v in values]
    return [v + shift for v in values] if shift else values


def _integers(values) -> bytes:
    """A column of integers (or NULLs) in the fewest bytes that hold them: its typecode, the
    amount taken off every value (0 when they fit as they are: read back at C speed), then the
    values less it, NULL the smallest value of the type; `_ALL_NULL` alone when all are NULL;
    `_WIDE` when no shift leaves the smallest 8-byte value to NULL."""
    known = [value for value in values if value is not None]
    if not known:
        return _ALL_NULL
    low, high = min(known), max(known)
    for code in _CODES:
        top = 2 ** (_WIDTHS[code] * 8 - 1) - 1
        if -top <= low and high <= top:  # as they are
            shift = 0
            break
        if high - low < 2 * top:  # less the smallest, shifted to the type's smallest but one
            shift = min(low + top, _HIGHEST)  # any shift from high - top holds them: 8 bytes hold this one
            break
    else:  # from -2**63 to 2**63 - 2 or more: NULL a value it lacks, among the len + 1 lowest
        taken = set(known)
        null = next(value for value in range(_LOWEST, _LOWEST + len(taken) + 1) if value not in taken)
        stored = [null if value is None else value for value in values]
        return _WIDE + null.to_bytes(8, "little", signed=True) + array.array("q", stored).tobytes()
    null = -(2 ** (_WIDTHS[code] * 8 - 1))
    stored = [null if value is None else value - shift for value in values]
    return code.encode() + shift.to_bytes(8, "little", signed=True) + array.array(code, stored).tobytes()


def block_condition(endpoint_ids: list | None, start_ms: int | None, end_ms: int | None) -> tuple[str, list]:
    """SQL on record_block: the blocks that may hold records of `endpoint_ids` (None: all) with
    ts in [start_ms, end_ms] (None: unbounded)."""
    parts, params = [], []
    if endpoint_ids is not None:
        parts.append(f"endpoint IN ({placeholders(len(endpoint_ids))})" if endpoint_ids else "0 = 1")
        params += list(endpoint_ids)
    # The hours bound a range of the indexes; the times narrow it to the blocks' own bounds.
    if start_ms is not None:
        parts.append("hour >= ? AND last_ts >= ?")
        params += [start_ms // HOUR_MS, start_ms]
    if end_ms is not None:
        parts.append("hour <= ? AND first_ts <= ?")
        params += [end_ms // HOUR_MS, end_ms]
    return " AND ".join(parts) or "1 = 1", params


def bloom(values) -> bytes:
    """A Bloom filter of the integers `values` (None left out): about 10 bits a value and 3
    probes, about 1 % false positives. A read looking for a few clients unpacks only
    the blocks whose filters may hold one (see models/records/thawing.py)."""
    distinct = {value for value in values if value is not None}
    size = max(8, (10 * len(distinct) + 7) // 8)
    bits, filter_ = size * 8, bytearray(size)
    # Bit p in byte p // 8, least significant first: the bytes of the little-endian integer that
    # filters were first written as (an int grown by |= copies itself at each probe: quadratic).
    for value in distinct:
        for probe in _probes(value, bits):
            filter_[probe >> 3] |= 1 << (probe & 7)
    return bytes(filter_)


def may_hold(filter_: bytes, values) -> bool:
    """Whether the block whose Bloom filter is `filter_` may hold one of `values`."""
    return Wanted(values).may_be_in(filter_)


class Wanted:
    """Values looked for in the filters of many blocks: their probes are worked out once per
    size of filter, then each filter costs a few byte lookups a value."""

    def __init__(self, values):
        self.values = list(values)
        self._by_size: dict[int, list] = {}

    def may_be_in(self, filter_: bytes) -> bool:
        probes = self._by_size.get(len(filter_))
        if probes is None:
            bits = len(filter_) * 8
            probes = [[(p >> 3, 1 << (p & 7)) for p in _probes(value, bits)] for value in self.values]
            self._by_size[len(filter_)] = probes
        for value in probes:  # loops, not any/all over generators: this runs per block
            for at, bit in value:
                if not filter_[at] & bit:
                    break
            else:
                return True
        return False


def _probes(value: int, bits: int) -> tuple[int, int, int]:
    mixed = (value * 0x9E3779B97F4A7C15) & 0xFFFFFFFFFFFFFFFF
    return mixed % bits, (mixed >> 21) % bits, (mixed >> 42) % bits
