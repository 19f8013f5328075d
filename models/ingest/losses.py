"""Records the feeds lost before storing them, by the place they were lost at (LOSS_PLACES).

Feeds run as processes of their own, often on a resolver's host, and count their losses
themselves; each run reports its totals so far (feeds/losses.py), locally or through
POST /v2/ingest/losses, and /metrics sums them. A run's report carries totals, not
increments: sent again after a time-out, or out of order, it never counts a loss twice.
"""

from models.engine.database import query, write_transaction
from models.schema.endpoints import endpoint_ids

# Where a record can be lost on its way into the store.
LOSS_PLACES = {
    "collector-queue": "the collector's queue was full while the store was behind",
    "resolver": "responses the resolver dropped: queries it logged, unanswered while it dropped dnstap messages",
    "source-aged-out": "the source deleted them before a following feed read them",
}
# What a feed counts and reports beside its losses, though no record was lost there.
COUNTED_APART = {"unanswered": "queries the resolver logged and never answered (no upstream, a time-out)"}
MAX_RUN_LENGTH = 64


def report(run: str, endpoint: str, totals: dict[str, int], now_ms: int) -> None:
    """Keep `run`'s totals by place for `endpoint` (made known if it has no record yet, so that
    /metrics labels it by name); a total lower than one kept is older news."""
    with write_transaction():
        ident = endpoint_ids([endpoint])[endpoint]
        for place, total in totals.items():
            query(
                "INSERT INTO feed_loss (run, endpoint, place, total, updated) VALUES (?, ?, ?, ?, ?)"
                " ON CONFLICT (run, endpoint, place) DO UPDATE SET"
                " total = CASE WHEN excluded.total > feed_loss.total THEN excluded.total ELSE feed_loss.total END,"
                " updated = excluded.updated",
                [run, ident, place, total, now_ms],
            )


def totals() -> list[tuple[str, str, int]]:
    """(endpoint, place, records lost) over every run, every endpoint and place that lost any."""
    sql = (
        "SELECT e.name, l.place, SUM(l.total) FROM feed_loss l JOIN endpoint e ON e.id = l.endpoint"
        " GROUP BY e.name, l.place ORDER BY e.name, l.place"
    )
    return [(endpoint, place, int(total)) for endpoint, place, total in query(sql).fetchall()]
