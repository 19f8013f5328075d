"""The http output: each batch is one POST of NDJSON (one record a line) with the operator's
headers; any 2xx answer means the receiver took the whole batch."""

import http.client
from urllib.parse import urlsplit

from . import OutputError, tls

USER_AGENT = "dns-analytics-output"


class HttpSender:
    def __init__(self, url: str, options: dict):
        self.parts = urlsplit(url)
        self.path = (self.parts.path or "/") + (f"?{self.parts.query}" if self.parts.query else "")
        self.headers = {
            "User-Agent": USER_AGENT,
            **options.get("headers", {}),
            "Content-Type": "application/x-ndjson",
        }
        self.timeout = options["timeoutSeconds"]
        self.context = tls.context(options.get("tls")) if self.parts.scheme == "https" else None
        self.connection = None

    def _connect(self):
        port = self.parts.port
        if self.context is not None:
            return http.client.HTTPSConnection(self.parts.hostname, port, timeout=self.timeout, context=self.context)
        return http.client.HTTPConnection(self.parts.hostname, port, timeout=self.timeout)

    def send(self, records: list[dict], lines: list[bytes]):
        body = b"\n".join(lines) + b"\n"
        # One connection kept between batches; a receiver that closed it meanwhile gets the
        # batch again on a fresh one (the same batch twice at worst: at least once).
        for attempt in (1, 2):
            if self.connection is None:
                self.connection = self._connect()
            try:
                self.connection.request("POST", self.path, body=body, headers=self.headers)
                response = self.connection.getresponse()
                answer = response.read(2000)
            except (http.client.RemoteDisconnected, BrokenPipeError, ConnectionResetError) as exc:
                self.close()
                if attempt == 2:
                    raise OutputError(f"the connection was closed: {exc}") from None
                continue
            except (OSError, http.client.HTTPException) as exc:
                self.close()
                raise OutputError(f"{type(exc).__name__}: {exc}") from None
            if response.will_close:
                self.close()
            if 200 <= response.status < 300:
                return
            text = answer.decode("utf-8", "replace").strip()
            raise OutputError(f"HTTP {response.status} {response.reason}: {text[:300]}")

    def close(self):
        if self.connection is not None:
            self.connection.close()
            self.connection = None
