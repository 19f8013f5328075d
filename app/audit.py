"""Reads of the activity log, recorded in the access log (models/access/access_log.py): who read, from
where, with which filters and window, and how many rows and bytes were sent."""

import logging

from flask import current_app, g, request

import models.access.access_log
import models.engine.database
from app.auth import actor
from models.runtime.clock import now_ms

log = logging.getLogger(__name__)


class Read:
    """One read being served. A stream's entry is written before its first byte and completed
    when it ends; a page's is written once it was sent (its reader does not wait for the write
    lock). Counted by what the response body actually carried."""

    def __init__(self, kind: str, filters, stream: bool):
        self.enabled = current_app.config["ANALYTICS_ACCESS_LOG"]
        self.rows = self.bytes = 0
        self.entry = None
        if not self.enabled:
            return
        args = {name: values if len(values) > 1 else values[0] for name, values in request.args.lists()}
        args.pop("authToken", None)  # a credential: never kept
        limit = g.principal.endpoints
        self.fields = (
            kind,
            actor(),
            args,
            None if limit is None else sorted(limit),
            (filters.start_ms, filters.end_ms),
        )
        if stream:
            self.entry = models.access.access_log.record_read(*self.fields, (None, None), now_ms())

    def counted(self, chunks, rows_in, header=False):
        """`chunks` passed through, counting rows (`rows_in(chunk)`; a `header` chunk first
        holds none) and bytes."""
        for chunk in chunks:
            if header:
                header = False
            else:
                self.rows += rows_in(chunk)
            self.bytes += len(chunk.encode() if isinstance(chunk, str) else chunk)
            yield chunk

    def close(self):
        """Write (or complete) the entry; runs when the server closes the response."""
        if not self.enabled:
            return
        try:
            with models.engine.database.connection():
                if self.entry is None:
                    models.access.access_log.record_read(*self.fields, (self.rows, self.bytes), now_ms())
                else:
                    models.access.access_log.finish_read(self.entry, self.rows, self.bytes)
        except Exception:  # the read was served; its record must not turn into an error
            log.exception("access log: the read of %s by %s could not be recorded", self.fields[0], self.fields[1])
