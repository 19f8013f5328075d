"""What both importers share: validation of their wire records, batches stored together with
the import's position, the progress bar and the closing summary."""

import collections
import functools
import ipaddress
import sys
from dataclasses import dataclass, field

import click

import models
from models.clock import now_ms
from models.imports import save_progress
from schemas.records import RecordError, parse_record


class SourceError(Exception):
    """The source as a whole cannot be imported (not the expected format, changed, ...)."""


class SkipRow(ValueError):
    """One entry of the source cannot even be made into a wire record (e.g. it has no time)."""


@dataclass
class Batch:
    records: list[dict]  # wire records (QueryData), not yet validated
    unreadable: int  # entries of the source that could not be made into records
    position: dict  # where the source stands once this batch is stored
    done: int  # progress-bar units (query ids, file bytes) reached with this batch


@dataclass
class Summary:
    stored: int = 0
    unreadable: int = 0
    rejected: collections.Counter = field(default_factory=collections.Counter)  # by field

    @property
    def skipped(self) -> int:
        return self.unreadable + sum(self.rejected.values())

    def describe(self) -> str:
        if not self.skipped:
            return "nothing skipped"
        parts = [f"{count} rejected ({name})" for name, count in sorted(self.rejected.items())]
        if self.unreadable:
            parts.insert(0, f"{self.unreadable} unreadable")
        return f"skipped {self.skipped}: " + ", ".join(parts)


def import_batches(source: str, batches, *, start: int, end: int, label: str) -> Summary:
    """Validate and store each batch, moving `source`'s saved position in the same transaction.

    Records the validator rejects are skipped and counted, never fatal: one bad row in years
    of history must not stop the import.
    """
    summary = Summary()
    bar = click.progressbar(length=max(end - start, 1), label=label, file=sys.stderr)
    shown = start
    with bar:
        for batch in batches:
            received = now_ms()
            records, rejected = _validate(batch.records, received)
            save = functools.partial(
                save_progress,
                source,
                batch.position,
                len(records),
                batch.unreadable + sum(rejected.values()),
                received,
            )
            if records:
                models.store_records(records, in_transaction=save)
            else:
                with models.write_transaction():
                    save()
            summary.stored += len(records)
            summary.unreadable += batch.unreadable
            summary.rejected.update(rejected)
            reached = min(batch.done, end)
            if reached > shown:
                bar.update(reached - shown)
                shown = reached
    return summary


def _validate(items, received_ms: int) -> tuple[list[dict], collections.Counter]:
    """The records the validator accepts (in the store's terms), and the rejections by field."""
    records = []
    rejected = collections.Counter()
    for item in items:
        try:
            records.append(parse_record(item, received_ms))
        except RecordError as exc:
            rejected[exc.field.split(".")[0].split("[")[0]] += 1
    return records, rejected


def compact(record: dict) -> dict:
    """The record without its unknown (None or empty) fields: unknown stays absent."""
    return {name: value for name, value in record.items() if value is not None and value != {}}


def ip_or_none(value) -> str | None:
    """`value` as a normalized address, or None when it is not one."""
    if not isinstance(value, str):
        return None
    try:
        return str(ipaddress.ip_address(value.strip()))
    except ValueError:
        return None


def text_or_none(value) -> str | None:
    return value if isinstance(value, str) and value else None
