"""The feeds' commands: `flask --app wsgi import-pihole PATH`, `import-adguard PATH` and `collect-dnstap`."""

import asyncio
import contextlib
import os
import sys

import click
from flask.cli import with_appcontext

import models
from models.imports import forget_progress, get_progress
from schemas.records import MAX_ID_LENGTH

from . import adguard, dnstap, pihole
from .collector import Collector
from .common import SourceError, Summary, import_batches
from .sinks import make_sink

# Enough for any query log entry; a longer first "line" is no query log (and is not read whole).
FIRST_LINE_LIMIT = 1 << 20


def _endpoint(ctx, param, value: str) -> str:
    if not value.strip() or len(value) > MAX_ID_LENGTH:
        raise click.BadParameter(f"must be 1 to {MAX_ID_LENGTH} characters")
    return value


def _options(default_endpoint: str):
    """PATH and the options both commands take."""

    def decorate(command):
        command = click.option(
            "--restart",
            is_flag=True,
            help="Forget the saved position and import from the start: records already "
            "imported are then stored a second time.",
        )(command)
        command = click.option(
            "--batch-size",
            default=5000,
            show_default=True,
            type=click.IntRange(min=1),
            help="Records per transaction (and per saved position).",
        )(command)
        command = click.option(
            "--endpoint",
            default=default_endpoint,
            show_default=True,
            callback=_endpoint,
            help="endpointId of the imported records.",
        )(command)
        return click.argument("path", type=click.Path(exists=True, dir_okay=False))(command)

    return decorate


@click.command("import-pihole")
@_options("pihole")
@with_appcontext
def import_pihole_command(path, endpoint, batch_size, restart):
    """Import query history from Pi-hole's FTL database (pihole-FTL.db), opened read-only.

    Re-running it imports only the queries added since (it resumes after the last query id
    it stored), also after an interruption.
    """
    try:
        with contextlib.closing(pihole.open_database(path)) as source, models.connection():
            key = f"pihole:{endpoint}:{pihole.identity(source, path)}"
            after = _start(key, restart).get("id", 0)
            last = pihole.last_query_id(source)
            if after:
                click.echo(f"Resuming after query id {after}.", err=True)
            summary = import_batches(
                key,
                pihole.batches(source, after, last, batch_size, endpoint, pihole.read_network(source)),
                start=after,
                end=last,
                label=f"Importing {os.path.basename(path)}",
            )
    except SourceError as exc:
        raise click.ClickException(f"{path}: {exc}") from None
    _report(summary, path, endpoint)


@click.command("import-adguard")
@_options("adguard")
@with_appcontext
def import_adguard_command(path, endpoint, batch_size, restart):
    """Import query history from AdGuard Home's query log (querylog.json), line by line.

    Re-running it imports only the lines added since, also after an interruption or after
    AdGuard rotated the file to querylog.json.1 (a file is known by its first line).
    """
    try:
        with open(path, "rb") as stream, models.connection():
            first = stream.readline(FIRST_LINE_LIMIT)
            if not first:
                click.echo(f"{path} is empty: nothing to import.")
                return
            adguard.check_first_line(first)
            key = f"adguard:{endpoint}:{adguard.identity(first)}"
            position = _start(key, restart)
            offset = adguard.resume_offset(stream, position)
            if offset:
                click.echo(f"Resuming after line {position['line']}.", err=True)
            size = os.fstat(stream.fileno()).st_size
            summary = import_batches(
                key,
                adguard.batches(stream, offset, position.get("line", 0), size, batch_size, endpoint),
                start=offset,
                end=size,
                label=f"Importing {os.path.basename(path)}",
            )
    except OSError as exc:
        raise click.ClickException(f"{path}: {exc.strerror or exc}") from None
    except SourceError as exc:
        raise click.ClickException(f"{path}: {exc}") from None
    _report(summary, path, endpoint)


def _start(key: str, restart: bool) -> dict:
    """The saved position of `key` ({} for none), after forgetting it on --restart."""
    if restart:
        with models.write_transaction():
            forget_progress(key)
    saved = get_progress(key)
    return saved["position"] if saved else {}


def _report(summary: Summary, path: str, endpoint: str) -> None:
    click.echo(f"Imported {summary.stored} records from {path} into endpoint '{endpoint}'; {summary.describe()}.")


def _host_port(ctx, param, value: str | None) -> tuple[str, int] | None:
    if value is None:
        return None
    host, _, port = value.rpartition(":")
    if not host or not port.isdigit() or not 0 < int(port) < 65536:
        raise click.BadParameter("must be HOST:PORT, e.g. 127.0.0.1:6000 or [::1]:6000")
    return host.strip("[]"), int(port)


def _octal(ctx, param, value: str) -> int:
    try:
        return int(value, 8)
    except ValueError:
        raise click.BadParameter("must be octal permissions, e.g. 660") from None


@click.command("collect-dnstap")
@click.option("--socket", "socket_path", type=click.Path(dir_okay=False), help="Unix socket to listen on.")
@click.option("--listen", metavar="HOST:PORT", callback=_host_port, help="TCP address to listen on.")
@click.option("--endpoint", default="dnstap", show_default=True, callback=_endpoint, help="endpointId of the records.")
@click.option(
    "--client-map",
    type=click.File(encoding="utf-8"),
    help="File of 'address-or-network name' lines: the clientId of those clients.",
)
@click.option("--blocked-answer", multiple=True, metavar="IP", help="An answer with this address is a block.")
@click.option("--blocked-rcode", multiple=True, metavar="RCODE", help="A response with this rcode is a block.")
@click.option("--blocked-zone", multiple=True, metavar="ZONE", help="Every answer in this zone is a block.")
@click.option("--batch-size", default=500, show_default=True, type=click.IntRange(1, 50_000), help="Records per batch.")
@click.option(
    "--batch-delay",
    default=1.0,
    show_default=True,
    type=click.FloatRange(0.01, 60),
    help="Seconds a record may wait for its batch to fill.",
)
@click.option(
    "--max-pending",
    default=100_000,
    show_default=True,
    type=click.IntRange(min=1),
    help="Records kept while the store is slow or failing; newer ones are dropped past that.",
)
@click.option("--socket-mode", default="660", show_default=True, callback=_octal, help="The Unix socket's permissions.")
@with_appcontext
def collect_dnstap_command(socket_path, listen, endpoint, client_map, socket_mode, **options):
    """Receive dnstap from resolvers and store every client response as a record.

    Runs until SIGTERM or SIGINT, then stores what it holds and exits. The --blocked-*
    options repeat.
    """
    if not socket_path and not listen:
        raise click.UsageError("give --socket PATH and/or --listen HOST:PORT")
    try:
        rules = dnstap.BlockRules(*(options.pop(f"blocked_{kind}") for kind in ("answer", "rcode", "zone")))
        clients = dnstap.ClientMap(client_map) if client_map else dnstap.ClientMap()
    except ValueError as exc:
        raise click.UsageError(str(exc)) from None
    collector = Collector(
        dnstap.Decoder(endpoint, rules, clients),
        make_sink(),
        log=lambda line: click.echo(line, err=True),
        **options,
    )
    try:
        status = asyncio.run(collector.run(socket_path, listen, socket_mode))
    except OSError as exc:
        raise click.ClickException(str(exc)) from None
    sys.exit(status)
