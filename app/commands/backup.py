"""`flask --app wsgi backup DEST`: a consistent copy of the live SQLite database."""

import os
import sqlite3
import time

import click
from flask import current_app
from flask.cli import with_appcontext

import models.engine.database


@click.command("backup")
@click.argument("destination", type=click.Path(dir_okay=False, writable=True))
@click.option("--force", is_flag=True, help="Overwrite DESTINATION if it exists.")
@with_appcontext
def backup_command(destination, force):
    """Copy the database to DESTINATION while the service keeps running.

    Uses SQLite's online backup: the copy is one consistent snapshot, whatever is written
    meanwhile. Restore by stopping the service and putting the copy in the database's place.
    """
    if not models.engine.database.is_sqlite():
        raise click.ClickException("backup copies SQLite databases; use pg_dump for PostgreSQL")
    if os.path.exists(destination) and not force:
        raise click.ClickException(f"{destination} exists; pass --force to overwrite it")
    folder = os.path.dirname(os.path.abspath(destination))
    if not os.path.isdir(folder):
        raise click.ClickException(f"the folder {folder} does not exist; create it first (mkdir -p {folder})")
    temporary = destination + ".partial"
    started = time.monotonic()
    try:
        _copy(models.engine.database.db.obj.database, temporary)
        # Only a complete, checked copy ever appears under the destination's name.
        os.replace(temporary, destination)
    except (OSError, sqlite3.Error) as exc:
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


def _copy(source_path: str, temporary: str):
    if os.path.exists(temporary):
        os.remove(temporary)
    source = sqlite3.connect(source_path, timeout=30)
    target = sqlite3.connect(temporary)
    try:
        # One step, so one read transaction: a consistent snapshot. In WAL mode writers go on
        # meanwhile; a copy in several steps would start over whenever one of them commits.
        source.backup(target)
        check = target.execute("PRAGMA integrity_check").fetchone()[0]
        if check != "ok":
            raise click.ClickException(f"the copy failed its integrity check: {check}")
        target.execute("PRAGMA journal_mode = DELETE")  # one self-contained file
    finally:
        target.close()
        source.close()
