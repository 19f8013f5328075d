"""Version 11: every record's registrable domain, through term_domain (each question term's
domain term, kept at ingest). The table is new (reconcile.py makes it); the questions already
stored, in the records and in the statistics that outlive them, are mapped here."""

from models.engine.database import query
from models.engine.sql import chunks
from models.records import domains, terms
from models.statistics import rollups


def up():
    map_stored_questions()


def map_stored_questions() -> int:
    """Map every question already stored (records, and the statistics that outlive them); for
    a database made before the map existed. Call inside a write transaction."""
    dims = [dim.id for dim in rollups.DIMS if dim.columns and dim.columns[0] == "question"]
    found = {row[0] for row in query("SELECT DISTINCT question FROM record")}
    if dims:
        marks = ", ".join("?" * len(dims))
        found.update(
            row[0] for row in query(f"SELECT DISTINCT value / {rollups.PAIR} FROM rollup WHERE dim IN ({marks})", dims)
        )
    found.discard(None)
    found.discard(0)
    mapped = 0
    for part in chunks(sorted(found), 5_000):
        names = terms.term_values(part)
        ids = terms.term_ids(set(names.values()) | domains.domains_of(names.values()))
        domains.map_questions(ids, names.values())
        mapped += len(names)
    return mapped
