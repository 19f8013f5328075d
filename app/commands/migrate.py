"""`flask --app wsgi migrate`: the database's schema version, and the steps this start ran."""

import click
from flask import current_app
from flask.cli import with_appcontext

from models.migrations import steps
from models.schema.tables import SCHEMA_VERSION


@click.command("migrate")
@with_appcontext
def migrate_command():
    """Bring the schema to this release's version (the app's start does it) and say what ran."""
    ran = current_app.extensions["schema_steps"]
    click.echo(f"Schema version {SCHEMA_VERSION} (this release's).")
    if not ran:
        click.echo("No step was due.")
    for step in ran:
        click.echo(f"Ran step {step}: {steps.summary(step)}")
