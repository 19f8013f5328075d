"""The shared filters of the Activity Log and Statistics operations, as one SQL condition."""

from dataclasses import dataclass, field

from .columns import CLIENT, COLUMNS_BY_NAME, ENDPOINT, INTEGER, TERM
from .database import db
from .utils import placeholders

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


# How the id of a stored string is found, by the column's storage.
_LOOKUP = {
    ENDPOINT: "SELECT id FROM endpoint WHERE name",
    CLIENT: "SELECT id FROM client WHERE client_id",
    TERM: "SELECT id FROM term WHERE value",
}


def stored_ids(column, values: list) -> list:
    """The ids under which the strings `values` of `column` are stored (absent ones: none)."""
    if not values:
        return []
    sql = f"{_LOOKUP[column.storage]} IN ({placeholders(len(values))})"
    return [row[0] for row in db.execute_sql(sql, list(values))]


def _column_condition(column, values, alias, inline=False) -> tuple[str, list]:
    target = f"{alias}.{column.sql}"
    if column.storage == INTEGER:
        return f"{target} IN ({placeholders(len(values))})", list(values)
    if inline:
        return f"{target} IN ({_LOOKUP[column.storage]} IN ({placeholders(len(values))}))", list(values)
    ids = stored_ids(column, values)
    # Ids resolved up front let the planner use the record indexes with plain constants.
    if not ids:
        return "0 = 1", []
    return f"{target} IN ({placeholders(len(ids))})", ids


def _like_escape(text: str) -> str:
    return text.replace("\\", "\\\\").replace("%", "\\%").replace("_", "\\_")


def _search_condition(text: str, mode: str, alias: str) -> tuple[str, list]:
    pattern = _like_escape(text)
    if mode == "apex":
        names = "SELECT id FROM term WHERE value = ? OR value LIKE ? ESCAPE '\\'"
        return f"{alias}.question IN ({names})", [text, "%." + pattern]
    like = {
        "includes": f"%{pattern}%",
        "excludes": f"%{pattern}%",
        "startsWith": f"{pattern}%",
        "endsWith": f"%{pattern}",
    }[mode]
    names = "SELECT id FROM term WHERE value LIKE ? ESCAPE '\\'"
    negate = "NOT " if mode == "excludes" else ""
    return f"{alias}.question {negate}IN ({names})", [like]
