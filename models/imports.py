"""Where each history import stands, so that a re-run resumes instead of duplicating records."""

import json

from peewee import EXCLUDED

from .tables import ImportProgress


def get_progress(source: str) -> dict | None:
    """The saved position of `source` (None if never imported), with its running totals."""
    row = ImportProgress.get_or_none(ImportProgress.source == source)
    if row is None:
        return None
    return {"position": json.loads(row.position), "records": row.records, "skipped": row.skipped}


def save_progress(source: str, position: dict, records: int, skipped: int, now_ms: int):
    """Move `source` to `position`, adding to its totals.

    Call inside the transaction that stores the batch the position covers: the records and
    the position then commit together, so no crash can store a batch twice or lose one.
    """
    ImportProgress.insert(
        source=source,
        position=json.dumps(position, separators=(",", ":")),
        records=records,
        skipped=skipped,
        updated=now_ms,
    ).on_conflict(
        conflict_target=[ImportProgress.source],
        update={
            ImportProgress.position: EXCLUDED.position,
            ImportProgress.records: ImportProgress.records + EXCLUDED.records,
            ImportProgress.skipped: ImportProgress.skipped + EXCLUDED.skipped,
            ImportProgress.updated: EXCLUDED.updated,
        },
    ).execute()


def forget_progress(source: str) -> None:
    """Start `source` over on its next import (its records already stored stay)."""
    ImportProgress.delete().where(ImportProgress.source == source).execute()
