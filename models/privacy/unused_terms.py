"""Deleting the interned strings (terms) a privacy rewrite or an opt-out left unused, so that a
value removed later is gone from the store as much as one removed at ingest.

What a rewrite or deletion stops referring to is noted as a candidate (`note`, `note_records`,
in its transaction). The privacy job then deletes the candidates nothing refers to any more
(`clean`), in rounds:

1. claim (a short write transaction): take a bounded set of candidates, with the registrable
   domains of those that are questions, and move the term generation (models/records/terms.py), so
   every process starts its cache over at its next write;
2. look for references (reads only, each statement short, the write lock free): every TERM
   column of the records (newest first, by id range: a string still in use is usually in the
   newest ones), then the rollups keyed by a term (shorter periods first: longer ones are summed
   from them), then the first-seen names;
3. delete (write transactions of DELETE_BATCH terms): the claimed candidates found nowhere and
   still candidates, unless another question's registrable domain is one.

Why nothing found unreferenced can be in use: after the claim, a write gets a term's id only
from the term table (caches start over), and term_ids takes the term off the candidates then,
so step 3 leaves it. Any other reference at step 3 was copied from a row that held it since
before the claim (records are written only with ids from term_ids; rollups and first-seen names
are counted from records, longer rollups summed from shorter ones), and such a row still held it
when step 2 read its place, or the copy was made before its source went, and read after.
"""

from catalogue import FIELDS, FIELDS_BY_SQL, TERM
from models.engine.database import db, query, secure_deletes, write_transaction
from models.engine.sql import chunks, placeholders
from models.records import blocks, thawing
from models.records.domains import TABLE as DOMAINS
from models.records.terms import GENERATION, generation
from models.schema import settings
from models.statistics import rollups

TERM_COLUMNS = tuple(field.sql for field in FIELDS if field.storage == TERM)
_TERM_AT = [blocks.COLUMNS.index(column) for column in TERM_COLUMNS]
# Rollups whose value holds a term id (alone, or as id * PAIR + code): shorter periods first.
_TERM_DIMS = sorted(
    (dim for dim in rollups.DIMS if dim.columns and FIELDS_BY_SQL[dim.columns[0]].storage == TERM),
    key=lambda dim: dim.period_ms,
)
CLAIM = 50_000  # candidates looked for in one round
SCAN_IDS = 100_000  # record ids one read looks through
DELETE_BATCH = 2_000
_CHECKED = "SELECT id FROM term_check"


def note(ids) -> None:
    """Note term ids a change stopped referring to. Call in the change's write transaction."""
    ids = sorted({term for term in ids if term is not None})
    since = generation()
    for part in chunks(ids, 500):
        query(
            "INSERT INTO term_candidate (term, since) VALUES "
            + ", ".join(["(?, ?)"] * len(part))
            + " ON CONFLICT (term) DO NOTHING",
            [value for term in part for value in (term, since)],
        )


def note_records(condition: str, params: list) -> None:
    """Note every term the records matching `condition` (SQL on the record table) hold, before
    they are deleted. Call in the deletion's write transaction."""
    since = generation()
    for column in TERM_COLUMNS:
        query(
            f"INSERT INTO term_candidate (term, since) SELECT DISTINCT {column}, ? FROM record"
            f" WHERE {condition} AND {column} IS NOT NULL ON CONFLICT (term) DO NOTHING",
            [since, *params],
        )


def clean(deadline) -> tuple[int, int]:
    """Delete the noted terms nothing refers to any more, round by round until none is left or
    `deadline()` is true: (how many were looked for, how many went). Needs a connection,
    outside any transaction."""
    examined = deleted = 0
    while not deadline():
        claimed, claimed_under, newest = _claim()
        if not claimed:
            break
        unused = _unreferenced(claimed, newest)
        deleted += _delete(claimed, unused, claimed_under)
        examined += len(claimed)
    return examined, deleted


def _claim() -> tuple[list[int], int, int]:
    """(the candidates of this round, the generation they were claimed under, the newest record
    id then)."""
    with write_transaction():
        current = generation()
        ids = [
            row[0]
            for row in query(
                "SELECT term FROM term_candidate WHERE since <= ? ORDER BY term LIMIT ?", [current, CLAIM]
            ).fetchall()
        ]
        if not ids:
            return [], current, 0
        domains = set()
        for part in chunks(ids, 500):
            domains.update(
                row[0] for row in query(f"SELECT domain FROM {DOMAINS} WHERE term IN ({placeholders(len(part))})", part)
            )
        # A question's registrable domain may be left unused with it.
        note(domains - set(ids))
        settings.write(GENERATION, str(current + 1))
        newest = thawing.newest_id()
    return sorted(set(ids) | domains), current, newest


def _unreferenced(claimed: list[int], newest: int) -> set[int]:
    """The claimed terms no record, rollup or first-seen name refers to (see the module's
    docstring for why reading them piece by piece is enough)."""
    dialect = db.obj.dialect
    query(dialect.term_check_table)
    query("DELETE FROM term_check")
    for part in chunks(claimed, 500):
        query(f"INSERT INTO term_check (id) VALUES {', '.join(['(?)'] * len(part))}", part)
    dialect.after_filling_temp_table(query, "term_check")
    left = set(claimed)
    any_column = " OR ".join(f"{column} IN ({_CHECKED})" for column in TERM_COLUMNS)
    top = newest
    nothing = ", ".join(["NULL"] * len(TERM_COLUMNS))
    while top > 0 and left:
        # The rows and the frozen records' blocks of the id range in one statement (one
        # snapshot): a record moved between them meanwhile (freezing.py) is in exactly one.
        rows = query(
            f"SELECT {', '.join(TERM_COLUMNS)}, NULL FROM record WHERE id > ? AND id <= ? AND ({any_column})"
            f" UNION ALL SELECT {nothing}, data FROM record_block WHERE last_id > ? AND first_id <= ?",
            [top - SCAN_IDS, top, top - SCAN_IDS, top],
        ).fetchall()
        referred = {value for row in rows if row[-1] is None for value in row[:-1]}
        for row in rows:
            if row[-1] is not None:
                referred |= _block_terms(row[-1], top - SCAN_IDS, top)
        _found(left, referred)
        top -= SCAN_IDS
    for dim in _TERM_DIMS:
        if not left:
            break
        term = f"value / {rollups.PAIR}" if len(dim.columns) == 2 else "value"
        rows = query(f"SELECT DISTINCT {term} FROM rollup WHERE dim = ? AND {term} IN ({_CHECKED})", [dim.id])
        _found(left, {row[0] for row in rows})
    if left:
        rows = query(f"SELECT DISTINCT term FROM name_seen WHERE term IN ({_CHECKED})")
        _found(left, {row[0] for row in rows})
    query("DELETE FROM term_check")
    return left


def _block_terms(data: bytes, after_id: int, upto_id: int) -> set:
    """The term ids the frozen records of ids in (after_id, upto_id] of a block refer to."""
    return {record[i] for record in blocks.unpack(data) if after_id < record[0] <= upto_id for i in _TERM_AT}


def _found(left: set, referred: set) -> None:
    """Take the terms found referred to off `left` (and off the temporary table the reads use)."""
    found = sorted(left & referred)
    left.difference_update(found)
    for part in chunks(found, 500):
        query(f"DELETE FROM term_check WHERE id IN ({placeholders(len(part))})", part)


def _delete(claimed: list[int], unused: set[int], claimed_under: int) -> int:
    """Delete the unused terms still candidates since the claim, in batches, and take every
    claimed term off the candidates; how many terms went. A registrable domain another kept
    question maps to stays: the questions go first, then the domains."""
    domains = _domains_of_others(sorted(unused), [])
    order = sorted(unused - domains) + sorted(unused & domains)
    deleted = 0
    with secure_deletes():
        for part in chunks(order, DELETE_BATCH):
            with write_transaction():
                rows = query(
                    f"SELECT term FROM term_candidate WHERE term IN ({placeholders(len(part))}) AND since <= ?",
                    [*part, claimed_under],
                )
                ids = {row[0] for row in rows}
                while kept := _domains_of_others(sorted(ids), sorted(ids)):
                    ids -= kept
                if ids:
                    marks = placeholders(len(ids))
                    query(f"DELETE FROM {DOMAINS} WHERE term IN ({marks})", sorted(ids))
                    deleted += query(f"DELETE FROM term WHERE id IN ({marks})", sorted(ids)).rowcount
        with write_transaction():
            for part in chunks(claimed, 500):
                query(
                    f"DELETE FROM term_candidate WHERE term IN ({placeholders(len(part))}) AND since <= ?",
                    [*part, claimed_under],
                )
    return deleted


def _domains_of_others(ids: list[int], going: list[int]) -> set[int]:
    """Those of `ids` that are the registrable domain of a question other than themselves and
    not among `going`."""
    found = set()
    for part in chunks(ids, 400):
        marks = placeholders(len(part))
        others = f" AND term NOT IN ({placeholders(len(going))})" if going else ""
        rows = query(
            f"SELECT DISTINCT domain FROM {DOMAINS} WHERE domain IN ({marks}) AND term <> domain{others}",
            [*part, *going],
        )
        found.update(row[0] for row in rows)
    return found
