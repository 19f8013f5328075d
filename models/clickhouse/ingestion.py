"""Appending records to ClickHouse: the endpoints, the client entries with their metadata and
the record numbers in ANALYTICS_DATABASE, and the records themselves into ClickHouse, in one
writers' turn per batch (docs/clickhouse.md)."""

import weakref
from functools import partial

from catalogue import FIELDS, NUMBER, TERM
from models.clickhouse import counts, numbers, unstored
from models.clickhouse.tables import RECORD_COLUMNS, TIME_COLUMNS
from models.engine.database import write_transaction
from models.ingest import enrichment
from models.ingest.ingestion import newest_metadata, upsert_clients
from models.privacy import privacy
from models.records.domains import registrable_domain
from models.schema.endpoints import endpoint_ids

_AT = {field.sql: i for i, field in enumerate(FIELDS)}
_TS, _ENDPOINT, _CLIENT, _QUESTION = _AT["ts"], _AT["endpoint"], _AT["client"], _AT["question"]
# A string ClickHouse keeps is never NULL: an unknown one is '', as the API shows it.
_STRINGS_AT = [i for i, field in enumerate(FIELDS) if field.storage == TERM]
# A number is never -0.0: the SQL store gives 0.0 back for it, and so must every way out of
# ClickHouse (its rows through a server's client keep the sign).
_NUMBERS_AT = [i for i, field in enumerate(FIELDS) if field.storage == NUMBER]
assert RECORD_COLUMNS == ("id", *(field.sql for field in FIELDS), "registrable_domain"), "a record's row order"

# Per connection whose process is its ClickHouse's only writer (chDB): its count of inserts into
# the records when no record stood above the counter. The check for such records (a query on
# every part of the table: as costly as a collector's batch itself) is then made once, not per
# batch, until something else inserts records in this process.
_NONE_ABOVE: "weakref.WeakKeyDictionary" = weakref.WeakKeyDictionary()


def store_records(connection, records: list[tuple], in_transaction=None, first=None) -> int:
    """Store new records all or nothing, as models.ingest.ingestion.store_records does (the same
    records, enrichment, privacy, client entries, `in_transaction` and `first`), the records
    into `connection`'s ClickHouse. A batch's records are visible once its transaction commits
    (reads stop at the counter: activity.condition); a failure before then erases them again,
    and a process that died in between leaves them to the next writer to erase."""
    if not records:
        return 0
    # The counts of clients not logged are ClickHouse's, outside the batch's transaction: a batch
    # that fails takes back what it added. (A process that dies between the two leaves them.)
    added = []

    def anonymous(counted: list[tuple]) -> None:
        added.append(counts.add_anonymous(connection, counted))

    try:
        return privacy.storing(
            partial(_store, connection), enrichment.enriched, records, in_transaction, first, anonymous
        )
    except BaseException:
        for rows in added:
            counts.take_back(connection, rows)
        raise


def _store(connection, records: list[tuple], in_transaction, first) -> int:
    columns = list(zip(*(values for values, _ in records), strict=True))
    client_keys = list(zip(columns[_ENDPOINT], columns[_CLIENT], strict=True))
    metadata = newest_metadata(records, client_keys, columns[_TS])
    with write_transaction():
        if first is not None:
            first()
        endpoints = endpoint_ids(set(columns[_ENDPOINT]))
        upsert_clients(metadata, endpoints)
        written = connection.records_written()
        # Records above the counter are a batch ClickHouse took whose transaction never committed
        # (its process died in between): never stored, they are erased before their numbers are
        # handed out again.
        if written is None or _NONE_ABOVE.get(connection) != written:
            unstored.erase(connection, "id > {counted:UInt64}", {"counted": numbers.top()})
        start = numbers.take(len(records))
        rows = []
        for i, (values, _) in enumerate(records):
            row = [start + i, *values, registrable_domain(values[_QUESTION])]
            for at in _STRINGS_AT:
                if row[at + 1] is None:
                    row[at + 1] = ""
            for at in _NUMBERS_AT:
                if row[at + 1] == 0:
                    row[at + 1] = 0.0
            rows.append(row)
        connection.insert(f"{connection.target.database}.records", RECORD_COLUMNS, rows, times=TIME_COLUMNS)
        try:
            if in_transaction is not None:
                in_transaction()
        except BaseException:
            # The transaction rolls back, and the batch with it: in ClickHouse too.
            unstored.erase(connection, "id >= {first:UInt64}", {"first": start})
            raise
    if written is not None:
        # Committed: none above the counter, unless another insert came between.
        _NONE_ABOVE[connection] = written + 1
    return len(records)
