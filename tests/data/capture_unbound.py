"""Make tests/data/unbound-dnstap.bin: the dnstap payloads a real Unbound sends for a varied set
of queries (answers, blocks, NXDOMAIN, refusals, odd and mixed-case names, EDNS with DO, UDP
and TCP), each as a 4-byte big-endian length and the payload. Run from the project root:

    .venv/bin/python tests/data/capture_unbound.py
"""

import asyncio
import os
import struct
import sys
import tempfile
import threading
import time
from pathlib import Path

import dns.message
import dns.query

ROOT = Path(__file__).resolve().parents[2]
sys.path[:0] = [str(ROOT), str(ROOT / "tests")]
from feeds.framestream import data_frames  # noqa: E402

from support import unbound  # noqa: E402

NAMES = [
    ("a.home.test", "A"),
    ("A.Home.TEST", "A"),
    ("b.home.test", "AAAA"),
    ("c.home.test", "TXT"),
    ("blocked.test", "A"),
    ("blocked.test", "AAAA"),
    ("x.ads.test", "A"),
    ("nothing.home.test", "A"),
    ("a.home.test", "MX"),
    ("elsewhere.example", "A"),
    ("with\\032space.example", "A"),
    ('q"uote(s);x.example', "A"),
    ("\\200\\255.example", "A"),
    ("a.home.test", "TYPE65280"),
    ("long-" + "x" * 58 + ".home.test", "A"),
]


def main() -> None:
    folder = Path(tempfile.mkdtemp(prefix="capture-"))
    folder.chmod(0o755)
    socket_path = folder / "dnstap.sock"
    payloads = []
    ready = threading.Event()

    async def serve():
        async def take(reader, writer):
            async for payload in data_frames(reader, writer):
                payloads.append(payload)

        await asyncio.start_unix_server(take, path=str(socket_path))
        ready.set()
        await asyncio.sleep(3600)

    threading.Thread(target=lambda: asyncio.run(serve()), daemon=True).start()
    ready.wait(10)
    os.chmod(socket_path, 0o666)  # Unbound runs as its own user
    unbound.probe()
    unbound.let_connect(socket_path)
    resolver = unbound.Unbound(folder, socket_path=socket_path)
    try:
        time.sleep(1)
        for tcp in (False, True):
            for want_dnssec in (False, True):
                for name, rdtype in NAMES:
                    query = dns.message.make_query(name, rdtype, want_dnssec=want_dnssec)
                    send = dns.query.tcp if tcp else dns.query.udp
                    send(query, "127.0.0.1", port=resolver.port, timeout=5)
        deadline = time.monotonic() + 10
        expected = 2 * 2 * 2 * len(NAMES)  # a query and a response message each
        while len(payloads) < expected and time.monotonic() < deadline:
            time.sleep(0.1)
    finally:
        resolver.stop()
    out = Path(__file__).with_name("unbound-dnstap.bin")
    out.write_bytes(b"".join(struct.pack(">I", len(p)) + p for p in payloads))
    print(f"{len(payloads)} payloads written to {out.relative_to(ROOT)}")
    os.unlink(socket_path)


if __name__ == "__main__":
    main()
