"""`flask --app wsgi privacy show|set`: the privacy settings from the command line."""

import json

import click
from flask.cli import AppGroup

import models.admin_actions
import models.database
import models.privacy
from models.clock import now_ms

from .keys import CLI_ACTOR

privacy = AppGroup("privacy", help="Show and change what is kept of each endpoint's queries.")


@privacy.command("show")
def show():
    """The settings in force: the default (_default) and every endpoint with its own."""
    with models.database.connection():
        stored = models.privacy.settings()
    names = [models.privacy.DEFAULT, *sorted(name for name in stored if name != models.privacy.DEFAULT)]
    for name in names:
        click.echo(f"{name}\t{json.dumps(models.privacy.effective(stored, name), sort_keys=True)}")


@privacy.command("set")
@click.argument("endpoint")
@click.option("--client-ip", type=click.Choice(models.privacy.CLIENT_IP))
@click.option("--ipv4-prefix", type=click.IntRange(0, 32))
@click.option("--ipv6-prefix", type=click.IntRange(0, 128))
@click.option("--client-metadata", type=click.Choice(models.privacy.KEEP_DROP))
@click.option("--question", type=click.Choice(models.privacy.QUESTION))
@click.option("--answers", type=click.Choice(models.privacy.KEEP_DROP))
def set_command(endpoint, client_ip, ipv4_prefix, ipv6_prefix, client_metadata, question, answers):
    """Change some settings of ENDPOINT (_default: the operator's default), for the records
    stored from now on."""
    given = {
        "clientIp": client_ip,
        "ipv4Prefix": ipv4_prefix,
        "ipv6Prefix": ipv6_prefix,
        "clientMetadata": client_metadata,
        "question": question,
        "answers": answers,
    }
    fields = {name: value for name, value in given.items() if value is not None}
    if not fields:
        raise click.UsageError("give at least one setting to change")
    if not 0 < len(endpoint) <= 256:
        raise click.BadParameter("1 to 256 characters", param_hint="ENDPOINT")
    with models.database.connection(), models.database.write_transaction():
        result = models.privacy.change(endpoint, fields)
        named = None if endpoint == models.privacy.DEFAULT else [endpoint]
        metadata = {"path": {"endpointId": endpoint}, "body": fields, "result": result}
        models.admin_actions.record_action("privacy.set", CLI_ACTOR, metadata, named, now_ms())
    click.echo(f"{endpoint}\t{json.dumps(result, sort_keys=True)}")
