"""Deleting records from ClickHouse, as models.clients.deletion does in the SQL store: the
endpoints' lost marks raised in the SQL database, the records gone by a lightweight DELETE, and
what is kept beside them (last activity, names first seen) made again for what was touched
(docs/clickhouse.md "Deletions").

Two writers' turns, as ClickHouse's DELETE commits by itself, outside the SQL database's
transaction: the lost marks are committed first (raised to records that are still there, they
change no last activity), then the records go; a deletion cut short between the two leaves the
marks raised and the records in place, and run again deletes them. The records chosen are those
numbered up to the counter when the first turn began: one stored in between is not the
deletion's."""

import dataclasses
import hashlib
import json

from models.clickhouse import counts, derived, numbers, tables
from models.clickhouse.dims import ANONYMOUS, COUNTED, DAY_MS, WITH_RECORDS, day_text
from models.clients.clients import client_entries
from models.clients.deletion import raise_lost_marks
from models.engine.database import query, write_transaction
from models.engine.sql import chunks
from models.schema import settings
from models.schema.endpoints import endpoint_ids

# {deletion's key: the highest record number it takes} of the deletions begun and not finished.
BEGUN = "clickhouse_deletions_begun"


def begun() -> dict:
    """BEGUN's deletions: those between their two turns (or cut short there)."""
    return json.loads(settings.read(BEGUN) or "{}")


def delete_records(
    connection,
    endpoints=None,
    client_ids=None,
    end_ms=None,
    batch_size=None,
    endpoint_limit=None,
    after_batch=None,
    expire=False,
):
    """Delete the records of the selected clients (everyone's when neither filter is given) up
    to `end_ms` (inclusive; None: all) and raise their endpoints' lost marks to match; how many.
    Their counts leave the statistics, and what the selection still has there past the records'
    horizon (as models.clients.deletion.delete_records); records that `expire` leave the
    statistics as they are. `after_batch(deleted)` runs in the transaction that ends the
    deletion. ClickHouse deletes a whole selection in one mutation, which holds no batch being
    stored back for long (`batch_size` is the SQL store's)."""
    return _delete(connection, _Selection(endpoints, client_ids, end_ms, endpoint_limit, expire), after_batch)


def delete_clients(connection, endpoints=None, client_ids=None, end_ms: int = 0, endpoint_limit=None):
    """Purge the selected clients' records up to `end_ms` and delete the entries left without
    records: (the deleted (endpoint, client_id), sorted; how many records went), as
    models.clients.clients.delete_clients. An entry that still has a record (newer than end_ms,
    or stored meanwhile) shows the client came back: it stays."""
    gone = []

    def without_records(_):
        selected = [(entry.endpoint, entry.client_id) for entry in _selected(endpoints, client_ids, endpoint_limit)]
        kept = {
            tuple(pair)
            for pair in connection.rows(
                f"SELECT DISTINCT endpoint, client FROM {connection.target.database}.last_activity "
                "WHERE (endpoint, client) IN {pairs:Array(Tuple(String, String))}",
                {"pairs": selected},
            )
        }
        gone.extend(sorted(pair for pair in selected if pair not in kept))
        for part in chunks(gone, 250):
            pairs = " OR ".join(["(e.name = ? AND c.client_id = ?)"] * len(part))
            query(
                "DELETE FROM client WHERE id IN"
                f" (SELECT c.id FROM client c JOIN endpoint e ON e.id = c.endpoint WHERE {pairs})",
                [value for pair in part for value in pair],
            )

    deleted = _delete(connection, _Selection(endpoints, client_ids, end_ms, endpoint_limit), without_records)
    return gone, deleted


def delete_to_anonymous(connection, endpoint: str, client_id: str) -> int:
    """Delete a client's records, leaving their counts only in the statistics that name no
    client (as models.clients.deletion.delete_to_anonymous); how many."""
    return _delete(connection, _Selection([endpoint], [client_id], anonymous=True))


def expire_statistics(connection, before_ms: int) -> int:
    """Drop the statistics of whole days that ended before `before_ms`, and forget the names
    last asked before it (asked again, they are new), as models.clients.deletion's; how many
    rows of counts went."""
    seen = f"{connection.target.database}.names_seen"
    with write_transaction():
        connection.command(
            f"DELETE FROM {tables.changing(connection.target, 'names_seen')} WHERE (endpoint, question) IN "
            f"(SELECT endpoint, question FROM {seen} "
            "GROUP BY endpoint, question HAVING max(last) < fromUnixTimestamp64Milli({before:Int64}))",
            {"before": before_ms},
        )
        return counts.expire(connection, before_ms)


def _selected(endpoints, client_ids, endpoint_limit) -> list:
    """The client entries (ClientRow) a deletion selects, as client_selection does."""
    if not endpoints:
        return client_entries(None, client_ids, endpoint_limit)[1]
    return [entry for endpoint in endpoints for entry in client_entries(endpoint, client_ids, endpoint_limit)[1]]


@dataclasses.dataclass(frozen=True)
class _Selection:
    """What a deletion deletes. `anonymous`: a client no longer logged, whose counts that name
    no client stay (models.clients.deletion.delete_to_anonymous)."""

    endpoints: list | None = None
    client_ids: list | None = None
    end_ms: int | None = None
    endpoint_limit: frozenset | None = None
    expire: bool = False
    anonymous: bool = False

    @property
    def key(self) -> str:
        limit = None if self.endpoint_limit is None else sorted(self.endpoint_limit)
        chosen = [sorted(self.endpoints or []), sorted(self.client_ids or []), self.end_ms, limit]
        return json.dumps([*chosen, self.expire, self.anonymous])

    @property
    def whole(self) -> bool:
        """Everyone's records: retention drops whole days at once."""
        return not (self.endpoints or self.client_ids or self.endpoint_limit is not None)

    def scope(self) -> list[str] | None:
        """The endpoints whose records a deletion of whole endpoints' records takes (None:
        everyone's)."""
        if not (self.endpoints or self.endpoint_limit is not None):
            return None
        names = set(self.endpoints or self.endpoint_limit)
        return sorted(names & set(self.endpoint_limit) if self.endpoints and self.endpoint_limit is not None else names)


def _delete(connection, selection: _Selection, then=None) -> int:
    """Delete the records `selection` chooses among those numbered up to the counter when it
    began; a deletion begun before and cut short (its mark left in ANALYTICS_DATABASE) is
    finished with the numbers it began with, so that its counts, taken away under a token of
    those, are not taken twice, and then run again for the records stored since."""
    with write_transaction():
        under_way = begun()
        resumed = selection.key in under_way
        top = under_way.get(selection.key) or numbers.top()
        under_way[selection.key] = top
        settings.write(BEGUN, json.dumps(under_way))
    if not resumed:
        return _run(connection, selection, top, then)
    finished = _run(connection, selection, top)
    more = None if then is None else (lambda deleted: then(finished + deleted))
    return finished + _delete(connection, selection, more)


def _run(connection, selection: _Selection, top: int, then=None) -> int:
    where, params = [], {}
    if not (selection.expire and selection.whole):  # (retention takes whole days, whatever their numbers)
        where.append("id <= {top:UInt64}")
        params["top"] = top
    pairs = None
    if not selection.whole:
        chosen = _selected(selection.endpoints, selection.client_ids, selection.endpoint_limit)
        pairs = sorted({(entry.endpoint, entry.client_id) for entry in chosen})
        where.append(derived.PAIRS)
        params["pairs"] = pairs
    if selection.end_ms is not None:
        where.append("ts <= fromUnixTimestamp64Milli({end:Int64})")
        params["end"] = selection.end_ms
    condition = " AND ".join(where) or "1"
    forgotten = None if selection.expire else _forgotten(selection, pairs)
    if selection.expire:  # the hours and quarter hours (and a client's names) go with the records, the days stay
        dims = WITH_RECORDS
    elif selection.anonymous:
        dims = tuple(dim for dim in COUNTED if dim not in ANONYMOUS)
    else:
        dims = COUNTED
    marks = []
    token = hashlib.sha256(f"deletion {selection.key} {top}".encode()).hexdigest()
    with write_transaction():
        counted = numbers.top()  # what the first turn's counts hold: every record stored so far
        if pairs is None or pairs:
            marks = _counted_down(connection, condition, params, forgotten, token, dims)
    with write_transaction():
        if marks and selection.expire and selection.whole:
            # Retention takes whole days whatever their numbers: late records of those days stored
            # since the first turn go too, counted and marked as if they had come before it.
            since = f"{condition} AND id > {{since:UInt64}}"
            marks += _counted_down(connection, since, {**params, "since": counted}, None, f"{token} since", dims)
        if marks:
            if selection.expire and selection.whole and selection.end_ms is not None:
                first = day_text((selection.end_ms + 1) // DAY_MS)
                counts.drop_partitions(
                    connection, "records", "toDate32(partition) < toDate32({first:Date32})", {"first": first}
                )
            connection.command(f"DELETE FROM {tables.changing(connection.target, 'records')} WHERE {condition}", params)
            if selection.expire and selection.whole:
                _last_activity_gone(connection, selection.end_ms)
            else:
                derived.last_activity_again(connection, derived.PAIRS if pairs else "1", params)
        if forgotten is not None:
            counts.forget(connection, forgotten)
        if not selection.client_ids and not selection.expire:
            # a deletion of whole endpoints' records (or everyone's) forgets first times
            _names_seen_again(connection, selection.scope(), selection.end_ms)
        under_way = begun()
        under_way.pop(selection.key, None)
        settings.write(BEGUN, json.dumps(under_way))
        deleted = sum(n for _, _, n in marks)
        if then is not None:
            then(deleted)
    return deleted


def _counted_down(connection, where: str, params: dict, forgotten, token: str, dims) -> list:
    """The first of a deletion's two turns for the records `where` selects: their counts taken
    away in `dims` (but those `forgotten` takes whole), stored once under `token`, and their
    endpoints' lost marks raised to them; (endpoint, newest ms, how many) of each endpoint."""
    marks = connection.rows(
        f"SELECT endpoint, toUnixTimestamp64Milli(max(ts)), count() FROM {connection.target.database}.records "
        f"WHERE {where} GROUP BY endpoint",
        params,
    )
    if marks:
        counts.take_away(connection, where, params, forgotten, token, dims)
        ids = endpoint_ids([name for name, _, _ in marks])
        raise_lost_marks({ids[name]: newest for name, newest, _ in marks})
    return marks


def _forgotten(selection: _Selection, pairs) -> counts.Forgotten | None:
    """What the selection's deletion takes out of the counts whatever records are left, as
    models.statistics.rollups.forget: a client's counts that name it, whole endpoints' counts,
    or everyone's, of the days wholly up to its end."""
    if selection.client_ids:
        if not pairs:
            return None
        return counts.Forgotten(
            tuple(dim for dim in COUNTED if "client" in dim.columns),
            selection.end_ms,
            "(endpoint, value) IN {forgotten_pairs:Array(Tuple(String, String))}",
            {"forgotten_pairs": pairs},
        )
    scope = selection.scope()
    if scope is not None:
        return counts.Forgotten(
            tuple(dim for dim in COUNTED if dim.per_endpoint),
            selection.end_ms,
            "endpoint IN {forgotten_scope:Array(String)}",
            {"forgotten_scope": scope},
        )
    return counts.Forgotten(COUNTED, selection.end_ms, "1", {})


def _last_activity_gone(connection, end_ms: int) -> None:
    """After everyone's records up to `end_ms` went: the clients whose newest record was among
    them have none (the others' newest stays)."""
    table = f"{connection.target.database}.last_activity"
    connection.command(
        f"DELETE FROM {tables.changing(connection.target, 'last_activity')} WHERE (endpoint, client) IN "
        f"(SELECT endpoint, client FROM {table} "
        "GROUP BY endpoint, client HAVING max(ts) <= fromUnixTimestamp64Milli({end:Int64}))",
        {"end": end_ms},
    )


def _names_seen_again(connection, scope: list[str] | None, end_ms: int | None) -> None:
    """A deletion of whole endpoints' records (`scope`; None: everyone's) up to `end_ms` (None:
    all): the names they first saw up to then noted again from the records left, and over all
    endpoints ('') from what every endpoint still holds, as models.statistics.first_seen.forget."""
    database = connection.target.database
    seen = f"{database}.names_seen"
    params = {"end": end_ms if end_ms is not None else 2**62, "scope": scope or []}
    on = "endpoint IN {scope:Array(String)}" if scope is not None else "endpoint != ''"
    forgotten = (
        f"SELECT endpoint, question FROM {seen} WHERE {on} GROUP BY endpoint, question "
        "HAVING toUnixTimestamp64Milli(min(first)) <= {end:Int64}"
    )
    pairs = [tuple(row) for row in connection.rows(forgotten, params)]
    everywhere = (
        f"SELECT question FROM {seen} WHERE endpoint = '' GROUP BY question "
        "HAVING toUnixTimestamp64Milli(min(first)) <= {end:Int64}"
    )
    names = [row[0] for row in connection.rows(everywhere, params)]
    if pairs:
        derived.names_again(
            connection, "(endpoint, question) IN {pairs:Array(Tuple(String, String))}", {"pairs": pairs}
        )
    if names:
        derived.names_everywhere_again(connection, "question IN {questions:Array(String)}", {"questions": names})
