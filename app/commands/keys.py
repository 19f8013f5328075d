"""`flask --app wsgi keys create|list|revoke`: API keys from the command line."""

import click
from flask.cli import AppGroup

import models.access.admin_actions
import models.access.keys
import models.engine.database
from app.auth import SCOPES
from models.runtime.clock import now_ms
from schemas.datetimes import format_ms

keys = AppGroup("keys", help="Create, list and revoke API keys.")

# The admin-action log's actor for changes made from the command line.
CLI_ACTOR = {"key_id": None, "key_name": "cli", "source_ip": ""}


@keys.command("create")
@click.option("--name", required=True, help="A unique name for the key.")
@click.option("--scope", "scopes", multiple=True, required=True, type=click.Choice(SCOPES), help="Repeatable.")
@click.option("--endpoint", "endpoints", multiple=True, help="Limit the key to these endpoint ids (repeatable).")
def create(name, scopes, endpoints):
    """Create a key; its secret is printed once, alone on the last line."""
    name = name.strip()
    if not name or len(name) > 128:
        raise click.BadParameter("must be 1 to 128 characters", param_hint="--name")
    if any(not e or len(e) > 256 for e in endpoints):
        raise click.BadParameter("endpoint ids are 1 to 256 characters", param_hint="--endpoint")
    with models.engine.database.connection(), models.engine.database.write_transaction():
        if any(k["name"] == name for k in models.access.keys.list_keys()):
            raise click.ClickException(f"a key named {name!r} exists already")
        key, secret = models.access.keys.create_key(name, list(scopes), list(endpoints) or None, now_ms())
        models.access.admin_actions.record_action("key.create", CLI_ACTOR, {"result": _public(key)}, None, now_ms())
    click.echo(f"Created key {key['id']} {key['name']!r}: scopes {', '.join(key['scopes'])}; {_limit(key)}.")
    click.echo("The secret is shown only now; the service keeps only its hash:")
    click.echo(secret)


@keys.command("list")
def list_command():
    """List keys (never their secrets)."""
    with models.engine.database.connection():
        rows = models.access.keys.list_keys()
    if not rows:
        click.echo("No keys (the operator key ANALYTICS_API_KEY works regardless).")
    for key in rows:
        state = f"revoked {format_ms(key['revoked'])}" if key["revoked"] else "active"
        click.echo(
            f"{key['id']}\t{key['name']}\t{','.join(key['scopes'])}\t{_limit(key)}\t"
            f"created {format_ms(key['created'])}\t{state}"
        )


@keys.command("revoke")
@click.argument("name_or_id")
def revoke(name_or_id):
    """Revoke a key by name or id; it stops working at once."""
    with models.engine.database.connection(), models.engine.database.write_transaction():
        key = models.access.keys.revoke_key(name_or_id, now_ms())
        if key is None:
            raise click.ClickException(f"no active key named or numbered {name_or_id!r}")
        models.access.admin_actions.record_action("key.revoke", CLI_ACTOR, {"result": _public(key)}, None, now_ms())
    click.echo(f"Revoked key {key['id']} {key['name']!r}.")


def _limit(key) -> str:
    return "all endpoints" if key["endpoints"] is None else "endpoints " + ", ".join(key["endpoints"])


def _public(key) -> dict:
    return {"id": key["id"], "name": key["name"], "scopes": key["scopes"], "endpoints": key["endpoints"]}
