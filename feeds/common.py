"""What every feed shares: validation of its wire records, batches committed to a sink together
with the source's position, the progress bar and the closing summary."""

import collections
import contextlib
import hashlib
import ipaddress
import json
import os
import sys
from dataclasses import dataclass, field

import click
import orjson

from models.runtime.clock import now_ms
from schemas import record_batch
from schemas.datetimes import format_ms
from schemas.records import RecordError, count_older, parse_record


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
    past_retention: int = 0  # stored records already older than the retention horizon
    aged_out: int = 0  # records the source deleted before the feed read them

    @property
    def skipped(self) -> int:
        return self.unreadable + sum(self.rejected.values())

    def add(self, other: "Summary"):
        self.stored += other.stored
        self.unreadable += other.unreadable
        self.rejected.update(other.rejected)
        self.past_retention += other.past_retention
        self.aged_out += other.aged_out

    def describe(self) -> str:
        if not self.skipped:
            return "nothing skipped"
        parts = [f"{count} rejected ({name})" for name, count in sorted(self.rejected.items())]
        if self.unreadable:
            parts.insert(0, f"{self.unreadable} unreadable")
        return f"skipped {self.skipped}: " + ", ".join(parts)


def feed(
    source: str, batches, sink, *, start: int, end: int, label: str, horizon_ms=None, stop=None, announce=True
) -> Summary:
    """Validate each batch and commit it to `sink` with the position the source reaches.

    Records the validator rejects are skipped and counted, never fatal: one bad row in years
    of history must not stop the import. `horizon_ms`: the retention horizon, to count the
    records that are older; `stop`, an event that ends the feed between two batches."""
    summary = Summary()
    # Following a source, each look is short and frequent: no bar, or the log fills with them.
    bar = click.progressbar(length=max(end - start, 1), label=label, file=sys.stderr) if announce else None
    shown = start
    with bar or contextlib.nullcontext():
        for batch in batches:
            if stop is not None and stop.is_set():
                break
            sink.check()
            records, wire, rejected = validate(batch.records, now_ms(), (sink.rejects_path(source), source))
            sink.commit(source, records, wire, batch.position, batch.unreadable + sum(rejected.values()))
            summary.stored += len(records)
            summary.unreadable += batch.unreadable
            summary.rejected.update(rejected)
            if horizon_ms is not None:
                summary.past_retention += count_older(records, horizon_ms)
            reached = min(batch.done, end)
            if bar is not None and reached > shown:
                bar.update(reached - shown)
                shown = reached
    return summary


def feed_source(source, sink, *, horizon_ms=None, stop=None, announce=True) -> Summary:
    """Commit every reading of `source` (a feeds.source.Source) to `sink`, each from the
    position the sink holds for it; their summary."""
    summary = Summary()
    with contextlib.closing(source.readings(sink.position, announce)) as readings:
        for reading in readings:
            part = feed(
                reading.key,
                reading.batches,
                sink,
                start=reading.start,
                end=reading.end,
                label=reading.label,
                horizon_ms=horizon_ms,
                stop=stop,
                announce=reading.bar,
            )
            # Counted once the position moved past the gap (a batch was committed), so that a
            # pass stopped before its first batch does not count it again on the next one.
            if part.stored or part.skipped:
                part.aged_out = reading.aged_out
            if reading.once:
                sink.forget(reading.key)
            summary.add(part)
    return summary


def validate(
    items, received_ms: int, rejects: tuple[str, str] | None = None
) -> tuple[list, list[dict], collections.Counter]:
    """The records the validator accepts (as the store takes them, and as they came), and the
    rejections by field; with `rejects` (the bad-record file's path, the source), each rejected
    record is set aside there with what is wrong with it."""
    records, wire, refused = [], [], []
    rejected = collections.Counter()
    for item in items:
        try:
            records.append(parse_record(item, received_ms))
            wire.append(item)
        except RecordError as exc:
            rejected[exc.field.split(".")[0].split("[")[0]] += 1
            refused.append((item, f"field '{exc.field}' {exc.message}"))
    if refused and rejects is not None:
        set_aside(rejects[0], rejects[1], refused)
    return records, wire, rejected


def validate_text(body: bytes, received_ms: int, rejects: tuple[str, str] | None = None):
    """`validate` for a batch given as the JSON text of its wire records: read the fast way
    (schemas/record_batch.py, as POST /v2/ingest reads a body, ~4 against ~11 us a record)
    when it holds no doubt, else record by record as `validate` does (a bad record is refused
    and set aside alone, never its batch). The records the store takes, and the rejections by
    field."""
    decoded = record_batch.decode(body, ndjson=False)
    records = None if decoded is None else record_batch.records(decoded, received_ms)
    if records is not None:
        return records, collections.Counter()
    records, _, rejected = validate(orjson.loads(body), received_ms, rejects)
    return records, rejected


def rejects_name(source: str) -> str:
    """The bad-record file's name of a source, in its sink's folder for them."""
    return f"rejected-{hashlib.sha256(source.encode()).hexdigest()[:24]}.ndjson"


def set_aside(path: str, source: str, refused: list[tuple[object, str]]) -> None:
    """Append refused records to the bad-record file at `path`, a JSON line each (the source,
    when, why, the record as it came), for the operator to fix and ingest again: a record
    refused is never tried again by the feed, and never silently gone."""
    os.makedirs(os.path.dirname(path), exist_ok=True)
    at = format_ms(now_ms())
    with open(path, "a", encoding="utf-8") as handle:
        for item, error in refused:
            line = {"source": source, "refusedAt": at, "error": error, "record": item}
            handle.write(json.dumps(line, ensure_ascii=False, default=str) + "\n")


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
