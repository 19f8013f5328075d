"""Command-line tools: `flask --app wsgi init`, `ingest`, and the registry of every other command."""

import csv
import hashlib
import itertools
import json
import os
import secrets
import sys

import click
from flask import current_app
from flask.cli import with_appcontext

import models
from models.clock import now_ms
from schemas.csv_format import record_from_csv
from schemas.records import RecordError, parse_records

from .auth.keys import keys
from .backup import backup_command
from .feeds.commands import collect_dnstap_command, feed_sink, import_adguard_command, import_pihole_command
from .feeds.common import Batch, Summary, feed
from .feeds.sinks import FeedError
from .requests import loads
from .retention import retention_command


def register(app):
    app.cli.add_command(init_command)
    app.cli.add_command(ingest_command)
    app.cli.add_command(import_pihole_command)
    app.cli.add_command(import_adguard_command)
    app.cli.add_command(collect_dnstap_command)
    app.cli.add_command(keys)
    app.cli.add_command(retention_command)
    app.cli.add_command(backup_command)


@click.command("init")
@with_appcontext
def init_command():
    """Create the schema, and an operator API key on first start if none is configured."""
    config_path = os.path.join(current_app.instance_path, "config.py")
    if os.environ.get("ANALYTICS_API_KEY"):
        click.echo("API key: the one in ANALYTICS_API_KEY.")
    elif current_app.config.get("ANALYTICS_API_KEY"):
        click.echo(f"API key: ANALYTICS_API_KEY in {config_path}.")
    else:
        key = secrets.token_urlsafe(32)
        os.makedirs(current_app.instance_path, exist_ok=True)
        with open(config_path, "a", encoding="utf-8") as config:
            config.write(f"\n# Operator API key, generated on first start.\nANALYTICS_API_KEY = {key!r}\n")
        os.chmod(config_path, 0o600)
        click.echo(f"Generated an operator API key (kept in {config_path}):\n\n    {key}\n")
        click.echo('Send it as the header "Authorization: <key>".')
    click.echo(f"Database: {current_app.config['ANALYTICS_DATABASE']}")


@click.command("ingest")
@click.argument("files", nargs=-1, type=click.Path(allow_dash=True, dir_okay=False))
@click.option(
    "--batch-size", default=5000, show_default=True, type=click.IntRange(1, 10_000), help="Records per transaction."
)
@click.option("--url", help="Push to the service at this base URL instead of the local store.")
@click.option(
    "--key", envvar="ANALYTICS_FEED_KEY", help="With --url: an API key with the ingest scope (or ANALYTICS_FEED_KEY)."
)
@click.option("--spool", type=click.Path(file_okay=False), help="With --url: where batches wait [instance/spool].")
@with_appcontext
def ingest_command(files, batch_size, url, key, spool):
    """Store records from NDJSON, JSON or CSV-export files ('-' or nothing: standard input).

    Each batch is stored all or nothing; at a bad record the import stops, and the batches
    before it stay stored (the message says how many records that is). With --url the files
    are pushed as a feed: bad records are skipped and counted, and a re-run of the same file
    goes on after the records already spooled.
    """
    if url:
        _push_files(files or ("-",), batch_size, url, key, spool)
        return
    total = 0
    for name in files or ("-",):
        stream = click.open_file(name, "rb")
        size = os.fstat(stream.fileno()).st_size if name != "-" else 0
        with stream, models.connection():
            stored = 0
            for batch in _batches(_read_records(stream), batch_size):
                try:
                    records = parse_records(batch, now_ms())
                except RecordError as exc:
                    raise click.ClickException(
                        f"{name}: record {stored + exc.index + 1}: field '{exc.field}' "
                        f"{exc.message}. {total + stored} records were stored before it."
                    ) from None
                stored += models.store_records(records)
                _progress(name, stored, stream, size)
        total += stored
        if size > 1 << 20 or name == "-":
            click.echo("", err=True)
    click.echo(f"Stored {total} records.")


def _push_files(names, batch_size, url, key, spool):
    """The files as a feed to another service (see app/feeds/sinks.py): a file is known by its
    path and its first record, its position is the number of records read from it."""
    total = Summary()
    try:
        sink = feed_sink(url, key, spool)
        with sink:
            for name in names:
                with click.open_file(name, "rb") as stream:
                    records = _read_records(stream)
                    first = next(records, None)
                    if first is None:
                        continue
                    records = itertools.chain([first], records)
                    if name == "-":
                        source = f"stdin:{secrets.token_hex(8)}"  # standard input cannot be read again
                    else:
                        digest = hashlib.sha256(json.dumps(first, sort_keys=True).encode()).hexdigest()[:32]
                        source = f"file:{os.path.abspath(name)}:{digest}"
                    done = sink.position(source).get("records", 0)
                    batches = _file_batches(records, batch_size, done)
                    total.add(feed(source, batches, sink, start=0, end=0, label=name, announce=False))
        waiting = sink.pending()  # after closing the sink, which waits for the spool to drain
    except FeedError as exc:
        raise click.ClickException(str(exc)) from None
    click.echo(f"Sent {total.stored} records to {url}; {total.describe()}.")
    if waiting:
        click.echo(f"{waiting} batches wait in the spool: the next run sends them first.")


def _file_batches(items, size, done):
    """Batches (app.feeds.common.Batch) of a file's records after the first `done`."""
    for index, batch in enumerate(_batches(items, size)):
        reached = (index + 1) * size if len(batch) == size else index * size + len(batch)
        if reached <= done:
            continue
        yield Batch(batch[max(done - index * size, 0) :], 0, {"records": reached}, reached)


def _read_records(stream):
    """Records from a stream of NDJSON, a JSON array, {"records": [...]}, or the CSV export."""
    first = stream.readline()
    if first.lstrip(b"\xef\xbb\xbf").startswith(b"timestamp,"):
        yield from _read_csv(first, stream)
        return
    try:
        head = loads(first.decode("utf-8", "replace")) if first.strip() else None
    except ValueError:
        head = None
    if isinstance(head, dict) and "records" not in head:
        yield head  # NDJSON: one record per line
        for number, line in enumerate(stream, start=2):
            if line.strip():
                try:
                    yield loads(line.decode("utf-8", "replace"))
                except ValueError:
                    raise click.ClickException(f"line {number} is not valid JSON") from None
        return
    try:
        body = loads((first + stream.read()).decode("utf-8", "replace"))
    except ValueError:
        raise click.ClickException("not NDJSON nor a JSON array of records") from None
    items = body.get("records") if isinstance(body, dict) else body
    if not isinstance(items, list):
        raise click.ClickException('expected a JSON array, {"records": [...]}, or NDJSON')
    yield from items


def _read_csv(header: bytes, stream):
    """Records from GET /v2/activity-log/csv output (header row first)."""
    lines = (line.decode("utf-8") for line in itertools.chain([header], stream))
    for row in csv.DictReader(lines):
        yield record_from_csv(row)


def _batches(items, size):
    batch = []
    for item in items:
        batch.append(item)
        if len(batch) >= size:
            yield batch
            batch = []
    if batch:
        yield batch


def _progress(name, stored, stream, size):
    """A progress line on stderr for large files and for standard input."""
    if name == "-":
        click.echo(f"\r{stored} records", nl=False, err=True)
    elif size > 1 << 20:
        percent = 100 * stream.tell() / size
        click.echo(f"\r{name}: {stored} records ({percent:.0f}%)", nl=False, err=True)
    sys.stderr.flush()
