"""Admission guards: every rule that refuses a request for what it would cost rather than for
what it says: its size (413, 414: request_size), failed authentications (429: failed_auth), a
key's share of expensive requests (429: shares) and of realtime streams (429, 503: streams),
and a read's time budget (503: budget).

Their state lives per worker process in one place, `app.extensions["guards"]` (a State); what
one request holds (its share, its budget) lives in flask.g for that request.
"""

from dataclasses import dataclass, field

from .failed_auth import FailedAttempts
from .shares import Shares
from .streams import Streams


@dataclass
class State:
    failed_auth: FailedAttempts = field(default_factory=FailedAttempts)
    shares: Shares = field(default_factory=Shares)
    streams: Streams = field(default_factory=Streams)
