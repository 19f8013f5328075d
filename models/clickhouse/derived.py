"""What ClickHouse's views note of the records, made again from the records left after records
went or changed (a deletion, an erasure, a privacy rewrite): one statement pair per table, so
that each rule of what is kept lives here once. The callers choose the rows (a condition on the
table's own columns, with its parameters)."""

# The clients (endpoint, client) named by the parameter `pairs`.
PAIRS = "(endpoint, client) IN {pairs:Array(Tuple(String, String))}"


def last_activity_again(connection, where: str, params: dict) -> None:
    """The clients' last activity `where` selects (a condition on endpoint and client) made
    again from their records left; a client with none left has none."""
    database = connection.target.database
    connection.command(f"DELETE FROM {database}.last_activity WHERE {where}", params)
    connection.command(
        f"INSERT INTO {database}.last_activity SELECT endpoint, client, max(ts) FROM {database}.records "
        f"WHERE {where} GROUP BY endpoint, client",
        params,
    )


def names_everywhere_again(connection, where: str, params: dict | None = None) -> None:
    """The sightings over all endpoints ('') of the names `where` selects (a condition on
    question) made again from every endpoint's own sightings of them."""
    seen = f"{connection.target.database}.names_seen"
    connection.command(f"DELETE FROM {seen} WHERE endpoint = '' AND {where}", params)
    connection.command(
        f"INSERT INTO {seen} SELECT '', question, registrable_domain, min(first), max(last) FROM {seen} "
        f"WHERE endpoint != '' AND {where} GROUP BY question, registrable_domain",
        params,
    )
