"""What ClickHouse's views note of the records, made again from the records left after records
went or changed (a deletion, an erasure, a privacy rewrite): one statement pair per table, so
that each rule of what is kept lives here once. The callers choose the rows (a condition on the
table's own columns, with its parameters).

The rows made again are put in place by `replace`: the new ones go in before the old ones go,
each new row numbered (`made`, in the table's key; the views' rows are 0), and the old ones are
those of the rows chosen with another number. A read between the two statements sees a name's
or a client's times as they were, never without them (deleting first left a moment with no row:
a first-seen read then took an old name for new, a client's last activity for none), and as
`made` is in the key ClickHouse never merges a new row into an old one before the old go."""

import secrets

from models.clickhouse import tables

# The clients (endpoint, client) named by the parameter `pairs`.
PAIRS = "(endpoint, client) IN {pairs:Array(Tuple(String, String))}"
# The columns of a name's sighting, as `replace` is given them.
SIGHTING = ("endpoint", "question", "registrable_domain", "first", "last")


def replace(connection, table: str, where: str, params: dict | None, columns: tuple, select: str = "", rows=()) -> None:
    """The rows of `table` (a name of the database's) that `where` chooses made those `select`
    (a SELECT of `columns`, in order, with `params`) or `rows` (tuples of `columns`; a column
    named first, last or ts holds epoch milliseconds) give: these in, then the others out."""
    name = f"{connection.target.database}.{table}"
    made = secrets.randbits(63) | 1
    if select:
        listed = ", ".join((*columns, "made"))
        connection.command(f"INSERT INTO {name} ({listed}) SELECT *, {made} FROM ({select})", params)
    elif rows:
        times = tuple(column for column in columns if column in ("first", "last", "ts"))
        connection.insert(name, (*columns, "made"), [(*row, made) for row in rows], times=times)
    connection.command(
        f"DELETE FROM {tables.changing(connection.target, table)} WHERE ({where}) AND made != {{made:UInt64}}",
        {**(params or {}), "made": made},
    )


def last_activity_again(connection, where: str, params: dict) -> None:
    """The clients' last activity `where` selects (a condition on endpoint and client) made
    again from their records left; a client with none left has none."""
    select = (
        f"SELECT endpoint, client, max(ts) FROM {connection.target.database}.records "
        f"WHERE {where} GROUP BY endpoint, client"
    )
    replace(connection, "last_activity", where, params, ("endpoint", "client", "ts"), select)


def names_everywhere_again(connection, where: str, params: dict | None = None) -> None:
    """The sightings over all endpoints ('') of the names `where` selects (a condition on
    question) made again from every endpoint's own sightings of them."""
    select = (
        f"SELECT '', question, registrable_domain, min(first), max(last) FROM {connection.target.database}.names_seen "
        f"WHERE endpoint != '' AND {where} GROUP BY question, registrable_domain"
    )
    replace(connection, "names_seen", f"endpoint = '' AND {where}", params, SIGHTING, select)


def names_again(connection, where: str, params: dict) -> None:
    """The sightings of the (endpoint, question) pairs `where` selects (a condition on endpoint
    and question) made again from the records left; a name none is left of is forgotten."""
    select = (
        f"SELECT endpoint, question, registrable_domain, min(ts), max(ts) FROM {connection.target.database}.records "
        f"WHERE {where} GROUP BY endpoint, question, registrable_domain"
    )
    replace(connection, "names_seen", where, params, SIGHTING, select)
