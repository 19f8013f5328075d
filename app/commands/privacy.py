"""`flask --app wsgi privacy show|set`: the privacy settings from the command line."""

import json

import click
import marshmallow as ma
from flask.cli import AppGroup

import models.admin_actions
import models.database
import models.privacy
from models.clock import now_ms
from schemas.privacy import PrivacySettingsSchema, settings_json

from .keys import CLI_ACTOR

privacy = AppGroup("privacy", help="Show and change what is kept of each endpoint's queries.")
_CHOICES = {
    name: list(field.choices) for name, field in PrivacySettingsSchema().fields.items() if hasattr(field, "choices")
}


def _line(endpoint: str, settings: dict) -> str:
    return f"{endpoint}\t{json.dumps(settings_json(settings), sort_keys=True)}"


@privacy.command("show")
def show():
    """The settings in force: the default (_default) and every endpoint with its own."""
    with models.database.connection():
        for name, settings in models.privacy.in_force().items():
            click.echo(_line(name, settings))


@privacy.command("set")
@click.argument("endpoint")
@click.option("--client-ip", type=click.Choice(_CHOICES["client_ip"]))
@click.option("--ipv4-prefix", type=click.IntRange(0, 32))
@click.option("--ipv6-prefix", type=click.IntRange(0, 128))
@click.option("--client-metadata", type=click.Choice(_CHOICES["client_metadata"]))
@click.option("--question", type=click.Choice(_CHOICES["question"]))
@click.option("--answers", type=click.Choice(_CHOICES["answers"]))
@click.option("--unlogged-clients", type=click.Choice(_CHOICES["unlogged_clients"]))
def set_command(endpoint, client_ip, ipv4_prefix, ipv6_prefix, client_metadata, question, answers, unlogged_clients):
    """Change some settings of ENDPOINT (_default: the operator's default), for the records
    stored from now on (the same as PUT /v2/privacy/{endpointId}, and logged as it is)."""
    given = {
        "clientIp": client_ip,
        "ipv4Prefix": ipv4_prefix,
        "ipv6Prefix": ipv6_prefix,
        "clientMetadata": client_metadata,
        "question": question,
        "answers": answers,
        "unloggedClients": unlogged_clients,
    }
    body = {name: value for name, value in given.items() if value is not None}
    if not body:
        raise click.UsageError("give at least one setting to change")
    if not 0 < len(endpoint) <= 256:
        raise click.BadParameter("1 to 256 characters", param_hint="ENDPOINT")
    try:
        fields = PrivacySettingsSchema().load(body)
    except ma.ValidationError as exc:  # the options' types check the same: kept for safety
        raise click.UsageError(str(exc.messages)) from None
    with models.database.connection(), models.database.write_transaction():
        result = models.privacy.change(endpoint, fields)
        named = None if endpoint == models.privacy.DEFAULT else [endpoint]
        metadata = {"path": {"endpointId": endpoint}, "body": body, "result": settings_json(result)}
        models.admin_actions.record_action("privacy.set", CLI_ACTOR, metadata, named, now_ms())
    click.echo(_line(endpoint, result))
