"""The feeds' program, `dns-analytics-feed` (also `python -m feeds`): `ingest FILE...`,
`import-pihole PATH` and `import-adguard PATH` (once or following the source), and
`collect-dnstap`, into this installation's store or pushed to another service with --url; and
`migrate [--check]`, the store's schema version and the steps due.

It reads the installation's settings as the service does (models.runtime.config) and opens the local
store only when it writes to it. `flask --app wsgi <command>` runs the same commands on the
web app's settings and store (app/commands/feeds.py hands them over as a Host).
"""

import asyncio
import contextlib
import os
import signal
import sys
import threading
from dataclasses import dataclass, field

import click

import models.clickhouse.target
import models.engine.database
import models.migrations.run
import models.migrations.steps
import models.runtime.config
import models.stores.bound
import models.stores.interface
import schemas.geoip
import schemas.record_times
from models.runtime.clock import now_ms
from models.schema.tables import SCHEMA_VERSION
from schemas.records import MAX_ID_LENGTH

from . import adguard, dnstap, files, pihole
from .collector import BATCH_DELAY, BATCH_IDLE, Collector
from .common import SourceError, Summary, feed_source
from .losses import Losses
from .sinks import FeedError, LiveSink, LocalSink, StoreProcess, make_sink
from .source import Source

HOST = "dns_analytics.host"  # click's ctx.meta key of the Host a program running the commands gives


@dataclass
class Host:
    """What the commands run on: the installation's settings, and how to reach its store."""

    settings: dict
    instance_path: str
    # Binds models.engine.database.db to the local store (and makes its schema); called only by a
    # command that writes to it.
    open_store: object = field(default=None)

    def store(self):
        if self.open_store is not None:
            self.open_store()
            self.open_store = None


def _host() -> Host:
    meta = click.get_current_context().meta
    if HOST not in meta:
        try:
            settings = models.runtime.config.read()
        except RuntimeError as refusal:  # a bad setting, an unreadable settings file: one line
            raise click.ClickException(str(refusal)) from None
        meta[HOST] = Host(settings, models.runtime.config.INSTANCE_PATH, open_store=_open_local_store)
        # Every feed validates its records (with --url too, before they are spooled).
        schemas.record_times.configure(meta[HOST].settings)
    return meta[HOST]


def _open_local_store():
    settings = _bind_local_store()
    models.stores.bound.records().configure(settings)  # a feed's batches freeze what passed the hot horizon
    try:
        models.stores.bound.records().open()
    except models.clickhouse.target.BadTarget as refusal:  # a chDB folder another process has open
        raise click.ClickException(str(refusal)) from None
    with models.engine.database.connection(), _refusing_a_newer_database():
        models.migrations.run.create_schema()
    # The local store enriches what it stores (models/ingest/enrichment.py); a feed pushing with --url
    # sends its records as they came, and the service enriches them.
    schemas.geoip.configure(*_geoip_paths(settings))


def _bind_local_store() -> dict:
    """Bind models.engine.database.db and the record store to the installation's, running
    nothing; its settings."""
    settings = _host().settings
    try:
        store = models.stores.bound.for_settings(settings)
    except models.clickhouse.target.BadTarget as refusal:
        raise click.ClickException(str(refusal)) from None
    models.engine.database.open_database(settings["ANALYTICS_DATABASE"], settings["ANALYTICS_WAL_LIMIT_MB"] << 20)
    models.stores.bound.bind(store)
    return settings


@contextlib.contextmanager
def _refusing_a_newer_database():
    """A database a newer release has used refused in its one line, without a traceback."""
    try:
        yield
    except models.migrations.run.NewerDatabase as refusal:
        raise click.ClickException(str(refusal)) from None


def _geoip_paths(settings: dict) -> tuple:
    return settings["ANALYTICS_GEOIP_DB"] or None, settings["ANALYTICS_ASN_DB"] or None


def _endpoint(ctx, param, value: str) -> str:
    if not value.strip() or len(value) > MAX_ID_LENGTH:
        raise click.BadParameter(f"must be 1 to {MAX_ID_LENGTH} characters")
    return value


def feed_options(default_endpoint: str, default_interval: float):
    """The options of every feed command: the endpoint, batches, following, and the sink."""

    def decorate(command):
        for option in reversed(
            [
                click.option(
                    "--endpoint",
                    default=default_endpoint,
                    show_default=True,
                    callback=_endpoint,
                    help="endpointId of the records.",
                ),
                click.option(
                    "--batch-size",
                    default=5000,
                    show_default=True,
                    type=click.IntRange(min=1, max=10_000),
                    help="Records per transaction (and per saved position).",
                ),
                click.option("--follow", is_flag=True, help="Keep running and pick up what the source adds."),
                click.option(
                    "--interval",
                    default=default_interval,
                    show_default=True,
                    type=click.FloatRange(min=0.05),
                    help="With --follow: seconds between two looks at the source.",
                ),
            ]
        ):
            command = option(command)
        return push_options(command)

    return decorate


def push_options(command):
    """--url, --key and --spool: every feed can push to another installation."""
    command = click.option(
        "--spool",
        type=click.Path(file_okay=False),
        help="With --url: where batches wait until delivered [default: instance/spool].",
    )(command)
    command = click.option(
        "--key",
        envvar="ANALYTICS_FEED_KEY",
        help="With --url: an API key with the ingest scope (or set ANALYTICS_FEED_KEY).",
    )(command)
    return click.option("--url", help="Push to the service at this base URL instead of the local store.")(command)


def _restart_option(command):
    return click.option(
        "--restart",
        is_flag=True,
        help="Forget the saved position and import from the start: records already "
        "imported are then stored a second time.",
    )(command)


@click.command("import-pihole")
@click.argument("path", type=click.Path(exists=True, dir_okay=False))
@feed_options("pihole", 60.0)
@_restart_option
def import_pihole_command(path, endpoint, batch_size, follow, interval, url, key, spool, restart):
    """Import query history from Pi-hole's FTL database (pihole-FTL.db), opened read-only.

    Re-running it imports only the queries added since (it resumes after the last query it
    stored), also after an interruption or after FTL's table was flushed. FTL writes its
    database once a minute, hence --interval's default.
    """
    _run(pihole.PiholeSource(path, endpoint, batch_size), endpoint, follow, interval, (url, key, spool), restart)


@click.command("import-adguard")
@click.argument("path", type=click.Path(exists=True, dir_okay=False))
@feed_options("adguard", 10.0)
@_restart_option
def import_adguard_command(path, endpoint, batch_size, follow, interval, url, key, spool, restart):
    """Import query history from AdGuard Home's query log (querylog.json), line by line.

    Re-running it imports only the lines added since, also after an interruption or after
    AdGuard rotated the file to querylog.json.1 (a file is known by its first line). Each
    look first finishes querylog.json.1, so nothing written just before a rotation is lost.
    """
    _run(adguard.AdguardSource(path, endpoint, batch_size), endpoint, follow, interval, (url, key, spool), restart)


def _run(source: Source, endpoint, follow, interval, remote, restart):
    """Feed `source` once, or with `follow` until SIGTERM/SIGINT; --restart first forgets the
    positions of its keys."""
    path = source.name
    url, key, spool = remote
    stop = _stop_on_signals() if follow else threading.Event()
    total = Summary()
    try:
        sink = feed_sink(url, key, spool)
        with _store_connection(sink), sink:
            losses = Losses(endpoint, sink.report_losses, lambda line: click.echo(line, err=True))
            if restart:
                for saved in source.keys():
                    sink.forget(saved)
            announce = True
            while True:
                try:
                    summary = feed_source(source, sink, horizon_ms=_horizon(sink), stop=stop, announce=announce)
                    announce = False
                except SourceError as exc:
                    if not follow:
                        raise
                    # A source can be briefly unreadable (FTL holding a lock, a rotation in
                    # progress): the next look tries again.
                    click.echo(f"{path}: {exc}; trying again in {interval:g} s", err=True)
                    summary = Summary()
                sink.check()
                total.add(summary)
                if summary.aged_out:
                    losses.add("source-aged-out", summary.aged_out)
                losses.flush()
                if follow and summary.stored:
                    click.echo(f"Imported {summary.stored} new records into '{endpoint}'.", err=True)
                if not follow or stop.wait(interval):
                    break
        waiting = sink.pending()  # after closing the sink, which waits for the spool to drain
    except SourceError as exc:
        raise click.ClickException(f"{path}: {exc}") from None
    except FeedError as exc:
        raise click.ClickException(f"{path}: {exc}") from None
    except OSError as exc:
        raise click.ClickException(f"{path}: {exc.strerror or exc}") from None
    _report(total, path, endpoint, url, waiting)


def _horizon(sink) -> int | None:
    """The retention horizon of the local store (None: no retention, or a remote service)."""
    return models.runtime.config.horizon_ms(_host().settings, now_ms()) if isinstance(sink, LocalSink) else None


def feed_sink(url: str | None, key: str | None, spool: str | None):
    """The sink of a feed command's --url, --key and --spool (default spool: instance/spool);
    the local store is opened only for a local sink."""
    host = _host()
    sink = make_sink(
        url, key, spool, os.path.join(host.instance_path, "spool"), os.path.join(host.instance_path, "rejected")
    )
    if isinstance(sink, LocalSink):
        host.store()
    return sink


def _store_connection(sink):
    """A connection to the local store for the run, when the sink is the local store."""
    return models.engine.database.connection() if isinstance(sink, LocalSink) else contextlib.nullcontext()


def _stop_on_signals() -> threading.Event:
    stop = threading.Event()
    for number in (signal.SIGTERM, signal.SIGINT):
        signal.signal(number, lambda *_: stop.set())
    return stop


def _report(summary: Summary, path: str, endpoint: str, url: str | None, waiting: int) -> None:
    target = f"the service at {url}" if url else f"endpoint '{endpoint}'"
    click.echo(f"Imported {summary.stored} records from {path} into {target}; {summary.describe()}.")
    if summary.aged_out:
        click.echo(f"{summary.aged_out} records were deleted by the source before they could be imported.")
    if summary.past_retention:
        settings = _host().settings
        days = settings["ANALYTICS_RETENTION_DAYS"]
        kept = models.runtime.config.statistics_days(settings)
        click.echo(
            f"{summary.past_retention} of them are older than the records' horizon "
            f"(ANALYTICS_RETENTION_DAYS={days}): their statistics are kept "
            f"{f'{kept} days' if kept else 'forever'} (ANALYTICS_STATISTICS_RETENTION_DAYS); "
            "the next retention run deletes the records themselves."
        )
    if waiting:
        click.echo(f"{waiting} batches wait in the spool: the next run sends them first.")


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
@click.option(
    "--batch-size",
    type=click.IntRange(1, 50_000),
    help="Records per batch [default: 500; 5,000 into a local ClickHouse store].",
)
@click.option(
    "--batch-delay",
    default=BATCH_DELAY,
    show_default=True,
    type=click.FloatRange(0.01, 60),
    help="Seconds a record may wait for its batch to fill.",
)
@click.option(
    "--batch-idle",
    default=BATCH_IDLE,
    show_default=True,
    type=click.FloatRange(0.001, 60),
    help="Seconds without a message from the resolvers after which a batch goes unfilled.",
)
@click.option(
    "--max-pending",
    default=100_000,
    show_default=True,
    type=click.IntRange(min=1),
    help="Records kept while the store is slow or failing; newer ones are dropped past that.",
)
@click.option("--socket-mode", default="660", show_default=True, callback=_octal, help="The Unix socket's permissions.")
@click.option(
    "--answer-within",
    default=dnstap.PENDING_SECONDS,
    show_default=True,
    type=click.FloatRange(1, 3600),
    help="Seconds a logged query waits for its response before it is counted unanswered.",
)
@push_options
def collect_dnstap_command(
    socket_path, listen, endpoint, client_map, socket_mode, answer_within, url, key, spool, **options
):
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
    settings = _host().settings
    store = StoreProcess(
        settings["ANALYTICS_DATABASE"],
        settings["ANALYTICS_RECORD_STORE"],
        settings["ANALYTICS_WAL_LIMIT_MB"] << 20,
        _geoip_paths(settings),
        settings["ANALYTICS_HOT_HOURS"],
        settings["ANALYTICS_FUTURE_TOLERANCE_SECONDS"],
    )
    try:
        with feed_sink(url, key, spool) as sink:
            # (the batch the store takes best: the local one's, a SQL store's for a service elsewhere)
            feeding = models.stores.interface.RecordStore
            if isinstance(sink, LocalSink):
                # The store's process stores the batches, and a chDB folder opens in one process:
                # this one made sure it can open it, and lets it go.
                feeding = models.stores.bound.records()
                feeding.close()
            if options["batch_size"] is None:
                options["batch_size"] = feeding.FEED_BATCH
            decoder = dnstap.Decoder(endpoint, rules, clients, answer_within=answer_within)
            collector = Collector(
                decoder,
                LiveSink(sink, decoder.name, store),
                log=lambda line: click.echo(line, err=True),
                **options,
            )
            status = asyncio.run(collector.run(socket_path, listen, socket_mode))
    except (OSError, FeedError) as exc:
        raise click.ClickException(str(exc)) from None
    finally:
        store.close()
    sys.exit(status)


@click.command("ingest")
@click.argument("names", metavar="[FILES]...", nargs=-1, type=click.Path(allow_dash=True, dir_okay=False))
@click.option(
    "--batch-size", default=5000, show_default=True, type=click.IntRange(1, 10_000), help="Records per transaction."
)
@push_options
def ingest_command(names, batch_size, url, key, spool):
    """Store records from NDJSON, JSON or CSV-export files ('-' or nothing: standard input).

    Each batch is stored all or nothing, with how far the file is read: a re-run of the same
    file goes on after the records already stored (or, with --url, spooled). A record the
    service would refuse is skipped and counted, never fatal, whichever the sink.
    """
    total = Summary()
    try:
        sink = feed_sink(url, key, spool)
        with _store_connection(sink), sink:
            for name in names or ("-",):
                try:
                    total.add(feed_source(files.FileSource(name, batch_size), sink, horizon_ms=_horizon(sink)))
                except SourceError as exc:
                    raise SourceError(f"{name}: {exc}") from None
        waiting = sink.pending()  # after closing the sink, which waits for the spool to drain
    except (SourceError, FeedError) as exc:
        raise click.ClickException(str(exc)) from None
    if url:
        click.echo(f"Sent {total.stored} records to {url}; {total.describe()}.")
    else:
        skipped = total.describe()
        click.echo(
            f"Stored {total.stored} records." + (f" {skipped[0].upper()}{skipped[1:]}." if total.skipped else "")
        )
    if waiting:
        click.echo(f"{waiting} batches wait in the spool: the next run sends them first.")


@click.command("migrate")
@click.option("--check", is_flag=True, help="Run nothing and write nothing: exit 1 when steps are due.")
def migrate_command(check):
    """Show the database's schema version, this release's and the steps due; run them.

    The service and every feed run them as they start: --check tells a deployment, before it
    starts the new release, what that start will run.
    """
    _bind_local_store()
    with models.engine.database.connection(), _refusing_a_newer_database():
        version, due = models.migrations.run.pending()
        click.echo(f"Schema version {version or 'none (a new database)'}; this release's is {SCHEMA_VERSION}.")
        for step in due:
            click.echo(f"Step {step} is due: {models.migrations.steps.summary(step)}")
        if not due:
            click.echo("No step is due.")
        if check:
            sys.exit(1 if due else 0)
        for step in models.migrations.run.create_schema():
            click.echo(f"Ran step {step}.")


@click.group("dns-analytics-feed")
def main():
    """Feed DNS queries into DNS Analytics: from record files, Pi-hole, AdGuard Home, or
    resolvers' dnstap; into this installation's store, or with --url into a service elsewhere."""


# The commands that feed records; `flask --app wsgi` runs them too (app/commands/feeds.py), but
# not `migrate`: the web app's start has run the steps before any of its commands.
FEED_COMMANDS = (ingest_command, import_pihole_command, import_adguard_command, collect_dnstap_command)
for _command in (*FEED_COMMANDS, migrate_command):
    main.add_command(_command)
