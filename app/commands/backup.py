"""`flask --app wsgi backup DEST`: a consistent copy of the live database, where its engine can
make one (SQLite's online backup)."""

import os
import time

import click
from flask import current_app
from flask.cli import with_appcontext

import models.engine.database
from models.engine.interface import BackupFailed


@click.command("backup")
@click.argument("destination", type=click.Path(dir_okay=False, writable=True))
@click.option("--force", is_flag=True, help="Overwrite DESTINATION if it exists.")
@with_appcontext
def backup_command(destination, force):
    """Copy the database to DESTINATION while the service keeps running.

    Uses SQLite's online backup: the copy is one consistent snapshot, whatever is written
    meanwhile. Restore by stopping the service and putting the copy in the database's place.
    """
    if refusal := models.engine.database.no_backup():
        raise click.ClickException(refusal)
    if os.path.exists(destination) and not force:
        raise click.ClickException(f"{destination} exists; pass --force to overwrite it")
    folder = os.path.dirname(os.path.abspath(destination))
    if not os.path.isdir(folder):
        raise click.ClickException(f"the folder {folder} does not exist; create it first (mkdir -p {folder})")
    temporary = destination + ".partial"
    started = time.monotonic()
    try:
        if os.path.exists(temporary):
            os.remove(temporary)
        models.engine.database.back_up(temporary)
        # Only a complete, checked copy ever appears under the destination's name.
        os.replace(temporary, destination)
    except (OSError, BackupFailed) as exc:
        # One line saying what went wrong (permissions, a full disk, ...), not a traceback.
        raise click.ClickException(f"backup to {destination} failed: {exc}") from None
    finally:
        if os.path.exists(temporary):
            os.remove(temporary)
    size = os.path.getsize(destination)
    click.echo(
        f"Backed up {current_app.config['ANALYTICS_DATABASE']} to {destination} "
        f"({size / 1e6:.1f} MB in {time.monotonic() - started:.1f} s)."
    )
