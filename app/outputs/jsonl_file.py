"""The file output: JSON lines appended to a file, rotated by size (the file renamed to .1, .1
to .2, ... keeping `keep` of them), for Filebeat, Promtail, Vector or Fluent Bit to tail. A
batch counts as accepted once it is written and synced to disk."""

import os
from urllib.parse import unquote, urlsplit

from . import OutputError


class FileSender:
    def __init__(self, url: str, options: dict):
        self.path = unquote(urlsplit(url).path)
        self.max_bytes = options["maxBytes"]
        self.keep = options["keep"]

    def send(self, records: list[dict], lines: list[bytes]):
        try:
            size = os.path.getsize(self.path) if os.path.exists(self.path) else 0
            # A batch is cut where the next line would take the file past maxBytes; should a later
            # part fail, the whole batch is written again (at least once).
            part: list[bytes] = []
            for line in lines:
                if (size or part) and size + len(line) + 1 > self.max_bytes:
                    self._append(b"".join(part))
                    self._rotate()
                    size, part = 0, []
                part.append(line + b"\n")
                size += len(line) + 1
            self._append(b"".join(part))
        except OSError as exc:
            raise OutputError(f"{type(exc).__name__}: {exc}") from None

    def _append(self, data: bytes):
        if not data:
            return
        # Opened per write, so a file moved away by an outside logrotate is made again.
        descriptor = os.open(self.path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o600)
        try:
            start = os.lseek(descriptor, 0, os.SEEK_END)
            try:
                view = memoryview(data)
                while view:
                    view = view[os.write(descriptor, view) :]
                os.fsync(descriptor)
            except OSError:
                # No half batch left behind (a disk that filled up): the batch is written again whole.
                os.ftruncate(descriptor, start)
                raise
        finally:
            os.close(descriptor)

    def _rotate(self):
        if self.keep == 0:
            os.remove(self.path)
            return
        for n in range(self.keep - 1, 0, -1):
            older = f"{self.path}.{n}"
            if os.path.exists(older):
                os.replace(older, f"{self.path}.{n + 1}")
        os.replace(self.path, f"{self.path}.1")

    def close(self):
        pass
