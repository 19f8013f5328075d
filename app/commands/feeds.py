"""The feeds' commands under `flask --app wsgi` (ingest, import-pihole, import-adguard,
collect-dnstap), as installs and deploy units have always run them: the same commands as
`dns-analytics-feed`'s, on this app's settings and store."""

import click
from flask import current_app
from flask.cli import with_appcontext

from feeds import cli


def aliases() -> list[click.Command]:
    return [_alias(command) for command in cli.FEED_COMMANDS]


def _alias(command: click.Command) -> click.Command:
    @with_appcontext
    def callback(**options):
        context = click.get_current_context()
        # The app context has bound the store already (App.app_context): nothing to open.
        context.meta[cli.HOST] = cli.Host(dict(current_app.config), current_app.instance_path)
        return context.invoke(command.callback, **options)

    return click.Command(
        command.name,
        params=command.params,
        callback=callback,
        help=command.help,
        short_help=command.short_help,
        epilog=command.epilog,
    )
