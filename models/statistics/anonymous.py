"""The share of the statistics of clients marked not logged: their queries counted in the
daily rollups that name no client, with no record, client metadata or first-seen time kept.

Only the statistics (daily and longer) rollups: the shorter ones are counted down from the
records when those expire, and these queries have none. Nor the rollups keyed by client:
that would name the client.
"""

from catalogue import FIELDS, FIELDS_BY_SQL, TERM
from models.records import domains
from models.records.terms import term_ids
from models.schema.endpoints import endpoint_ids
from models.statistics import rollups

DIMS = tuple(dim for dim in rollups.STATISTICS if "client" not in dim.columns)
_COLUMNS = {column for dim in DIMS for column in dim.columns}
_AT = {field.sql: i for i, field in enumerate(FIELDS)}
_TERM_AT = [i for i, field in enumerate(FIELDS) if field.storage == TERM and field.sql in _COLUMNS]


class Counts:
    """The counts of some records (as models.ingest.ingestion.store_records takes them): their columns
    and strings taken before the write lock; `add` counts them, on their ids, inside the
    transaction that stores the batch."""

    def __init__(self, records: list[tuple]):
        columns = list(zip(*(values for values, _ in records), strict=True))
        self.columns = {
            field.sql: column
            for field, column in zip(FIELDS, columns, strict=True)
            if field.sql in _COLUMNS or field.sql in ("ts", "endpoint")
        }
        self.questions = set(columns[_AT["question"]])
        self.strings = {value for i in _TERM_AT for value in columns[i] if value is not None}
        self.strings |= domains.domains_of(self.questions)

    def add(self):
        terms = term_ids(self.strings)
        terms[None] = None
        domains.map_questions(terms, self.questions)  # registrableDomain reads the questions' rollups
        endpoints = endpoint_ids(set(self.columns["endpoint"]))
        stored = {
            sql: [(endpoints if sql == "endpoint" else terms)[value] for value in column]
            if sql == "endpoint" or FIELDS_BY_SQL[sql].storage == TERM
            else column
            for sql, column in self.columns.items()
        }
        rollups.add(rollups.count(stored, DIMS))
