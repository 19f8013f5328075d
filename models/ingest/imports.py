"""Where each history import stands, so that a re-run resumes instead of duplicating records."""

import json

from models.engine.database import query
from models.schema.tables import ImportProgress


class ProgressMoved(Exception):
    """Another run of the same import moved its position since this run read it."""


def get_progress(source: str) -> dict | None:
    """The saved position of `source` (None if never imported), with its running totals and
    `text`, the saved position as stored, which save_progress needs to move it on."""
    row = ImportProgress.get_or_none(ImportProgress.source == source)
    if row is None:
        return None
    return {"position": json.loads(row.position), "records": row.records, "skipped": row.skipped, "text": row.position}


def save_progress(source: str, token: str | None, position: dict, records: int, skipped: int, now_ms: int) -> str:
    """Move `source` from the position read as `token` (None: never imported) to `position`,
    adding to its totals; the new token.

    Call inside the transaction that stores the batch the position covers: the records and
    the position then commit together, so no crash can store a batch twice or lose one. If
    another run of the same import moved the position meanwhile, ProgressMoved rolls the
    batch back: two overlapping runs never store the same rows twice.
    """
    text = json.dumps(position, separators=(",", ":"))
    if token is None:
        moved = (
            query(
                "INSERT INTO import_progress (source, position, records, skipped, updated) VALUES (?, ?, ?, ?, ?)"
                " ON CONFLICT (source) DO NOTHING",
                [source, text, records, skipped, now_ms],
            ).rowcount
            == 0
        )
    else:
        moved = (
            ImportProgress.update(
                position=text,
                records=ImportProgress.records + records,
                skipped=ImportProgress.skipped + skipped,
                updated=now_ms,
            )
            .where((ImportProgress.source == source) & (ImportProgress.position == token))
            .execute()
            == 0
        )
    if moved:
        raise ProgressMoved(source)
    return text


def forget_progress(source: str) -> None:
    """Start `source` over on its next import (its records already stored stay)."""
    ImportProgress.delete().where(ImportProgress.source == source).execute()
