"""The shared filters of the log and the statistics: a plain value, and its SQL condition."""

import bisect
import json
from dataclasses import dataclass, field

import re2

from catalogue import CLIENT, ENDPOINT, FIELDS_BY_SQL, TERM
from models.engine.database import db, query
from models.engine.sql import placeholders
from models.records.domains import TABLE as DOMAINS

SEARCH_MODES = ("includes", "startsWith", "endsWith", "excludes", "apex", "regex")
# What one pattern may cost RE2 to compile (its automata); a pattern past it is refused.
PATTERN_MEMORY = 1 << 20
_TERM_SCAN_BATCH = 10_000
# Names a pattern may match for reads to look for them in the frozen blocks' filters.
_HINTED_NAMES = 1_000


def compile_pattern(text: str, *, lines: bool = False):
    """The question pattern `text` as RE2 runs it (linear time in the name, whatever the
    pattern); ValueError, saying why, for a pattern RE2 does not take or that costs too much.
    `lines`: to search a UTF-8 text of names, one per line, as _matching_terms does: \\A, ^, \\z
    and $ at each line's ends (see for_lines), and no newline matched (never_nl: a [^x], a \\s,
    a (?s). would match one, and a greedy match then run on to later lines). _matching_terms
    still checks a match that runs across lines against the name alone."""
    options = re2.Options()
    options.max_mem = PATTERN_MEMORY
    options.log_errors = False
    options.never_nl = lines
    try:
        return re2.compile(for_lines(text).encode() if lines else text, options)
    except re2.error as exc:
        reason = exc.args[0].decode("utf-8", "replace") if exc.args and isinstance(exc.args[0], bytes) else str(exc)
        if "too large" in reason:
            raise ValueError(
                f"a pattern too costly to run ({reason}: its automata would take over "
                f"{PATTERN_MEMORY >> 20} MiB; use fewer or smaller repetitions)"
            ) from None
        raise ValueError(f"not a pattern this service runs (RE2 syntax): {reason}") from None


def for_lines(text: str) -> str:
    """The pattern `text` for a text of names one a line: its anchors of the text's ends (\\A,
    \\z, and ^ and $, which in a name mean the same whatever the flags, as a name holds no
    newline: schemas.fields.normalize_domain) anchored at the line's ends instead. Escapes,
    \\Q...\\E and character classes are read past as they are."""
    out, i = [], 0
    while i < len(text):
        char = text[i]
        if char == "\\":
            following = text[i + 1 : i + 2]
            if following in _ANCHORS:
                out.append(_ANCHORS[following])
                end = i + 2
            elif following == "Q":  # literal up to \E
                end = text.find("\\E", i + 2)
                end = len(text) if end < 0 else end + 2
            elif following in "pPx" and text[i + 2 : i + 3] == "{":  # \p{^Greek}: its ^ negates
                end = text.find("}", i + 3)
                end = len(text) if end < 0 else end + 1
            else:
                end = i + 2
            if following not in _ANCHORS:
                out.append(text[i:end])
            i = end
        elif char == "[":
            end = _class_end(text, i)
            out.append(text[i:end])
            i = end
        else:
            out.append({"^": _ANCHORS["A"], "$": _ANCHORS["z"]}.get(char, char))
            i += 1
    return "".join(out)


_ANCHORS = {"A": "(?m:^)", "z": "(?m:$)"}


def _class_end(text: str, start: int) -> int:
    """The index past the character class opening at `start`."""
    i = start + 1
    if text[i : i + 1] == "^":
        i += 1
    if text[i : i + 1] == "]":  # first, a ] is one of the class
        i += 1
    while i < len(text):
        if text[i] == "\\":
            i += 2
        elif text.startswith("[:", i) and (end := text.find(":]", i + 2)) >= 0:
            i = end + 2
        elif text[i] == "]":
            return i + 1
        else:
            i += 1
    return len(text)


@dataclass(frozen=True)
class Filters:
    """Values per record column (ORed within a column, ANDed across), a question search, and
    the time window [start_ms, end_ms] (either end may be open). Values are what the column
    holds as text (names, strings), or the numbers of integer and boolean columns."""

    values: dict[str, list] = field(default_factory=dict)
    search: str | None = None
    search_mode: str = "includes"
    start_ms: int | None = None
    end_ms: int | None = None
    endpoint_limit: frozenset | None = None  # a key's endpoint limit: always ANDed


class Resolved:
    """Filters with every name looked up as its stored id, once: the statistics ask for
    several parts of a window, each with the same condition."""

    def __init__(self, filters: Filters, alias: str = "r", inline: bool = False):
        self.filters = filters
        self.alias = alias
        self.parts: list[str] = []
        self.params: list = []
        for sql, values in filters.values.items():
            if values:
                self._add(*_column_condition(FIELDS_BY_SQL[sql], values, alias, inline))
        if filters.endpoint_limit is not None:
            self._add(*_column_condition(FIELDS_BY_SQL["endpoint"], sorted(filters.endpoint_limit), alias, inline))
        # Every search mode is a pattern over the name (name_pattern), matched in Python (RE2),
        # the same way on both engines: against the stored names up front, or, for a live stream
        # (`inline`), against each new record's name.
        self.pattern = self._source = None
        self.negated = False
        self._hinted = ...
        if filters.search:
            self._source, self.negated = name_pattern(filters.search, filters.search_mode)
            self.pattern = compile_pattern(self._source)
            if not inline:
                matched = _matching_terms(self._source)
                # The names left, if few (the hint's too), where NOT IN would parse many; a
                # negated pattern matching few leaves many names (the count is not worth it).
                rest = None
                if self.negated and len(matched) > _HINTED_NAMES:
                    self._hinted = rest = _names_except(matched)
                self._add(*_pattern_condition(matched, self.negated, alias, rest))
        self._endpoint_ids = ...
        self._stored: dict[str, list] = {}

    def endpoints_alone(self) -> bool:
        """Whether the filters, besides the window, name endpoints at most."""
        return self.naming_only("endpoint")

    def naming_only(self, *columns: str) -> bool:
        """Whether the filters, besides the window, name values of these columns at most."""
        return not self.filters.search and all(sql in columns for sql, values in self.filters.values.items() if values)

    def stored(self, sql: str) -> list:
        """The values of the filter on record column `sql` as that column stores them (ids of
        names; numbers as they are)."""
        if sql not in self._stored:
            column, values = FIELDS_BY_SQL[sql], self.filters.values[sql]
            self._stored[sql] = stored_ids(column, values) if column.storage in (TERM, ENDPOINT, CLIENT) else values
        return self._stored[sql]

    def _add(self, sql: str, params: list):
        self.parts.append(sql)
        self.params += params

    def where(self, start_ms=..., end_ms=...) -> tuple[str, list]:
        """(SQL condition, parameters) for the filters' window, or for [start_ms, end_ms]."""
        start_ms = self.filters.start_ms if start_ms is ... else start_ms
        end_ms = self.filters.end_ms if end_ms is ... else end_ms
        parts, params = [], []
        if start_ms is not None:
            parts.append(f"{self.alias}.ts >= ?")
            params.append(start_ms)
        if end_ms is not None:
            parts.append(f"{self.alias}.ts <= ?")
            params.append(end_ms)
        return " AND ".join(parts + self.parts) or "1 = 1", params + self.params

    def hint(self) -> dict | None:
        """{"client" or "question": stored ids} one of which every record these filters select
        holds, for the columns they name a few values of (None: no such column): which frozen
        blocks may hold such records (models/records/thawing.py)."""
        found = {sql: self.stored(sql) for sql in ("client", "question") if self.filters.values.get(sql)}
        if "question" not in found and self._source is not None:
            if self._hinted is ...:
                matched = _matching_terms(self._source)  # remembered: no second search
                if self.negated:
                    self._hinted = _names_except(matched)
                else:
                    self._hinted = matched if len(matched) <= _HINTED_NAMES else None
            if self._hinted is not None:
                found["question"] = self._hinted
        return found or None

    def matches(self, name: str) -> bool:
        """Whether a record of question `name` passes the search (for a live stream's records)."""
        return self.pattern is None or (self.pattern.search(name) is not None) != self.negated

    def endpoint_ids(self) -> list[int] | None:
        """The ids of the endpoints these filters allow (None: all)."""
        if self._endpoint_ids is ...:
            allowed = allowed_endpoints(self.filters)
            self._endpoint_ids = None if allowed is None else sorted(stored_ids(FIELDS_BY_SQL["endpoint"], allowed))
        return self._endpoint_ids


def allowed_endpoints(filters: Filters) -> list[str] | None:
    """The names of the endpoints the filters allow: those they name, within the key's limit
    (None: every one)."""
    allowed = None
    for names in (filters.values.get("endpoint") or None, filters.endpoint_limit):
        if names is not None:
            allowed = set(names) if allowed is None else allowed & set(names)
    return None if allowed is None else sorted(allowed)


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


def column_sql(field, alias="r") -> str:
    """SQL of a record's stored value of `field`: its column, or what the store keeps for the
    value of a derived field's source column."""
    if field.derived_from:
        return f"(SELECT d.domain FROM {DOMAINS} d WHERE d.term = {alias}.{field.derived_from})"
    return f"{alias}.{field.sql}"


def derived_in(source: str, ids_sql: str) -> str:
    """SQL: the source value `source` (e.g. a question's term id) is one whose derived value
    (its registrable domain's term id) is among `ids_sql` (a list or a SELECT)."""
    return f"{source} IN (SELECT term FROM {DOMAINS} WHERE domain IN ({ids_sql}))"


def _column_condition(column, values, alias, inline=False) -> tuple[str, list]:
    target = f"{alias}.{column.sql}"
    if column.storage not in (TERM, ENDPOINT, CLIENT):
        return f"{target} IN ({placeholders(len(values))})", list(values)
    if column.derived_from:  # on the source column: its values are what the indexes know
        source = f"{alias}.{column.derived_from}"
        if inline:
            sql, params = lookup(column, values)
            return derived_in(source, sql), params
        ids = stored_ids(column, values)
        return (derived_in(source, placeholders(len(ids))), ids) if ids else ("0 = 1", [])
    if inline:
        sql, params = lookup(column, values)
        return f"{target} IN ({sql})", params
    ids = stored_ids(column, values)
    # Ids resolved up front let the planner use the record indexes with plain constants.
    if not ids:
        return "0 = 1", []
    return f"{target} IN ({placeholders(len(ids))})", ids


def name_pattern(text: str, mode: str) -> tuple[str, bool]:
    """(RE2 pattern over one name, negated) of the question search `text` in `mode`: `regex` is
    the pattern itself; the others keep the meaning they had as SQL LIKE over the stored names
    (text lowered by Python, compared ignoring the case of ASCII letters only, wildcards
    literal: Engine.like_ascii_nocase), and `apex` the name itself (exactly, as the term index
    found it) or a name ending in "." and it. `excludes` is `includes` negated: the names not
    matching its pattern."""
    if mode == "regex":
        return text, False
    text = text.lower()
    literal = "".join(_nocase(char) for char in text)
    if mode == "apex":
        return rf"\A{_escaped(text)}\z|\.{literal}\z", False
    return {"startsWith": rf"\A{literal}", "endsWith": rf"{literal}\z"}.get(mode, literal), mode == "excludes"


_SPECIAL = frozenset("\\.+*?()|[]{}^$")


def _escaped(text: str) -> str:
    """`text` as an RE2 pattern matching it literally, case and all."""
    return "".join("\\" + char if char in _SPECIAL else char for char in text)


def _nocase(char: str) -> str:
    """One character of a LIKE pattern that ignores ASCII case, as RE2 reads it: (?i) would
    fold non-ASCII letters too (and "k" with the Kelvin sign)."""
    if "a" <= char <= "z" or "A" <= char <= "Z":
        return f"[{char.lower()}{char.upper()}]"
    return _escaped(char)


def _pattern_condition(matched: list[int], negated: bool, alias: str, rest: list | None) -> tuple[str, list]:
    """The records whose question is among the term ids `matched`, a pattern's (not among them,
    if `negated`). `rest`: the names not matched, when few (_names_except): the same records,
    which the index on names finds, where NOT IN tested every record of the window against
    every name matched."""
    if negated and rest is not None:
        matched, negated = rest, False
    if not matched:
        return ("1 = 1" if negated else "0 = 1"), []
    rows = db.obj.dialect.json_array_rows("?", "m")
    negation = "NOT " if negated else ""
    return f"{alias}.question {negation}IN (SELECT CAST(m.value AS BIGINT) FROM {rows})", [json.dumps(matched)]


def _names_except(matched: list[int]) -> list[int] | None:
    """The question names (every one has its row in term_domain) not among the term ids
    `matched`, when there are at most _HINTED_NAMES of them (None: more)."""
    total = query(f"SELECT COUNT(*) FROM {DOMAINS}").fetchone()[0]
    if total - len(matched) > _HINTED_NAMES:  # `matched` may hold strings that are no name
        return None
    excluded = set(matched)
    rest = [term for (term,) in query(f"SELECT term FROM {DOMAINS}") if term not in excluded]
    return rest if len(rest) <= _HINTED_NAMES else None


# Per pattern, the terms found to match it and the highest term id searched (in the
# database's own cache: `pattern_matches`): a term's string never changes and its id is never
# reused, so a pattern asked again (the next page, a refresh) searches only the terms stored
# since (an id of a term deleted since matches no record any more).
# Bounded in patterns and in ids held.
_MATCHED_PATTERNS = 64
_MATCHED_IDS = 2_000_000


def _matching_terms(text: str) -> list[int]:
    """Ids of the stored strings matching the pattern `text`, each as a whole (as the live
    stream matches a record's name). They are read in batches, each searched as one text of
    lines by RE2 (in C: a call per name cost several times more), from one match to the next
    line; a match that runs past its line's end (across the newline) is checked against that
    name alone, which decides. A name with a match of its own is never skipped: the search finds
    the leftmost match, so one starting at or before it, on its line or an earlier one."""
    cache = db.obj.pattern_matches
    matched, searched = cache.get(text, ((), 0))
    pattern = compile_pattern(text, lines=True)
    alone = None  # the pattern for one name, compiled once a match runs across lines
    found = list(matched)
    # Answer sets (JSON arrays, most of the strings' bytes) are never a name; a name may begin
    # with "[" too (the service takes any name without spaces or control characters).
    cursor = query(
        "SELECT id, value FROM term WHERE id > ? AND (substr(value, 1, 1) <> '['"
        f" OR EXISTS (SELECT 1 FROM {DOMAINS} d WHERE d.term = term.id)) ORDER BY id",
        [searched],
    )
    while rows := cursor.fetchmany(_TERM_SCAN_BATCH):
        searched = rows[-1][0]
        # Bytes: RE2 reads UTF-8, and a str would be encoded again at every search.
        encoded = [value.encode() for _, value in rows]
        starts, at = [], 0
        for value in encoded:
            starts.append(at)
            at += len(value) + 1
        names = b"\n".join(encoded)
        position = 0
        while (hit := pattern.search(names, position)) is not None:
            line = bisect.bisect_right(starts, hit.start()) - 1
            # (Strings other than names may hold a newline; a record's question never does.)
            if hit.end() <= starts[line] + len(encoded[line]):
                found.append(rows[line][0])
            else:
                alone = alone or compile_pattern(text)
                if alone.search(rows[line][1]):
                    found.append(rows[line][0])
            if line + 1 == len(starts):
                break
            position = starts[line + 1]
    if len(cache) >= _MATCHED_PATTERNS or sum(len(ids) for ids, _ in cache.values()) > _MATCHED_IDS:
        cache.clear()  # starting over is cheaper than tracking an order to evict in
    cache[text] = (found, searched)
    return found
