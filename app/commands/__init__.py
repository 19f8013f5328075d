"""The command line under `flask --app wsgi`: init, keys, privacy, output, retention, backup,
copy-to-clickhouse, count-clickhouse-hours, alerts, migrate, and the feeds' commands (ingest,
import-pihole, import-adguard, collect-dnstap; see app/commands/feeds.py)."""

import os
import secrets

import click
from flask import current_app
from flask.cli import with_appcontext

from . import feeds
from .alerts import alerts
from .backup import backup_command
from .clickhouse import copy_command, count_hours_command
from .keys import keys
from .migrate import migrate_command
from .outputs import output
from .privacy import privacy
from .retention import retention_command


def register(app):
    app.cli.add_command(init_command)
    for command in feeds.aliases():
        app.cli.add_command(command)
    app.cli.add_command(keys)
    app.cli.add_command(privacy)
    app.cli.add_command(output)
    app.cli.add_command(retention_command)
    app.cli.add_command(backup_command)
    app.cli.add_command(copy_command)
    app.cli.add_command(count_hours_command)
    app.cli.add_command(alerts)
    app.cli.add_command(migrate_command)


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
