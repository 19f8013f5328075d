"""Rollups counted under an older layout brought to the current one."""

from models.engine.database import query
from models.records import thawing
from models.statistics import counting, rollups


def relayout(previous: str):
    """Bring rows counted under the layout `previous` to rollups.LAYOUT. Rows of a dim whose meaning
    is kept are renumbered, not counted anew: past the records' horizon the records that made
    them are gone. Rows of dims no longer wanted go; new dims are counted from the records."""
    old = {}
    for entry in previous.split(";"):
        ident, _, description = entry.partition(":")
        if description:
            old[description] = int(ident)
    moves = {old[dim.description]: dim.id for dim in rollups.DIMS if dim.description in old}
    if moves:
        query(f"DELETE FROM rollup WHERE dim NOT IN ({', '.join('?' * len(moves))})", list(moves))
    else:
        query("DELETE FROM rollup")
    # Through numbers no dim has, so that no move lands on rows still waiting to move.
    aside = 1 + max([*moves, *moves.values()], default=0)
    for before, after in moves.items():
        if before != after:
            query("UPDATE rollup SET dim = ? WHERE dim = ?", [aside + after, before])
    query("UPDATE rollup SET dim = dim - ? WHERE dim >= ?", [aside, aside])
    new = tuple(dim for dim in rollups.DIMS if dim.description not in old)
    if new:
        counting.apply("1 = 1", [], 1, new, counted_only=True)
        # and the frozen records, a run at a time
        for run in thawing.runs(None, None, None, False):
            thawing.stage(run)
            counting.apply("1 = 1", [], 1, new, counted_only=True, table=thawing.STAGING)
