"""Making and changing outputs from checked settings (schemas.outputs.CreateOutputSchema),
shared by the API and `flask --app wsgi output`; each caller records its own admin action."""

import os
from urllib.parse import unquote, urlsplit

import models.delivery.outputs
from models.runtime.clock import now_ms
from models.stores.bound import records
from schemas.outputs import output_options, settings_of, shown_url


class Refused(Exception):
    """The settings are valid but cannot be used here (the message says why); `field` names
    the setting, or None for a name already taken."""

    def __init__(self, message: str, field: str | None):
        super().__init__(message)
        self.field = field


def create(data: dict, endpoint_limit=None) -> models.delivery.outputs.OutputRow:
    """A new output; call inside a write transaction. An endpoint-limited key's output without
    endpointIds forwards the records of the key's endpoints, not every endpoint's."""
    name = data.get("name") or shown_url(data["url"])
    _check(data, name, None)
    start_after = records().newest_id() if data["start"] == "now" else 0
    output = models.delivery.outputs.create(
        name,
        data["kind"],
        data["url"],
        output_options(data),
        data["shape"],
        _endpoints(data, endpoint_limit),
        start_after,
        now_ms(),
    )
    if data["paused"]:
        output = models.delivery.outputs.set_paused(output.id, True)
    return output


def merged(output: models.delivery.outputs.OutputRow, change: dict) -> dict:
    """The create body of the output with `change` (a ChangeOutputSchema load) applied."""
    return {**settings_of(output._asdict()), **change}


def change(
    output: models.delivery.outputs.OutputRow, data: dict, endpoint_limit=None
) -> models.delivery.outputs.OutputRow:
    """Give the output the settings `data` (merged, then checked as a create body); its cursor
    stays. Call inside a write transaction."""
    _check(data, data["name"], output)
    return models.delivery.outputs.update(
        output.id,
        data["name"],
        data["url"],
        output_options(data),
        data["shape"],
        _endpoints(data, endpoint_limit),
        data["paused"],
    )


def _check(data: dict, name: str, current):
    if (current is None or name != current.name) and models.delivery.outputs.name_taken(name):
        raise Refused(f"An output named {name!r} exists already.", None)
    if data["kind"] == "file" and (current is None or data["url"] != current.url):
        folder = os.path.dirname(unquote(urlsplit(data["url"]).path))
        if not os.path.isdir(folder) or not os.access(folder, os.W_OK | os.X_OK):
            raise Refused(
                f"Invalid 'url': the folder {folder} does not exist or the service cannot write in it.", "url"
            )


def _endpoints(data: dict, endpoint_limit):
    endpoints = data.get("endpointIds")
    if endpoints is None and endpoint_limit is not None:
        return sorted(endpoint_limit)
    return endpoints


def with_backlog(output: models.delivery.outputs.OutputRow, limit: int) -> dict:
    """The output with its backlog (counted up to `limit` + 1), as schemas.outputs.OutputSchema dumps it."""
    return {**output._asdict(), "backlog": records().backlog(output, limit + 1), "backlogLimit": limit}
