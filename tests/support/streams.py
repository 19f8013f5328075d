"""Reading realtime streams (server-sent events) in the tests: parsed from text, or read from a
real server by a thread of its own."""

import http.client
import json
import queue
import threading
import time


def events(chunks) -> list[dict]:
    """Parse SSE text into events ({"id": ..., "data": ...}); comments are skipped."""
    found = []
    for block in "".join(chunks).split("\n\n"):
        fields = dict(line.split(": ", 1) for line in block.splitlines() if line and not line.startswith(":"))
        if "data" in fields:
            found.append({"id": int(fields["id"]), "data": json.loads(fields["data"])})
    return found


class StreamReader(threading.Thread):
    """Reads an SSE response from a real server into a queue of events."""

    def __init__(self, server, path, headers=None):
        super().__init__(daemon=True)
        self.connection = http.client.HTTPConnection("127.0.0.1", server.port, timeout=30)
        self.connection.request("GET", path, headers=headers or {})
        self.response = self.connection.getresponse()
        self.events = queue.Queue()
        self.start()

    def run(self):
        block = []
        try:
            for raw in self.response:
                line = raw.decode().rstrip("\r\n")
                if line:
                    block.append(line)
                    continue
                found = events(["\n".join(block)])
                block = []
                for event in found:
                    self.events.put(event)
        except (OSError, ValueError, AttributeError):
            pass  # the test closed the connection (http.client may trip over its own close)

    def take(self, count, timeout=5.0):
        deadline, got = time.monotonic() + timeout, []
        while len(got) < count and time.monotonic() < deadline:
            try:
                got.append(self.events.get(timeout=max(0.01, deadline - time.monotonic())))
            except queue.Empty:
                break
        return got

    def close(self):
        self.connection.sock.shutdown(2)
        self.connection.close()
