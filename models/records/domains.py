"""Registrable domains (eTLD+1) of the questions: the rule, and the store's map from each
question's term to its domain's term, which filters and statistics read the derived field
`registrableDomain` through."""

from functools import lru_cache

from publicsuffixlist import PublicSuffixList

from models.engine.database import db, query
from models.engine.sql import chunks

# The list the package ships (ICANN and private sections: "user.github.io" is a site of its
# own); nothing is fetched at run time.
_SUFFIXES = PublicSuffixList()
# Past this many ids the set of question terms known to be mapped starts over.
_KNOWN_LIMIT = 500_000
TABLE = "term_domain"


@lru_cache(maxsize=65_536)
def registrable_domain(name: str) -> str:
    """The registrable domain of a (normalised) name: the public suffix and one label more;
    the name itself when it is a public suffix, a single label or empty."""
    return _SUFFIXES.privatesuffix(name) or name


def map_questions(terms: dict[str, int], questions) -> list[int]:
    """Keep the registrable domain of each question (strings, with their ids in `terms`, which
    also holds the domains' ids: see domains_of); the question ids written, for `remember`
    once committed. Call inside the write transaction that stores them."""
    known = db.obj.mapped_questions
    rows = [(terms[name], terms[registrable_domain(name)]) for name in questions if terms[name] not in known]
    for part in chunks(rows, 400):
        query(
            f"INSERT INTO {TABLE} (term, domain) VALUES "
            + ", ".join(["(?, ?)"] * len(part))
            + " ON CONFLICT (term) DO NOTHING",
            [value for row in part for value in row],
        )
    return [term for term, _ in rows]


def remember(mapped: list[int]) -> None:
    """Skip these question ids from now on; only once their rows are committed (a rolled-back
    id may come back for another string)."""
    known = db.obj.mapped_questions
    if db.in_transaction() or not mapped:
        return
    if len(known) + len(mapped) > _KNOWN_LIMIT:
        known.clear()
    known.update(mapped)


def domains_of(questions) -> set[str]:
    """The registrable domains of `questions`: strings to intern with them."""
    return {registrable_domain(name) for name in questions}
