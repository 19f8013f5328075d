"""`flask --app wsgi output create|change|list|pause|resume|delete`: outputs from the command line,
checked by the same rules as POST /v2/output and recorded in the admin-action log."""

import click
import marshmallow as ma
from flask import current_app
from flask.cli import AppGroup

import models.access.admin_actions
import models.delivery.outputs
import models.engine.database
from app.outputs import manage
from models.runtime.clock import now_ms
from schemas.outputs import (
    KINDS,
    SYSLOG_FORMATS,
    ChangeOutputSchema,
    CreateOutputSchema,
    OutputSchema,
    redacted_body,
)
from schemas.siem import SHAPES

from .keys import CLI_ACTOR

output = AppGroup("output", help="Create, change, list, pause, resume and delete outputs (where records go).")


# The settings an output is made with and changed by (all but kind and start).
_SETTINGS = (
    click.option("--name", help="Unique; defaults to the URL."),
    click.option("--endpoint", "endpoints", multiple=True, help="Forward only these endpoints' records (repeatable)."),
    click.option("--header", "headers", multiple=True, help="http: 'Name: value' (repeatable)."),
    click.option("--ca-file", type=click.File("r"), help="https/tls: PEM authorities to trust (not the system's)."),
    click.option("--insecure", is_flag=True, help="https/tls: do not check the receiver's certificate."),
    click.option("--format", "syslog_format", type=click.Choice(SYSLOG_FORMATS), help="syslog: rfc5424 (default)."),
    click.option("--facility", type=int, help="syslog: 0-23 (16, local0)."),
    click.option("--app-name", help="syslog: dns-analytics."),
    click.option("--batch-size", type=int, help="Records per POST / write (500)."),
    click.option("--timeout", "timeout_seconds", type=int, help="Seconds (10)."),
    click.option("--max-bytes", type=int, help="file: rotate past this size (100 MiB)."),
    click.option("--keep", type=int, help="file: rotated files kept (5)."),
)


def _settings(command):
    for option in reversed(_SETTINGS):
        command = option(command)
    return command


def _body(given: dict) -> dict:
    """The API body of the settings given on the command line (those left out are absent)."""
    body = {
        "url": given["url"],
        "shape": given["shape"],
        "name": given["name"],
        "endpointIds": list(given["endpoints"]) or None,
        "format": given["syslog_format"],
        "facility": given["facility"],
        "appName": given["app_name"],
        "batchSize": given["batch_size"],
        "timeoutSeconds": given["timeout_seconds"],
        "maxBytes": given["max_bytes"],
        "keep": given["keep"],
    }
    if given["headers"]:
        body["headers"] = dict(_header(text) for text in given["headers"])
    if given["ca_file"] or given["insecure"]:
        body["tls"] = {"verify": not given["insecure"]}
        if given["ca_file"]:
            body["tls"]["caCert"] = given["ca_file"].read()
    return {name: value for name, value in body.items() if value is not None}


def _loaded(schema, body: dict) -> dict:
    try:
        return schema.load(body)
    except ma.ValidationError as exc:
        raise click.ClickException(_first_error(exc.messages)) from None


@output.command("create")
@click.option("--kind", required=True, type=click.Choice(KINDS))
@click.option("--url", required=True, help="http(s)://..., udp:// tcp:// tls://host:port, or file:///path.")
@click.option("--shape", type=click.Choice(SHAPES), default="queryData", show_default=True)
@click.option("--start", type=click.Choice(("oldest", "now")), default="oldest", show_default=True)
@_settings
def create(**given):
    """Create an output; delivery starts within seconds in the running service."""
    body = {"kind": given["kind"], "start": given["start"], **_body(given)}
    data = _loaded(CreateOutputSchema(), body)
    with models.engine.database.connection(), models.engine.database.write_transaction():
        try:
            made = manage.create(data)
        except manage.Refused as exc:
            raise click.ClickException(str(exc)) from None
        shown = _dump(made)
        metadata = {"body": redacted_body(body), "result": shown}
        models.access.admin_actions.record_action("output.create", CLI_ACTOR, metadata, made.endpoints, now_ms())
    click.echo(f"Created output {made.id} {made.name!r} ({made.kind}); {shown['backlog']} records to send.")


@output.command("change")
@click.argument("name_or_id")
@click.option("--url", help="A new address of the same kind.")
@click.option("--shape", type=click.Choice(SHAPES))
@_settings
@click.option("--all-endpoints", is_flag=True, help="Forward every endpoint's records (drops --endpoint's list).")
@click.option("--no-tls", is_flag=True, help="Drop the TLS option: the system's authorities, checked.")
def change(name_or_id, all_endpoints, no_tls, **given):
    """Change an output's settings (as PATCH /v2/output/{id}: what is given replaces what it had,
    --header all headers at once); delivery goes on from its cursor."""
    body = _body(given)
    if all_endpoints and "endpointIds" in body or no_tls and "tls" in body:
        raise click.UsageError("--all-endpoints goes without --endpoint, --no-tls without --ca-file and --insecure.")
    if all_endpoints:
        body["endpointIds"] = None
    if no_tls:
        body["tls"] = None
    if not body:
        raise click.UsageError("Name at least one setting to change.")
    wanted = _loaded(ChangeOutputSchema(), body)
    with models.engine.database.connection(), models.engine.database.write_transaction():
        found = _find(name_or_id)
        data = _loaded(CreateOutputSchema(), manage.merged(found, wanted))
        try:
            changed = manage.change(found, data)
        except manage.Refused as exc:
            raise click.ClickException(str(exc)) from None
        metadata = {"body": redacted_body(body), "result": _dump(changed)}
        models.access.admin_actions.record_action("output.change", CLI_ACTOR, metadata, changed.endpoints, now_ms())
    click.echo(f"Changed output {changed.id} {changed.name!r}; it goes on from record {changed.cursor}.")


@output.command("list")
def list_command():
    """List outputs: where each stands (cursor, backlog, delivered, skipped, last error)."""
    with models.engine.database.connection():
        rows = [_dump(row) for row in models.delivery.outputs.list_outputs()]
    if not rows:
        click.echo("No outputs.")
    for row in rows:
        endpoints = "all endpoints" if row["endpointIds"] is None else ",".join(row["endpointIds"])
        state = "paused" if row["paused"] else ("failing" if row["failures"] else "delivering")
        error = f"\tlast error {row['lastErrorAt']}: {row['lastError']}" if row["lastError"] else ""
        click.echo(
            f"{row['id']}\t{row['name']}\t{row['kind']}\t{row['url']}\t{endpoints}\t{state}\tcursor {row['cursor']}"
            f"\tbacklog {row['backlog']}\tdelivered {row['delivered']}\tskipped {row['skipped']}{error}"
        )


@output.command("pause")
@click.argument("name_or_id")
def pause(name_or_id):
    """Stop delivering (records wait in the store, up to ANALYTICS_OUTPUT_BACKLOG)."""
    _set_paused(name_or_id, True)


@output.command("resume")
@click.argument("name_or_id")
def resume(name_or_id):
    """Deliver again, from where the output stopped."""
    _set_paused(name_or_id, False)


@output.command("delete")
@click.argument("name_or_id")
def delete(name_or_id):
    """Delete an output; the running service stops delivering it within seconds."""
    with models.engine.database.connection(), models.engine.database.write_transaction():
        found = _find(name_or_id)
        shown = _dump(found)
        models.delivery.outputs.delete(found.id)
        models.access.admin_actions.record_action(
            "output.delete", CLI_ACTOR, {"result": shown}, found.endpoints, now_ms()
        )
    click.echo(f"Deleted output {found.id} {found.name!r}.")


def _set_paused(name_or_id: str, paused: bool):
    with models.engine.database.connection(), models.engine.database.write_transaction():
        changed = models.delivery.outputs.set_paused(_find(name_or_id).id, paused)
        action = "output.pause" if paused else "output.resume"
        models.access.admin_actions.record_action(
            action, CLI_ACTOR, {"result": _dump(changed)}, changed.endpoints, now_ms()
        )
    click.echo(f"{'Paused' if paused else 'Resumed'} output {changed.id} {changed.name!r}.")


def _find(name_or_id: str):
    found = models.delivery.outputs.find(name_or_id)
    if found is None:
        raise click.ClickException(f"no output named or numbered {name_or_id!r}")
    return found


def _dump(row) -> dict:
    return OutputSchema().dump(manage.with_backlog(row, current_app.config["ANALYTICS_OUTPUT_BACKLOG"]))


def _header(text: str) -> tuple[str, str]:
    name, colon, value = text.partition(":")
    if not colon:
        raise click.BadParameter(f"{text!r} is not 'Name: value'", param_hint="--header")
    return name.strip(), value.strip()


def _first_error(messages, path="") -> str:
    """The first message of a marshmallow error tree, with the field it is about."""
    if isinstance(messages, dict):
        name, inner = next(iter(messages.items()))
        return _first_error(inner, name if name != "_schema" else path)
    if isinstance(messages, list) and messages and not isinstance(messages[0], str):
        return _first_error(messages[0], path)
    return f"{path}: {messages[0]}" if path else str(messages[0])
