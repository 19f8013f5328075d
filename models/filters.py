"""The shared filters of the Activity Log and Statistics operations, as one SQL condition."""

from dataclasses import dataclass, field

from .columns import COLUMNS_BY_NAME, ENDPOINT, INTEGER, TERM
from .database import db, query
from .utils import like_escape, placeholders

SEARCH_MODES = ("includes", "startsWith", "endsWith", "excludes", "apex")


@dataclass
class Filters:
    """Values per column name (ORed within a column, ANDed across), a question search, and
    the time window [start_ms, end_ms] (either end may be open)."""

    values: dict[str, list] = field(default_factory=dict)
    search: str | None = None
    search_mode: str = "includes"
    start_ms: int | None = None
    end_ms: int | None = None
    endpoint_limit: frozenset | None = None  # a key's endpoint limit: always ANDed

    def endpoint_only(self) -> bool:
        """Whether nothing but endpoints (and the window) narrows these filters: then daily
        rollups, which are kept per endpoint, can answer for whole days."""
        return not self.search and all(name == "endpointId" for name, values in self.values.items() if values)

    def endpoint_ids(self) -> list[int] | None:
        """The ids of the endpoints these filters allow (None: all)."""
        allowed = None
        for names in (self.values.get("endpointId") or None, self.endpoint_limit):
            if names is not None:
                found = set(stored_ids(COLUMNS_BY_NAME["endpointId"], list(names)))
                allowed = found if allowed is None else allowed & found
        return None if allowed is None else sorted(allowed)

    def where(self, alias: str = "r", inline: bool = False) -> tuple[str, list]:
        """(SQL condition on the record table aliased `alias`, its parameters).

        Values are looked up as ids first, so the planner sees constants; `inline` puts the
        lookups inside the condition instead, so that the whole query reads one snapshot
        (the realtime stream needs that: see records_after)."""
        parts, params = [], []
        if self.start_ms is not None:
            parts.append(f"{alias}.ts >= ?")
            params.append(self.start_ms)
        if self.end_ms is not None:
            parts.append(f"{alias}.ts <= ?")
            params.append(self.end_ms)
        for name, values in self.values.items():
            if values:
                sql, args = _column_condition(COLUMNS_BY_NAME[name], values, alias, inline)
                parts.append(sql)
                params += args
        if self.endpoint_limit is not None:
            sql, args = _column_condition(COLUMNS_BY_NAME["endpointId"], sorted(self.endpoint_limit), alias, inline)
            parts.append(sql)
            params += args
        if self.search:
            sql, args = _search_condition(self.search.lower(), self.search_mode, alias)
            parts.append(sql)
            params += args
        return " AND ".join(parts) or "1 = 1", params


def lookup(column, values: list) -> tuple[str, list]:
    """(SELECT of the ids under which the strings `values` of `column` are stored, params)."""
    if column.storage == TERM:
        condition, params = db.obj.dialect.term_in(values)
        return f"SELECT id FROM term WHERE {condition}", params
    table, name = ("endpoint", "name") if column.storage == ENDPOINT else ("client", "client_id")
    return f"SELECT id FROM {table} WHERE {name} IN ({placeholders(len(values))})", list(values)


def stored_ids(column, values: list) -> list:
    """The ids under which the strings `values` of `column` are stored (absent ones: none)."""
    if not values:
        return []
    return [row[0] for row in query(*lookup(column, values))]


def _column_condition(column, values, alias, inline=False) -> tuple[str, list]:
    target = f"{alias}.{column.sql}"
    if column.storage == INTEGER:
        return f"{target} IN ({placeholders(len(values))})", list(values)
    if inline:
        sql, params = lookup(column, values)
        return f"{target} IN ({sql})", params
    ids = stored_ids(column, values)
    # Ids resolved up front let the planner use the record indexes with plain constants.
    if not ids:
        return "0 = 1", []
    return f"{target} IN ({placeholders(len(ids))})", ids


def _search_condition(text: str, mode: str, alias: str) -> tuple[str, list]:
    pattern = like_escape(text)
    like = db.obj.dialect.like_ascii_nocase("value")
    if mode == "apex":
        exact, params = db.obj.dialect.term_in([text])
        return f"{alias}.question IN (SELECT id FROM term WHERE ({exact}) OR {like})", [*params, "%." + pattern]
    pattern = {
        "includes": f"%{pattern}%",
        "excludes": f"%{pattern}%",
        "startsWith": f"{pattern}%",
        "endsWith": f"%{pattern}",
    }[mode]
    negate = "NOT " if mode == "excludes" else ""
    return f"{alias}.question {negate}IN (SELECT id FROM term WHERE {like})", [pattern]
