"""The record-file source: NDJSON, a JSON array, {"records": [...]}, or the service's own CSV
export, from files or standard input.

A file is known by its path and its first record; its position is the number of records read
from it, so a run over the same file goes on after the records already committed. Standard
input cannot be read again: each run is a source of its own.
"""

import csv
import hashlib
import itertools
import json
import os
import secrets
from collections.abc import Iterator

import click
import orjson

from schemas.csv_format import record_from_csv

from .common import Batch, SourceError
from .source import Reading

# A bar only for files this large: smaller ones are done before it could say anything.
BAR_BYTES = 1 << 20


class FileSource:
    """A record file at `name` ('-': standard input), a feeds.source.Source: one reading, its
    records after those already committed, in batches of `size`."""

    def __init__(self, name: str, size: int):
        self.name, self.size = name, size

    def keys(self) -> list[str]:
        if self.name == "-":
            return []  # each run of standard input is a source of its own
        with open(self.name, "rb") as stream:
            first = next(read_records(stream), None)
        return [] if first is None else [source_key(self.name, first)]

    def readings(self, position, announce: bool) -> Iterator[Reading]:
        with click.open_file(self.name, "rb") as stream:
            records = read_records(stream)
            first = next(records, None)
            if first is None:
                return
            key = source_key(self.name, first)
            size = os.fstat(stream.fileno()).st_size if self.name != "-" else 0
            yield Reading(
                key,
                batches(itertools.chain([first], records), self.size, position(key).get("records", 0), stream),
                start=0,
                end=size,
                label=self.name,
                bar=announce and size > BAR_BYTES,
                once=self.name == "-",
            )


def source_key(name: str, first: dict) -> str:
    if name == "-":
        return f"stdin:{secrets.token_hex(8)}"
    digest = hashlib.sha256(json.dumps(first, sort_keys=True).encode()).hexdigest()[:32]
    return f"file:{os.path.abspath(name)}:{digest}"


def read_records(stream) -> Iterator:
    """The items of a binary stream (not yet validated: each is what the file holds). Raises
    SourceError for what is no record file at all."""
    first = stream.readline()
    if first.lstrip(b"\xef\xbb\xbf").startswith(b"timestamp,"):
        lines = (line.decode("utf-8") for line in itertools.chain([first], stream))
        yield from (record_from_csv(row) for row in csv.DictReader(lines))
        return
    try:
        head = _loads(first) if first.strip() else None
    except orjson.JSONDecodeError:
        head = None
    if isinstance(head, dict) and "records" not in head:
        yield head  # NDJSON: one record per line
        for number, line in enumerate(stream, start=2):
            if line.strip():
                try:
                    yield _loads(line)
                except orjson.JSONDecodeError:
                    raise SourceError(f"line {number} is not valid JSON") from None
        return
    try:
        body = _loads(first + stream.read())
    except orjson.JSONDecodeError:
        raise SourceError("not NDJSON nor a JSON array of records") from None
    items = body.get("records") if isinstance(body, dict) else body
    if not isinstance(items, list):
        raise SourceError('expected a JSON array, {"records": [...]}, or NDJSON')
    yield from items


def _loads(data: bytes):
    # Bytes that are not UTF-8 become U+FFFD, and the validator then judges the record.
    return orjson.loads(data.decode("utf-8", "replace"))


def batches(items: Iterator, size: int, done: int, stream=None) -> Iterator[Batch]:
    """Batches of `size` items after the first `done`; each batch's position is the number of
    items read up to its end. Progress (Batch.done): bytes of `stream` read, when it is a file."""
    for index, batch in enumerate(_chunks(items, size)):
        reached = index * size + len(batch)
        if reached <= done:
            continue
        read = _tell(stream)
        yield Batch(batch[max(done - index * size, 0) :], 0, {"records": reached}, read)


def _chunks(items, size):
    batch = []
    for item in items:
        batch.append(item)
        if len(batch) >= size:
            yield batch
            batch = []
    if batch:
        yield batch


def _tell(stream) -> int:
    try:
        return stream.tell()
    except (AttributeError, OSError, ValueError):
        return 0
