"""`flask --app wsgi privacy show|set`: the privacy settings from the command line."""

import json

import click
import marshmallow as ma
from flask.cli import AppGroup

import models.access.admin_actions
import models.engine.database
import models.privacy.privacy
from app.jobs.privacy import run_privacy
from app.jobs.retention import CLI_ACTOR
from models.runtime.clock import now_ms
from models.stores.bound import records
from schemas.privacy import PrivacySettingsSchema, settings_items, settings_json

privacy = AppGroup("privacy", help="Show and change what is kept of each endpoint's queries.")
_CHOICES = {
    name: list(field.choices) for name, field in PrivacySettingsSchema().fields.items() if hasattr(field, "choices")
}


def _line(endpoint: str, settings: dict) -> str:
    return f"{endpoint}\t{json.dumps(settings, sort_keys=True)}"


@privacy.command("show")
def show():
    """The settings in force: the default (_default) and every endpoint with its own."""
    with models.engine.database.connection():
        items = settings_items(records().privacy_in_force())
    for name, settings in items.items():
        click.echo(_line(name, settings))


@privacy.command("rewrite")
def rewrite_command():
    """Run the privacy job now, to the end: records past an age step, and those stored before
    a setting was made stricter, rewritten."""
    with models.engine.database.connection():
        rewritten = run_privacy(CLI_ACTOR, seconds=float("inf"))
    click.echo(f"Rewrote {rewritten} stored records.")


@privacy.command("set")
@click.argument("endpoint")
@click.option("--client-ip", type=click.Choice(_CHOICES["client_ip"]))
@click.option("--ipv4-prefix", type=click.IntRange(0, 32))
@click.option("--ipv6-prefix", type=click.IntRange(0, 128))
@click.option("--client-metadata", type=click.Choice(_CHOICES["client_metadata"]))
@click.option("--question", type=click.Choice(_CHOICES["question"]))
@click.option("--answers", type=click.Choice(_CHOICES["answers"]))
@click.option("--unlogged-clients", type=click.Choice(_CHOICES["unlogged_clients"]))
@click.option("--steps", help='The age steps as JSON, e.g. \'[{"afterDays": 7, "clientIp": "truncate"}]\' ([]: none).')
def set_command(
    endpoint, client_ip, ipv4_prefix, ipv6_prefix, client_metadata, question, answers, unlogged_clients, steps
):
    """Change some settings of ENDPOINT (_default: the operator's default): a stricter one is
    also applied to the records stored before, by the privacy job (the same as
    PUT /v2/privacy/{endpointId}, and logged as it is)."""
    given = {
        "clientIp": client_ip,
        "ipv4Prefix": ipv4_prefix,
        "ipv6Prefix": ipv6_prefix,
        "clientMetadata": client_metadata,
        "question": question,
        "answers": answers,
        "unloggedClients": unlogged_clients,
        "steps": None if steps is None else _json_option(steps),
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
    with models.engine.database.connection(), models.engine.database.write_transaction():
        result, pending = records().change_privacy(endpoint, fields, now_ms())
        named = None if endpoint == models.privacy.privacy.DEFAULT else [endpoint]
        answer = settings_json(result, pending)
        metadata = {"path": {"endpointId": endpoint}, "body": body, "result": answer}
        models.access.admin_actions.record_action("privacy.set", CLI_ACTOR, metadata, named, now_ms())
    click.echo(_line(endpoint, answer))
    if pending:
        click.echo(f"{pending} stored records are to be rewritten to stricter settings (flask privacy rewrite: now).")


def _json_option(text: str):
    try:
        return json.loads(text)
    except ValueError as exc:
        raise click.BadParameter(f"not JSON: {exc}", param_hint="--steps") from None
