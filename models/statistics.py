"""Aggregates over the records, computed in SQL: counts, counts per group, time buckets."""

from .columns import CLIENT, ENDPOINT, INTEGER, TERM, Column
from .database import db
from .filters import Filters
from .terms import term_values
from .utils import chunks, placeholders


def count(filters: Filters) -> int:
    condition, params = filters.where()
    return db.execute_sql(f"SELECT COUNT(*) FROM record r WHERE {condition}", params).fetchone()[0]


def count_by(filters: Filters, column: Column) -> dict[str, int]:
    """Record counts per value of `column` ("" for unknown), for every value present."""
    condition, params = filters.where()
    rows = db.execute_sql(
        f"SELECT r.{column.sql}, COUNT(*) FROM record r WHERE {condition} GROUP BY r.{column.sql}", params
    ).fetchall()
    return _merge(column, rows)


def top_values(counts: dict[str, int], limit: int, descending: bool = True) -> list[tuple[str, int]]:
    """(value, count) ordered by count (descending or ascending), ties by value ascending."""
    sign = -1 if descending else 1
    return sorted(counts.items(), key=lambda item: (sign * item[1], item[0]))[:limit]


def buckets(filters: Filters, interval_ms: int) -> dict[int, int]:
    """Record counts per time bucket (the bucket's start, a multiple of interval_ms)."""
    condition, params = filters.where()
    bucket = _bucket_sql(interval_ms)
    rows = db.execute_sql(
        f"SELECT {bucket} AS bucket, COUNT(*) FROM record r WHERE {condition} GROUP BY bucket", params
    )
    return dict(rows)


def buckets_by(
    filters: Filters, interval_ms: int, column: Column, values: list[str]
) -> dict[int, dict[str, int]]:
    """Counts per time bucket and value of `column`, for the given values only."""
    stored = _stored_values(column, values)
    if not stored:
        return {}
    condition, params = filters.where()
    bucket = _bucket_sql(interval_ms)
    present = [v for v in stored if v is not None]
    parts = []
    if present:
        parts.append(f"r.{column.sql} IN ({placeholders(len(present))})")
    if None in stored:
        parts.append(f"r.{column.sql} IS NULL")
    rows = db.execute_sql(
        f"SELECT {bucket} AS bucket, r.{column.sql}, COUNT(*) FROM record r"
        f" WHERE {condition} AND ({' OR '.join(parts)}) GROUP BY bucket, r.{column.sql}",
        params + present,
    ).fetchall()
    result: dict[int, dict[str, int]] = {}
    names = _names(column, [row[1] for row in rows])
    for start, stored_value, n in rows:
        value = names.get(stored_value, "")
        per_value = result.setdefault(start, {})
        per_value[value] = per_value.get(value, 0) + n
    return result


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
        found.update(
            db.execute_sql(f"SELECT id, {name} FROM {table} WHERE id IN ({placeholders(len(part))})", part)
        )
    return found


def _stored_values(column: Column, values: list[str]) -> list:
    """Stored values (ids or integers; None for "") that read as `values`."""
    stored = [None] if "" in values else []
    wanted = [v for v in values if v != ""]
    if not wanted:
        return stored
    if column.storage == INTEGER:
        return stored + [int(v) for v in wanted]
    lookup = {
        TERM: "SELECT id FROM term WHERE value",
        ENDPOINT: "SELECT id FROM endpoint WHERE name",
        CLIENT: "SELECT id FROM client WHERE client_id",
    }[column.storage]
    return stored + [row[0] for row in db.execute_sql(f"{lookup} IN ({placeholders(len(wanted))})", wanted)]


def availability(filters: Filters) -> tuple[int | None, int | None, int]:
    """(oldest timestamp, newest timestamp, record count) of the records the filters allow."""
    condition, params = filters.where()
    # Separate statements: MIN and MAX alone can each be answered from one end of an index.
    oldest, newest, total = (
        db.execute_sql(f"SELECT {aggregate} FROM record r WHERE {condition}", params).fetchone()[0]
        for aggregate in ("MIN(r.ts)", "MAX(r.ts)", "COUNT(*)")
    )
    return oldest, newest, total
