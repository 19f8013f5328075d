"""The connection a request came on: closed after an error answer to a request with a body.

Refused before its body is read (a wrong key, a limit), a request leaves that body on the
connection, and gunicorn would read it to reach the next request: a broken chunked body then
gets a second answer (gunicorn's HTML 400) after the service's own, and a large one is read
for nothing. An application cannot close gunicorn's connection by a response header (gunicorn
drops hop-by-hop headers), so gunicorn.conf.py's pre_request hook hands each worker thread the
request it serves, and an error answer tells gunicorn to close the connection after it.
"""

import threading

from flask import request

_serving = threading.local()


def serving(server_request) -> None:
    """The server's request this thread serves now (gunicorn's pre_request hook)."""
    _serving.request = server_request


def close_after_error() -> None:
    """An error answer: if the request has a body, no further request is read on its connection."""
    if request.content_length or "chunked" in request.headers.get("Transfer-Encoding", "").lower():
        server_request = getattr(_serving, "request", None)
        if server_request is not None:
            server_request.force_close()
