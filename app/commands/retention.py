"""`flask --app wsgi retention`: the retention job run once, now; `retention future`: records
stamped past now and ANALYTICS_FUTURE_TOLERANCE_SECONDS, listed or deleted."""

import click
from flask import current_app
from flask.cli import with_appcontext

import models.access.admin_actions
import models.engine.database
from app.jobs.retention import CLI_ACTOR, run_retention, statistics_days
from models.runtime.clock import now_ms
from models.stores.bound import records
from schemas.datetimes import format_ms
from schemas.record_times import latest_ms


@click.group("retention", invoke_without_command=True)
@click.pass_context
@with_appcontext
def retention_command(ctx):
    """Delete the records older than ANALYTICS_RETENTION_DAYS now (and the statistics older
    than ANALYTICS_STATISTICS_RETENTION_DAYS)."""
    if ctx.invoked_subcommand is not None:
        return
    with models.engine.database.connection():
        deleted = run_retention(CLI_ACTOR)
    days = current_app.config["ANALYTICS_RETENTION_DAYS"]
    if days <= 0:
        click.echo("Retention is off (0 days).")
        return
    kept = f"{statistics_days()} days" if statistics_days() else "forever"
    click.echo(f"Deleted {deleted} records older than {days} days; their statistics are kept {kept}.")


@retention_command.command("future")
@click.option("--delete", is_flag=True, help="Delete them (default: list them).")
@with_appcontext
def future_command(delete):
    """List (or --delete) the records stamped further in the future than
    ANALYTICS_FUTURE_TOLERANCE_SECONDS allows, stored before it was lowered: they stand as
    their endpoint's and clients' last activity and keep feed-silent alerts from firing."""
    bound = latest_ms(now_ms())
    with models.engine.database.connection():
        found = records().future_records(bound)
        for endpoint, count, oldest, newest in found:
            click.echo(f"{endpoint}: {count} records from {format_ms(oldest)} to {format_ms(newest)}")
        total = sum(row[1] for row in found)
        if not delete:
            hint = "; --delete deletes them" if total else ""
            click.echo(f"{total} records are stamped after {format_ms(bound)}{hint}.")
            return
        with models.engine.database.write_transaction():
            deleted = records().delete_future(bound)
            if deleted:
                result = {"after": format_ms(bound), "result": {"deletedCount": deleted}}
                endpoints = [row[0] for row in found]
                models.access.admin_actions.record_action("retention.future", CLI_ACTOR, result, endpoints, now_ms())
    click.echo(f"Deleted {deleted} records stamped after {format_ms(bound)}.")
