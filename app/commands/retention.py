"""`flask --app wsgi retention`: the retention job run once, now."""

import click
from flask import current_app
from flask.cli import with_appcontext

import models.database
from app.jobs.retention import CLI_ACTOR, run_retention, statistics_days


@click.command("retention")
@with_appcontext
def retention_command():
    """Delete the records older than ANALYTICS_RETENTION_DAYS now (and the statistics older
    than ANALYTICS_STATISTICS_RETENTION_DAYS)."""
    with models.database.connection():
        deleted = run_retention(CLI_ACTOR)
    days = current_app.config["ANALYTICS_RETENTION_DAYS"]
    if days <= 0:
        click.echo("Retention is off (0 days).")
        return
    kept = f"{statistics_days()} days" if statistics_days() else "forever"
    click.echo(f"Deleted {deleted} records older than {days} days; their statistics are kept {kept}.")
