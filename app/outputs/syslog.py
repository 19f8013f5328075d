"""The syslog output: one message per record, its JSON as the message text, RFC 5424 (or RFC
3164 for old receivers) over UDP (one datagram each), TCP or TLS.

Over TCP and TLS, RFC 5424 messages are framed by octet counting (RFC 6587 3.4.1, RFC 5425),
RFC 3164 ones end with a newline (non-transparent framing, what old receivers read; the JSON
holds no raw newline). Syslog has no acknowledgement: a batch counts as accepted once the
socket took it, so a receiver that dies with messages unread can lose them (see
docs/outputs.md); UDP can lose messages on the way as well.
"""

import os
import select
import socket
import ssl
from datetime import UTC, datetime
from urllib.parse import urlsplit

from . import OutputError, tls

SEVERITY = 6  # informational
MSGID = "dnsquery"
_MONTHS = "Jan Feb Mar Apr May Jun Jul Aug Sep Oct Nov Dec".split()


class SyslogSender:
    def __init__(self, url: str, options: dict):
        parts = urlsplit(url)
        self.transport = parts.scheme
        self.address = (parts.hostname, parts.port or {"udp": 514, "tcp": 514, "tls": 6514}[parts.scheme])
        self.format = options["format"]
        self.priority = options["facility"] * 8 + SEVERITY
        self.app_name = options["appName"]
        self.timeout = options["timeoutSeconds"]
        self.context = tls.context(options.get("tls")) if self.transport == "tls" else None
        # RFC 5424's HOSTNAME and RFC 3164's are printable ASCII without spaces.
        self.hostname = "".join(c for c in socket.gethostname() if "!" <= c <= "~")[:255] or "-"
        self.procid = str(os.getpid())
        self.sock = None

    def message(self, record: dict, line: bytes) -> bytes:
        """One record's syslog message: the header (with the record's time), then its JSON."""
        stamp = record.get("timestamp") or record.get("time")
        if self.format == "rfc3164":
            when = datetime.strptime(stamp[:19], "%Y-%m-%dT%H:%M:%S") if stamp else datetime.now(UTC)
            header = f"<{self.priority}>{_MONTHS[when.month - 1]} {when.day:2d} {when:%H:%M:%S} {self.hostname} "
            return f"{header}{self.app_name}[{self.procid}]: ".encode() + line
        header = f"<{self.priority}>1 {stamp or '-'} {self.hostname} {self.app_name} {self.procid} {MSGID} - "
        return header.encode() + line

    def frame(self, message: bytes) -> bytes:
        if self.transport == "udp":
            return message
        if self.format == "rfc3164":
            return message + b"\n"
        return b"%d " % len(message) + message

    def send(self, records: list[dict], lines: list[bytes]):
        frames = [self.frame(self.message(record, line)) for record, line in zip(records, lines, strict=True)]
        try:
            if self.sock is None or self._peer_closed():
                self.close()
                self.sock = self._connect()
            if self.transport == "udp":
                for frame in frames:
                    self.sock.send(frame)
            else:
                self.sock.sendall(b"".join(frames))
        except OSError as exc:
            self.close()
            raise OutputError(f"{type(exc).__name__}: {exc}") from None

    def _connect(self) -> socket.socket:
        host, port = self.address
        if self.transport == "udp":
            family, kind, proto, _, address = socket.getaddrinfo(host, port, type=socket.SOCK_DGRAM)[0]
            sock = socket.socket(family, kind, proto)
            sock.connect(address)  # so that a refusal (ICMP port unreachable) shows as an error
            return sock
        sock = socket.create_connection((host, port), timeout=self.timeout)
        if self.context is not None:
            try:
                sock = self.context.wrap_socket(sock, server_hostname=host)
            except OSError:
                sock.close()
                raise
        return sock

    def _peer_closed(self) -> bool:
        """Whether a stream receiver hung up since the last batch (it never sends anything, so
        readable means closed), so that the next batch goes to a fresh connection instead of
        into one the receiver no longer reads."""
        if self.transport == "udp":
            return False
        readable, _, _ = select.select([self.sock], [], [], 0)
        if not readable:
            return False
        try:
            self.sock.setblocking(False)
            data = self.sock.recv(1)
        except (BlockingIOError, ssl.SSLWantReadError):
            return False
        except OSError:
            return True
        finally:
            try:
                self.sock.settimeout(self.timeout)
            except OSError:
                pass
        return data == b""

    def close(self):
        if self.sock is not None:
            try:
                if isinstance(self.sock, ssl.SSLSocket):
                    self.sock.unwrap()  # a clean TLS close: the receiver reads it as an end, not an error
            except (OSError, ValueError):
                pass
            try:
                self.sock.close()
            finally:
                self.sock = None
