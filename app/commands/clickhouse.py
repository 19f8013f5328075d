"""`flask --app wsgi copy-to-clickhouse TARGET`: the records of ANALYTICS_DATABASE copied into a
ClickHouse, resumable, their counts checked (docs/clickhouse.md "Moving an existing store into
ClickHouse"); `count-clickhouse-hours`: what an upgraded store counts from a day on, counted
for the days before it (docs/clickhouse.md "The tables")."""

import time

import click
from flask.cli import with_appcontext

import models.engine.database
from models.clickhouse import backfill, connection, copied_statistics, copying, dims, target
from models.stores.bound import records
from models.stores.clickhouse import ClickHouseStore


@click.command("copy-to-clickhouse")
@click.argument("destination", metavar="TARGET")
@click.option(
    "--batch-size",
    type=click.IntRange(1, 1_000_000),
    default=copying.BATCH,
    show_default=True,
    help="Records a batch holds at most (a batch holds one UTC day's at most).",
)
@click.option(
    "--batches",
    type=click.IntRange(1),
    default=None,
    help="Stop after this many batches (run again to go on from there).",
)
@with_appcontext
def copy_command(destination, batch_size, batches):
    """Copy the records of ANALYTICS_DATABASE into the ClickHouse TARGET, named as
    ANALYTICS_RECORD_STORE names one (clickhouse://USER:PASSWORD@HOST:8123/DATABASE or
    chdb:///ABSOLUTE/FOLDER), then the statistics they do not give (the days past the records'
    horizon, the clients not logged), and check that both hold as many records, and count as
    many in each daily statistic, per endpoint and day.

    Run again after a stop or a crash, it goes on after the last record ClickHouse holds.
    Make the last run with the service stopped: records stored meanwhile with earlier
    timestamps, and deletions, are not followed (the check names where they differ)."""
    try:
        chosen = target.parse(destination)
    except target.BadTarget as exc:
        raise click.ClickException(f"{exc}") from None
    try:
        clickhouse = connection.connect(chosen)
        copying.prepare(clickhouse)
    except connection.FolderInUse as exc:
        raise click.ClickException(f"{exc}") from None
    except Exception as exc:  # the client's own errors (refused, unknown host, no such user...): one line
        raise click.ClickException(f"cannot use the ClickHouse at {chosen}: {type(exc).__name__}: {exc}") from None
    started = time.monotonic()
    with models.engine.database.connection():
        # A line a batch, on stderr: how far a long copy is, and what a run cut short had stored.
        copied = copying.copy(clickhouse, batch_size, batches, lambda n: click.echo(f"{n} records copied", err=True))
        took = time.monotonic() - started
        click.echo(f"Copied {copied.records} records in {copied.batches} batches into {chosen} ({took:.1f} s).")
        if not copied.done:
            click.echo("Stopped before the newest record: run the command again to go on.")
            return
        try:
            # The records first: a day's statistics are carried as what its records do not count.
            counted = copying.check_counts(clickhouse)
            carried = copied_statistics.carry(clickhouse)
            click.echo(
                f"Statistics carried: {carried.rows} counts added over {carried.days} days, "
                f"{carried.names} names' first and last times."
            )
            days = copied_statistics.check(clickhouse)
        except copying.CountsDiffer as exc:
            raise click.ClickException(
                f"{exc}. Records stored or deleted in ANALYTICS_DATABASE while the copy ran are not "
                "followed: stop the service, empty the ClickHouse database and copy again."
            ) from None
    click.echo(
        f"Counts checked: {counted.records} records of {counted.endpoints} endpoints over {counted.days} days, "
        f"and the daily statistics of {days} days, equal per endpoint and day in both stores."
    )


@click.command("count-clickhouse-hours")
@with_appcontext
def count_hours_command():
    """Count what a ClickHouse record store made by an earlier version does not count yet (the
    hours, and each client's names a day, counted only from the day after its upgrade) for the
    days of records before that, a day at a time, then read them from the first record on: a
    24-hour top list or trend over those days reads hours instead of a day of records, a
    client's 30-day top list its days of names instead of its records. Safe while the service runs on a
    ClickHouse server (each day is counted in the writers' turn; restart the service after, as
    it reads from when the hours count once); chDB's folder takes one process, so stop the
    service first there. Run again after a stop, it goes on."""
    store = records()
    if not isinstance(store, ClickHouseStore):
        raise click.ClickException("ANALYTICS_RECORD_STORE names no ClickHouse: the SQL store counts every hour")
    try:
        clickhouse = store.connection
    except connection.FolderInUse as exc:
        raise click.ClickException(f"{exc}") from None
    with models.engine.database.connection():
        try:
            days = backfill.count_earlier(clickhouse, lambda day: click.echo(f"{dims.day_text(day)} counted", err=True))
        except backfill.UnderWay as exc:
            raise click.ClickException(f"{exc}: run the command again once it is done") from None
    click.echo(
        f"Counted {days} days: the statistics read every day's hours and clients' names from the counts."
        if days
        else "Nothing to count: every day's hours and clients' names are counted."
    )
