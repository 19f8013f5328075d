"""Making an output from checked settings (schemas.outputs.CreateOutputSchema), shared by
POST /v2/output and `flask --app wsgi output create`; each records its own admin action."""

import os
from urllib.parse import unquote, urlsplit

import models.outputs
from models.clock import now_ms
from schemas.outputs import output_options, shown_url


class Refused(Exception):
    """The settings are valid but cannot be used here (the message says why); `field` names
    the setting, or None for a name already taken."""

    def __init__(self, message: str, field: str | None):
        super().__init__(message)
        self.field = field


def create(data: dict, endpoint_limit=None) -> models.outputs.OutputRow:
    """A new output; call inside a write transaction. An endpoint-limited key's output without
    endpointIds forwards the records of the key's endpoints, not every endpoint's."""
    name = data.get("name") or shown_url(data["url"])
    if models.outputs.name_taken(name):
        raise Refused(f"An output named {name!r} exists already.", None)
    if data["kind"] == "file":
        folder = os.path.dirname(unquote(urlsplit(data["url"]).path))
        if not os.path.isdir(folder) or not os.access(folder, os.W_OK | os.X_OK):
            raise Refused(
                f"Invalid 'url': the folder {folder} does not exist or is not writable by the service.", "url"
            )
    endpoints = data.get("endpointIds")
    if endpoints is None and endpoint_limit is not None:
        endpoints = sorted(endpoint_limit)
    start_after = models.outputs.newest_id() if data["start"] == "now" else 0
    output = models.outputs.create(
        name, data["kind"], data["url"], output_options(data), data["shape"], endpoints, start_after, now_ms()
    )
    if data["paused"]:
        output = models.outputs.set_paused(output.id, True)
    return output


def with_backlog(output: models.outputs.OutputRow, limit: int) -> dict:
    """The output with its backlog (counted up to `limit` + 1), as schemas.outputs.OutputSchema dumps it."""
    return {**output._asdict(), "backlog": models.outputs.backlog(output, limit + 1), "backlogLimit": limit}
