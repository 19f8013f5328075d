"""Aggregates over the records, computed in SQL: counts, counts per group, time buckets."""

from dataclasses import replace

from . import rollups
from .columns import ENDPOINT, INTEGER, TERM, Column
from .database import query
from .filters import Filters, stored_ids
from .rollups import NULL_VALUE
from .terms import term_values
from .utils import chunks, placeholders


def count(filters: Filters) -> int:
    return sum(_grouped(filters).values())


def count_by(filters: Filters, column: Column) -> dict[str, int]:
    """Record counts per value of `column` ("" for unknown), for every value present."""
    return _merge(column, [(value, n) for (_, value), n in _grouped(filters, column=column).items()])


def top_values(counts: dict[str, int], limit: int, descending: bool = True) -> list[tuple[str, int]]:
    """(value, count) ordered by count (descending or ascending), ties by value ascending."""
    sign = -1 if descending else 1
    return sorted(counts.items(), key=lambda item: (sign * item[1], item[0]))[:limit]


def buckets(filters: Filters, interval_ms: int) -> dict[int, int]:
    """Record counts per time bucket (the bucket's start, a multiple of interval_ms)."""
    return {start: n for (start, _), n in _grouped(filters, interval_ms=interval_ms).items()}


def buckets_by(filters: Filters, interval_ms: int, column: Column, values: list[str]) -> dict[int, dict[str, int]]:
    """Counts per time bucket and value of `column`, for the given values only."""
    stored = _stored_values(column, values)
    if not stored:
        return {}
    grouped = _grouped(filters, interval_ms=interval_ms, column=column, only=stored)
    names = _names(column, [value for _, value in grouped])
    result: dict[int, dict[str, int]] = {}
    for (start, value), n in grouped.items():
        per_value = result.setdefault(start, {})
        name = names.get(value, "")
        per_value[name] = per_value.get(name, 0) + n
    return result


def _grouped(filters: Filters, interval_ms=None, column=None, only=None) -> dict[tuple, int]:
    """Record counts by (bucket start or None, stored value of `column` or None), `only` those
    stored values when given.

    The window is split into the whole periods the rollups can answer and the rest: whole days
    first, then whole hours of what is left at the edges (where a column has hourly rollups),
    then the records for the part hours left. Rollups answer only when the filters are on
    endpoints alone, and only with buckets made of whole periods."""
    counts: dict[tuple, int] = {}
    parts = [filters]
    for dim, period_ms in _usable_rollups(filters, interval_ms, column):
        rest = []
        for part in parts:
            first = -((-part.start_ms) // period_ms) if part.start_ms is not None else -(2**40)
            last = (part.end_ms + 1) // period_ms - 1 if part.end_ms is not None else 2**40
            if first > last:
                rest.append(part)
                continue
            _add(counts, _from_rollups(part, dim, period_ms, first, last, interval_ms, column, only))
            rest += [
                edge
                for edge in (
                    replace(part, end_ms=first * period_ms - 1) if part.start_ms is not None else None,
                    replace(part, start_ms=(last + 1) * period_ms) if part.end_ms is not None else None,
                )
                if edge is not None and edge.start_ms <= edge.end_ms
            ]
        parts = rest
    for part in parts:
        _add(counts, _from_records(part, interval_ms, column, only))
    return counts


def _usable_rollups(filters: Filters, interval_ms, column) -> list[tuple[int, int]]:
    """(dim, period) of the rollups that can answer, longest periods first."""
    if not filters.endpoint_only():
        return []
    return [
        (dim, period_ms)
        for dim, period_ms in rollups.levels(column.name if column else None)
        if not interval_ms or interval_ms % period_ms == 0
    ]


def _from_records(filters: Filters, interval_ms, column, only) -> list[tuple]:
    condition, params = filters.where()
    keys = [_bucket_sql(interval_ms) if interval_ms else "NULL", f"r.{column.sql}" if column else "NULL"]
    if only is not None:
        condition, params = _only(condition, params, f"r.{column.sql}", only)
    return query(
        f"SELECT {keys[0]}, {keys[1]}, COUNT(*) FROM record r WHERE {condition} GROUP BY 1, 2", params
    ).fetchall()


def _from_rollups(filters: Filters, dim, period_ms, first, last, interval_ms, column, only) -> list[tuple]:
    condition, params = "dim = ? AND period BETWEEN ? AND ?", [dim, first, last]
    endpoints = filters.endpoint_ids()
    if endpoints is not None:
        if not endpoints:
            return []
        condition += f" AND endpoint IN ({placeholders(len(endpoints))})"
        params += endpoints
    value = f"CASE WHEN value = {NULL_VALUE} THEN NULL ELSE value END"
    if only is not None:
        condition, params = _only(condition, params, value, only)
    if interval_ms:
        i, start = int(interval_ms), f"(period * {int(period_ms)})"
        bucket = f"({start} - ((({start}) % {i}) + {i}) % {i})"
    else:
        bucket = "NULL"
    return query(
        f"SELECT {bucket}, {value if column else 'NULL'}, CAST(SUM(n) AS BIGINT) FROM rollup"
        f" WHERE {condition} GROUP BY 1, 2",
        params,
    ).fetchall()


def _only(condition: str, params: list, target: str, only: list) -> tuple[str, list]:
    present = [v for v in only if v is not None]
    parts = [f"{target} IN ({placeholders(len(present))})"] if present else []
    if None in only:
        parts.append(f"{target} IS NULL")
    return f"{condition} AND ({' OR '.join(parts)})", params + present


def _add(counts: dict, rows):
    for bucket, value, n in rows:
        if n:
            counts[(bucket, value)] = counts.get((bucket, value), 0) + n


def _bucket_sql(interval_ms: int) -> str:
    # Floor to a multiple of the interval, also for times before 1970 (% truncates toward 0).
    i = int(interval_ms)
    return f"(r.ts - (((r.ts % {i}) + {i}) % {i}))"


def _merge(column: Column, rows) -> dict[str, int]:
    """Stored values -> API strings, summing values that map to the same string (a client id
    seen under several endpoints is one group)."""
    names = _names(column, [stored for stored, _ in rows])
    merged: dict[str, int] = {}
    for stored, n in rows:
        value = names.get(stored, "")
        merged[value] = merged.get(value, 0) + n
    return merged


def _names(column: Column, stored_values) -> dict:
    """API strings of stored values of `column` (unknown values are absent: they read "")."""
    present = [v for v in set(stored_values) if v is not None]
    if column.storage == INTEGER:
        return {v: str(v) for v in present}
    if column.storage == TERM:
        return term_values(present)
    table, name = ("endpoint", "name") if column.storage == ENDPOINT else ("client", "client_id")
    found = {}
    for part in chunks(present, 500):
        found.update(query(f"SELECT id, {name} FROM {table} WHERE id IN ({placeholders(len(part))})", part))
    return found


def _stored_values(column: Column, values: list[str]) -> list:
    """Stored values (ids or integers; None for "") that read as `values`."""
    stored = [None] if "" in values else []
    wanted = [v for v in values if v != ""]
    if not wanted:
        return stored
    if column.storage == INTEGER:
        return stored + [int(v) for v in wanted]
    return stored + stored_ids(column, wanted)


def availability(filters: Filters) -> tuple[int | None, int | None, int]:
    """(oldest timestamp, newest timestamp, record count) of the records the filters allow."""
    condition, params = filters.where()
    # MIN and MAX alone can each be answered from one end of an index; the count from rollups.
    oldest, newest = (
        query(f"SELECT {aggregate} FROM record r WHERE {condition}", params).fetchone()[0]
        for aggregate in ("MIN(r.ts)", "MAX(r.ts)")
    )
    return oldest, newest, count(filters)
