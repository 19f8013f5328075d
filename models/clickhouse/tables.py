"""The record store's tables in ClickHouse, and the statements that make them (docs/clickhouse.md
"The tables" says why each is as it is).

One ClickHouse: each table as named. A cluster (`Target.cluster`): each statement ON CLUSTER,
each table a Replicated one with `_local` after its name, and a Distributed table of the plain
name over it, which the service reads and writes."""

import re
import time
from dataclasses import dataclass

from catalogue import BOOLEAN, CLIENT, DERIVED, ENDPOINT, FIELDS, INTEGER, NUMBER, TERM, TIME
from models.clickhouse import dims
from models.clickhouse.target import Target

# Strings few records have (a trigger's value, a spoof target): stored plain, compressed.
_PLAIN = {"trigger_value", "spoof_target"}
# The names and the answers: many values, but far fewer than a day's part has rows (a name is
# asked again and again), so a dictionary per part pays, ZSTD(3) over it: at 10M records these
# three took 10.6 B a record instead of 15.3 as plain ZSTD(1) strings, and the searches read
# them as fast or faster (BENCHMARKS.md).
_NAMES = {"question", "registrable_domain", "answers"}
# Rows of a shard: one client's records on one shard (its deletion and last activity are one
# shard's work), and a large endpoint still spread over all of them.
SHARDING_KEY = "cityHash64(endpoint, client)"
# The newest inserts whose tokens a table remembers: far more batches than a feed's spool holds
# unacknowledged.
DEDUPLICATION_WINDOW = 10_000


# The number of a row put in place of others (models/clickhouse/derived.py: replace): in the key,
# so that ClickHouse never merges it into the rows it replaces; 0 for the rows the views write.
MADE = ("made", "UInt64")
# Which hour or quarter hour of its day a count is of (dims.SHORT; 0: the day's own).
PERIOD = ("period", "UInt8")
# The counts table's comment: from when (ms) its hours and quarter hours count every record,
# "short counts from MS", then "; FIELD from MS" for each field (dims.field) counted since a later
# upgrade. 0 for tables made with them all; a table made before counts them from the day after its
# upgrade, and the statistics read the records before that (models/clickhouse/counts.py).
SHORT_FROM = "short counts from "
_FIELD_FROM = " from "


def column_type(field) -> str:
    """The ClickHouse type (with its codec) of a record field's column."""
    if field.storage == TIME:
        return "DateTime64(3, 'UTC') CODEC(DoubleDelta, ZSTD(1))"
    if field.storage in (ENDPOINT, CLIENT):
        return "LowCardinality(String)"
    if field.storage == TERM:
        if field.sql in _PLAIN:
            return "String CODEC(ZSTD(1))"
        return "LowCardinality(String) CODEC(ZSTD(3))" if field.sql in _NAMES else "LowCardinality(String)"
    return {
        INTEGER: "Nullable(Int64) CODEC(ZSTD(1))",
        NUMBER: "Nullable(Float64) CODEC(ZSTD(1))",
        BOOLEAN: "Nullable(Bool)",
    }[field.storage]


# The records' columns, in the order an insert gives them: the record's number, then the
# catalogue's fields (derived ones stored as columns: nothing outside ClickHouse to look them up in).
RECORD_COLUMNS = ("id", *(field.sql for field in FIELDS + DERIVED))
TIME_COLUMNS = ("ts",)


@dataclass(frozen=True)
class Table:
    name: str
    columns: tuple[tuple[str, str], ...]
    engine: str  # the MergeTree family member, without its arguments
    tail: str  # PARTITION BY, ORDER BY, SETTINGS...
    indexes: tuple[str, ...] = ()
    # The materialised view that fills it: its SELECT (FROM the records table); None: written
    # directly.
    filled_by: str | None = None
    # A cluster's: which shard a row goes to (columns of its own).
    sharding: str = SHARDING_KEY
    # Columns (in its key) that tables made by earlier versions lack: `upgrades` adds them.
    added: tuple[tuple[str, str], ...] = ()
    # Columns whose type or codec earlier versions made otherwise: `upgrades` brings them to
    # these (a codec for the parts written from then on; a type by a mutation of every part,
    # in the background).
    retyped: tuple[str, ...] = ()
    comment: str = ""


def _tables() -> tuple[Table, ...]:
    record = (("id", "UInt64 CODEC(Delta, ZSTD(1))"), *((f.sql, column_type(f)) for f in FIELDS + DERIVED))
    latest = "SimpleAggregateFunction(max, DateTime64(3, 'UTC'))"
    earliest = "SimpleAggregateFunction(min, DateTime64(3, 'UTC'))"
    return (
        Table(
            "records",
            record,
            "MergeTree",
            "PARTITION BY toDate(ts) ORDER BY (endpoint, ts, id)",
            indexes=(
                "INDEX numbers id TYPE minmax GRANULARITY 1",
                "INDEX clients client TYPE bloom_filter(0.01) GRANULARITY 4",
                # The log's searches find their names first (models/clickhouse/activity.py):
                # a granule without any of them is skipped. 0.44 B a record at 10M.
                "INDEX asked question TYPE bloom_filter(0.01) GRANULARITY 1",
            ),
        ),
        Table(
            "last_activity",
            (("endpoint", "LowCardinality(String)"), ("client", "LowCardinality(String)"), ("ts", latest), MADE),
            "AggregatingMergeTree",
            "ORDER BY (endpoint, client, made)",
            filled_by="SELECT endpoint, client, max(ts) AS ts FROM {records} GROUP BY endpoint, client",
            added=(MADE,),
        ),
        # A name's first and last sighting per endpoint, and ('') over all endpoints; with its
        # registrable domain (a function of the name: no row more), for the domains' first-seen.
        Table(
            "names_seen",
            (
                ("endpoint", "LowCardinality(String)"),
                ("question", "String CODEC(ZSTD(1))"),
                ("registrable_domain", "String CODEC(ZSTD(1))"),
                ("first", earliest),
                ("last", latest),
                MADE,
            ),
            "AggregatingMergeTree",
            "ORDER BY (endpoint, question, registrable_domain, made)",
            filled_by="SELECT scope AS endpoint, question, registrable_domain, min(ts) AS first, max(ts) AS last "
            "FROM {records} ARRAY JOIN [endpoint, ''] AS scope GROUP BY scope, question, registrable_domain",
            sharding="cityHash64(endpoint, question)",
            added=(MADE,),
        ),
        # The statistics' counts per day (models/clickhouse/counts.py): the SQL store's daily
        # rollups, `field` naming which ("" plain counts, "question+action" over all endpoints,
        # endpoint ''), `value` and `second` its columns' texts, `domain` the question's
        # registrable domain; and its hourly and quarter-hour ones per endpoint ("action/15m"),
        # `period` the hour or quarter hour of the day. A partition a day: expiry drops whole days.
        Table(
            "daily_counts",
            (
                ("day", "Date32"),
                PERIOD,
                ("field", "LowCardinality(String)"),
                ("endpoint", "LowCardinality(String)"),
                ("value", "String CODEC(ZSTD(1))"),
                # A client's names a day (dims.PAIRED) made these three most of the table's
                # bytes: at 100M records 6.3 B a record as LowCardinality, String and Int64 with
                # ClickHouse's default codec, 3.4 with these (BENCHMARKS.md).
                ("second", "LowCardinality(String) CODEC(ZSTD(3))"),
                ("domain", "LowCardinality(String) CODEC(ZSTD(3))"),
                ("n", "Int64 CODEC(T64, ZSTD(1))"),
            ),
            "SummingMergeTree",
            "PARTITION BY day ORDER BY (field, endpoint, value, second, period)",
            filled_by=dims.counted("{records}"),
            sharding="cityHash64(endpoint, value)",
            added=(PERIOD,),
            retyped=("second", "domain", "n"),
            comment=f"{SHORT_FROM}0",
        ),
    )


TABLES = _tables()


def statements(target: Target) -> list[str]:
    """The statements that make the database and every table (and view) of `target`, in order;
    each may run again on a database that has them."""
    database, cluster = target.database, target.cluster
    on = f" ON CLUSTER {cluster}" if cluster else ""
    made = [f"CREATE DATABASE IF NOT EXISTS {database}{on}"]
    for table in TABLES:
        name = f"{database}.{table.name}"
        local = f"{name}_local" if cluster else name
        columns = [f"{column} {kind}" for column, kind in table.columns] + list(table.indexes)
        if cluster:
            engine = f"Replicated{table.engine}('/clickhouse/tables/{{shard}}/{database}/{table.name}', '{{replica}}')"
        else:
            engine = table.engine
        body = ",\n    ".join(columns)
        settings = f"\nSETTINGS non_replicated_deduplication_window = {DEDUPLICATION_WINDOW}"
        # Inserts sent again with the same deduplication token are stored once (a batch retried
        # under its batch key), and so are the blocks its views write: Replicated tables remember
        # recent tokens by themselves, a plain MergeTree only when told to.
        tail = table.tail + ("" if cluster else settings) + (f"\nCOMMENT '{table.comment}'" if table.comment else "")
        made.append(f"CREATE TABLE IF NOT EXISTS {local}{on} (\n    {body}\n) ENGINE = {engine}\n{tail}")
        if cluster:
            made.append(
                f"CREATE TABLE IF NOT EXISTS {name}{on} AS {local} "
                f"ENGINE = Distributed({cluster}, {database}, {table.name}_local, {table.sharding})"
            )
    # Each node's views fill its own shard's tables from its own records: what a shard holds
    # of a client (all of it, by the sharding key) or of a name (its share, merged at reads).
    records = f"{database}.records_local" if cluster else f"{database}.records"
    for table in TABLES:
        if table.filled_by:
            into = f"{database}.{table.name}_local" if cluster else f"{database}.{table.name}"
            made.append(
                f"CREATE MATERIALIZED VIEW IF NOT EXISTS {database}.{table.name}_view{on} TO {into} AS "
                + table.filled_by.format(records=records)
            )
    return made


def local(target: Target, name: str) -> str:
    """The name of the table that holds `name`'s rows on a node (as system tables list it): on a
    cluster its `_local` table, under the Distributed one of the plain name."""
    return f"{name}_local" if target.cluster else name


def changing(target: Target, name: str) -> str:
    """The table (of `target`'s database) as a statement that changes its rows in place names it
    (a DELETE, an ALTER's UPDATE or DROP PARTITION, an OPTIMIZE, a TRUNCATE): on a cluster each
    node's `_local` table, ON CLUSTER, for a Distributed table takes inserts and reads only."""
    on = f" ON CLUSTER {target.cluster}" if target.cluster else ""
    return f"{target.database}.{local(target, name)}{on}"


def every_replica(target: Target, name: str) -> str:
    """The table as a read that must see each replica's own rows names it (what a mutation has
    not yet changed on one of them): on a cluster every node's `_local` table."""
    if target.cluster:
        return f"clusterAllReplicas('{target.cluster}', {target.database}.{local(target, name)})"
    return f"{target.database}.{name}"


def parts(target: Target) -> str:
    """Where the parts of the tables are listed (tables named by `local`): on a cluster every node's."""
    return f"clusterAllReplicas('{target.cluster}', system.parts)" if target.cluster else "system.parts"


def create(connection) -> None:
    """Make what is missing of the record store's tables on the connection's ClickHouse, and
    bring the tables an earlier version made up to these."""
    made = statements(connection.target)
    views = [statement for statement in made if statement.startswith("CREATE MATERIALIZED VIEW")]
    # The views last: ClickHouse checks a view's SELECT against its table even when the view
    # is there, so an earlier table must have its new columns first.
    for statement in made:
        if statement not in views:
            connection.command(statement)
    for statement in upgrades(connection) + views:
        connection.command(statement)
    _short_from.pop(connection.target, None)


def upgrades(connection) -> list[str]:
    """The statements that bring tables made by an earlier version up to these: a column of
    their key added (`made`: the tables a view fills, before rows were replaced by number;
    `period`: the counts, before hours and quarter hours were counted, counted from the next
    day on, SHORT_FROM, by their view made again), the hours of fields counted since (from the
    next day on too), columns of another type or codec, and their skip indexes."""
    target = connection.target
    database, cluster = target.database, target.cluster
    on = f" ON CLUSTER {cluster}" if cluster else ""
    kinds = {
        (table, column): (kind, codec)
        for table, column, kind, codec in connection.rows(
            "SELECT table, name, type, compression_codec FROM system.columns WHERE database = {database:String}",
            {"database": database},
        )
    }
    have = set(kinds)
    views = dict(
        connection.rows(
            "SELECT name, as_select FROM system.tables WHERE database = {database:String} AND name LIKE '%\\_view'",
            {"database": database},
        )
    )
    comments = dict(
        connection.rows(
            "SELECT name, comment FROM system.tables WHERE database = {database:String}", {"database": database}
        )
    )
    tomorrow = (int(time.time() * 1000) // dims.DAY_MS + 1) * dims.DAY_MS
    indexes = set(
        connection.rows(
            "SELECT table, name FROM system.data_skipping_indices WHERE database = {database:String}",
            {"database": database},
        )
    )
    made = []
    records = f"{database}.{local(target, 'records')}"
    existing = {table for table, _ in have}
    for table in TABLES:
        # (the table as a node holds it, and as a statement changing it names it)
        held_as, altered = local(target, table.name), changing(target, table.name)
        restarted = False  # the hours counted from tomorrow on, all of them
        for column in table.added:
            if held_as not in existing or (held_as, column[0]) in have:
                continue
            key = re.search(r"ORDER BY \([^)]*\)", table.tail)
            assert key, "the key of a table a column is added to"
            changes = f"ADD COLUMN IF NOT EXISTS {' '.join(column)}, MODIFY {key.group(0)}"
            if table.comment.startswith(SHORT_FROM):
                changes += f", MODIFY COMMENT '{SHORT_FROM}{tomorrow}'"
                restarted = True
            made.append(f"ALTER TABLE {altered} {changes}")
            if cluster:
                made.append(f"ALTER TABLE {database}.{table.name}{on} ADD COLUMN IF NOT EXISTS {' '.join(column)}")
        if held_as in existing:
            made += _index_changes(table, indexes, held_as, altered)
        for column in table.retyped:
            wanted = dict(table.columns)[column]
            kind, _, codec = wanted.partition(" CODEC(")
            held = kinds.get((held_as, column))
            if held is not None and held != (kind, f"CODEC({codec}" if codec else ""):
                made.append(f"ALTER TABLE {altered} MODIFY COLUMN {column} {wanted}")
                if cluster:
                    made.append(f"ALTER TABLE {database}.{table.name}{on} MODIFY COLUMN {column} {kind}")
        # A view that writes a column its table was given: made to (a start cut short after
        # the table's change does it then).
        view = views.get(f"{table.name}_view")
        wanted = [column for column, _ in table.added if table.filled_by and f" AS {column}" in table.filled_by]
        # Counts a view did not count (dims.WITH_RECORDS grew): counted from the next day on, the comment
        # saying so before the view is made again (a start cut short between them only marks them
        # later).
        uncounted = []
        if table.comment.startswith(SHORT_FROM) and view is not None:
            uncounted = [field for field in map(dims.field, dims.WITH_RECORDS) if f"'{field}'" not in view]
        comment = comments.get(held_as, "")
        unmarked = [field for field in uncounted if field not in _marks(comment)]
        if unmarked and not restarted and comment.startswith(SHORT_FROM):
            marks = "".join(f"; {field}{_FIELD_FROM}{tomorrow}" for field in unmarked)
            made.append(f"ALTER TABLE {altered} MODIFY COMMENT '{comment}{marks}'")
        if view is not None and (any(f" AS {column}" not in view for column in wanted) or uncounted):
            made.append(
                f"ALTER TABLE {database}.{table.name}_view{on} MODIFY QUERY " + table.filled_by.format(records=records)
            )
    return made


# Skip indexes tables made by earlier versions have and these do not, as they were made: an
# n-gram filter too small to skip anything.
_RETIRED_INDEXES = {"records": ("INDEX names question TYPE ngrambf_v1(3, 4096, 3, 0) GRANULARITY 4",)}


def _index_changes(table: Table, have: set, local: str, name: str) -> list[str]:
    """The statements that give an earlier table (`local`, in `have`'s (table, index) pairs;
    `name` as ALTER names it) the skip indexes it lacks (built for its parts by a mutation of
    its own, in the background: a read meanwhile skips less) and take away those dropped."""
    made = []
    for index in table.indexes:
        index_name = index.split()[1]
        if (local, index_name) not in have:
            made += [f"ALTER TABLE {name} ADD {index}", f"ALTER TABLE {name} MATERIALIZE INDEX {index_name}"]
    for index_name in (index.split()[1] for index in _RETIRED_INDEXES.get(table.name, ())):
        if (local, index_name) in have:
            made.append(f"ALTER TABLE {name} DROP INDEX {index_name}")
    return made


# {target: {field: from when it counts}}, read once a process: it changes only at an upgrade (create).
_short_from: dict = {}


def short_counts_from(connection, field: str = "") -> int:
    """The time (ms) from which the counts table counts the hours or quarter hours of `field`
    (dims.field; "": those counted since hours were), as its comment says (SHORT_FROM)."""
    target = connection.target
    if target not in _short_from:
        found = connection.rows(
            "SELECT comment FROM system.tables WHERE database = {database:String} AND name = {name:String}",
            {"database": target.database, "name": local(target, "daily_counts")},
        )
        _short_from[target] = _marks(found[0][0] if found else "")
    marks = _short_from[target]
    return max(marks[""], marks.get(field, 0))


def later_marks(connection) -> dict[str, int]:
    """{field: from when its hours count} (dims.field) of the hours not counted from the first
    record on, as the counts table's comment says now."""
    _short_from.pop(connection.target, None)
    fields = {field: short_counts_from(connection, field) for field in map(dims.field, dims.WITH_RECORDS)}
    return {field: at for field, at in fields.items() if at}


def all_short_counted(connection) -> None:
    """Say in the counts table's comment that it counts every hour and quarter hour of every
    record (backfill.count_earlier made them up)."""
    target = connection.target
    connection.command(f"ALTER TABLE {changing(target, 'daily_counts')} MODIFY COMMENT '{SHORT_FROM}0'")
    _short_from.pop(target, None)


def _marks(comment: str) -> dict[str, int]:
    """SHORT_FROM's times in a counts table's comment: {"": every field's, field: its own}."""
    if not comment.startswith(SHORT_FROM):
        return {"": 0}
    first, *later = comment[len(SHORT_FROM) :].split("; ")
    marks = {"": int(first)}
    for entry in later:
        field, _, at = entry.rpartition(_FIELD_FROM)
        marks[field] = int(at)
    return marks
