"""Real BIND 9, Knot Resolver and dnsdist for the dnstap tests (Debian's packages; scripts/
ensure-resolvers installs them), each configured with the lines docs/feeding.md gives, run
unprivileged on a free loopback port, serving a few local names and sending dnstap to the
collector's socket.

Each program is a `Program` (UNAVAILABLE and banner(), as the suite's other real programs): one
that is missing, or does not start even with the suite's own configuration (its lines left
out), skips its tests, and the run says so in red; one that starts without its lines but not
with them fails the test with its own output (`refused`).
"""

import pathlib
import re
import shutil
import socket
import subprocess
import threading
import time
from collections.abc import Callable

import dns.exception
import dns.flags
import dns.message
import dns.query
import dns.rcode
import dns.rrset
import pytest

from support import processes, servers
from support.servers import ROOT, free_port

DOCS = pathlib.Path(ROOT, "docs", "feeding.md")
DOCS_FOLDER = "/run/dns-analytics"
DOCS_SOCKET = f"{DOCS_FOLDER}/dnstap.sock"


def quick_start(step: str) -> str:
    """The fenced block docs/feeding.md marks `<!-- quick-start: STEP -->` (e.g. `bind config`)."""
    text = DOCS.read_text()
    marker = f"<!-- quick-start: {step} -->"
    assert text.count(marker) == 1, f"docs/feeding.md has {text.count(marker)} blocks marked {marker!r}"
    block = re.match(r"\s*```[a-z]*\n(.*?)```", text[text.index(marker) + len(marker) :], re.S)
    assert block, f"no fenced block right after {marker} in docs/feeding.md"
    return block.group(1)


def documented_lines(resolver: str, socket_path) -> str:
    """The resolver's own lines of its quick start (the body of the here-document that writes
    them, where the block writes a file), with the socket path replaced by the test's."""
    block = quick_start(f"{resolver} config")
    heredoc = re.search(r"<<'(\w+)'\n(.*?)^\1$", block, re.S | re.M)
    lines = heredoc.group(2) if heredoc else block
    assert DOCS_SOCKET in lines
    return lines.replace(DOCS_SOCKET, str(socket_path))


def refused(name: str, lines: str, why: str, output: str, starts_without: Callable[[], bool]) -> None:
    """A resolver did not start with `lines` in its configuration (`why`: it exited, or the
    time ran out): the test fails, with the resolver's `output`, when `starts_without()` (the
    same configuration without them) starts it, for the lines are at fault then, not the
    program; otherwise the caller skips."""
    if starts_without():
        pytest.fail(
            f"{name} did not start with its dnstap lines ({why}), and starts without them:\n{lines.rstrip()}\n"
            f"--- what {name} said ---\n{output[-1500:]}",
            pytrace=False,
        )


class Program:
    """A resolver the tests run: `binary` found on the PATH or in /usr/sbin."""

    def __init__(self, name: str, binary: str, version_args: list[str], package: str):
        self.name, self.binary, self.version_args, self.package = name, binary, version_args, package
        self.UNAVAILABLE = None
        self.VERSION = None

    def path(self) -> str | None:
        return shutil.which(self.binary) or shutil.which(self.binary, path="/usr/sbin:/usr/bin")

    def probe(self) -> None:
        found = self.path()
        if found is None:
            self.UNAVAILABLE = f"no {self.binary} found (scripts/ensure-resolvers installs Debian's {self.package})"
            return
        try:
            done = subprocess.run([found, *self.version_args], capture_output=True, text=True, timeout=20)
        except (OSError, subprocess.SubprocessError) as exc:
            self.UNAVAILABLE = f"{found} {' '.join(self.version_args)} failed: {exc}"
            return
        self.VERSION = (done.stdout or done.stderr).strip().splitlines()[0] if (done.stdout or done.stderr) else "?"

    def banner(self) -> str:
        return f"{self.name} UNAVAILABLE - its dnstap tests SKIPPED: {self.UNAVAILABLE}"

    def require(self) -> str:
        if self.VERSION is None and self.UNAVAILABLE is None:
            self.probe()
        if self.UNAVAILABLE:
            pytest.skip(self.banner())
        return self.path()


BIND = Program("BIND 9", "named", ["-v"], "bind9")
KNOT = Program("Knot Resolver", "kresd", ["--version"], "knot-resolver")
DNSDIST = Program("dnsdist", "dnsdist", ["--version"], "dnsdist")
PROGRAMS = (BIND, KNOT, DNSDIST)

# What every resolver serves: (name, type) -> addresses; the rest of home.example is NXDOMAIN.
ADDRESSES = {
    ("a.home.example", "A"): ["192.0.2.1", "192.0.2.2"],
    ("b.home.example", "AAAA"): ["2001:db8::1"],
}


class Resolver:
    """A resolver process: started with its command line, stopped with SIGTERM."""

    program: Program
    quick_start: str  # its quick start's name in docs/feeding.md

    def __init__(self, folder: pathlib.Path, socket_path, *, user: str | None = None, lines: str | None = None):
        """`user`: started as root, run as that user and its group alone (as Debian's units
        run it), owning the folder and the files it is given there. `lines`: its dnstap lines
        (docs/feeding.md's quick start, for `socket_path`, unless given)."""
        servers.refuse_in_fast_lane(self.program.name)
        self.binary = self.program.require()
        self.folder, self.user = folder, user
        self.port = free_port()
        self.log_path = folder / f"{self.program.binary}.log"
        self.log = open(self.log_path, "ab")
        if lines is None:
            lines = documented_lines(self.quick_start, socket_path)
        said = self.log_path.stat().st_size
        self.process = self._launch(lines)
        if self._answering():
            return
        why = self._gone()
        output = self.log_path.read_bytes()[said:].decode(errors="replace")
        try:
            refused(self.program.name, lines, why, output, lambda: self._starts_with(""))
        finally:
            self.stop()
        tried = self.log_path.read_bytes()[said:].decode(errors="replace")
        self.program.UNAVAILABLE = f"it did not start, even without its dnstap lines ({why}): {tried[-800:]}"
        pytest.skip(self.program.banner())

    def command(self, lines: str) -> list[str]:
        """Its command line, with its configuration written: the suite's own, and `lines`."""
        raise NotImplementedError

    def _launch(self, lines: str) -> subprocess.Popen:
        before = set(self.folder.iterdir())
        command = self.command(lines)
        if self.user:
            for path in {self.folder, *(set(self.folder.iterdir()) - before)}:
                shutil.chown(path, self.user, self.user)
        return subprocess.Popen(
            command,
            cwd=self.folder,
            stdout=self.log,
            stderr=subprocess.STDOUT,
            start_new_session=True,
            user=self.user,
            group=self.user,
            extra_groups=[] if self.user else None,
        )

    def _answering(self) -> bool:
        """Until it answers on its port (over TCP: a UDP probe would be logged as a query,
        and the tests count what is logged; a TCP connection alone is not)."""
        return processes.started(
            self.process, lambda: processes.listening(self.port, timeout=0.5), timeout=20, interval=0.1
        )

    def _gone(self) -> str:
        """Why it is not answering (it exited, or the time ran out), once stopped."""
        status = self.process.poll()
        processes.stop(self.process)
        return f"exit status {status}" if status is not None else "not answering after 20 s"

    def _starts_with(self, lines: str) -> bool:
        """Whether it starts with `lines` instead (stopped again at once)."""
        self.process = self._launch(lines)
        try:
            return self._answering()
        finally:
            processes.stop(self.process)

    def ask(self, name, rdtype, *, recursion=True, tcp=False, timeout=5.0) -> dns.message.Message:
        query = dns.message.make_query(name, rdtype)
        if not recursion:
            query.flags &= ~dns.flags.RD
        send = dns.query.tcp if tcp else dns.query.udp
        return send(query, "127.0.0.1", port=self.port, timeout=timeout)

    def stop(self):
        processes.stop(self.process)
        self.log.close()


class Bind(Resolver):
    """`named -g` serving home.example from a zone file, recursion for nobody else."""

    program = BIND
    quick_start = "bind"

    def command(self, lines):
        zone = self.folder / "home.example.zone"
        records = "\n".join(f"{name}. 300 IN {rdtype} {ip}" for (name, rdtype), ips in ADDRESSES.items() for ip in ips)
        zone.write_text(
            "$TTL 300\n"
            "home.example. IN SOA ns.home.example. admin.home.example. 1 3600 600 86400 300\n"
            "home.example. IN NS ns.home.example.\n"
            "ns.home.example. IN A 127.0.0.1\n" + records + "\n"
        )
        conf = self.folder / "named.conf"
        conf.write_text(
            f"""options {{
    directory "{self.folder}";
    pid-file none;
    listen-on port {self.port} {{ 127.0.0.1; }};
    listen-on-v6 {{ none; }};
    recursion no;
    allow-query {{ any; }};
    dnssec-validation no;
{lines}
}};
zone "home.example" {{ type primary; file "{zone}"; }};
"""
        )
        return [self.binary, "-g", "-n", "1", "-c", str(conf)]


class Knot(Resolver):
    """`kresd` with hints for home.example's names; nothing leaves the machine."""

    program = KNOT
    quick_start = "knot"

    def command(self, lines):
        hints = "\n".join(f"hints.set('{name} {ip}')" for (name, _), ips in ADDRESSES.items() for ip in ips)
        conf = self.folder / "kresd.conf"
        conf.write_text(
            f"""net.listen('127.0.0.1', {self.port}, {{ kind = 'dns' }})
{lines}
modules.load('hints > iterate')
hints.use_nodata(true)
{hints}
-- a blocklisted zone (NXDOMAIN); the name docs/feeding.md's check asks refused, so that no
-- test asks a name that would be sought on the internet
policy.add(policy.suffix(policy.DENY, {{todname('ads.example.')}}))
policy.add(policy.suffix(policy.REFUSE, {{todname('example.com.')}}))
"""
        )
        (self.folder / "kresd").mkdir(exist_ok=True)
        return [self.binary, "-n", "-c", str(conf), str(self.folder / "kresd")]


class Dnsdist(Resolver):
    """`dnsdist` in front of a small upstream (answering home.example's names), with its packet
    cache, answering one name itself."""

    program = DNSDIST
    quick_start = "dnsdist"

    def __init__(self, folder, socket_path, **how):
        self.upstream = Upstream()
        super().__init__(folder, socket_path, **how)

    def command(self, lines):
        conf = self.folder / "dnsdist.conf"
        conf.write_text(
            f"""setLocal('127.0.0.1:{self.port}')
newServer({{ address = '127.0.0.1:{self.upstream.port}' }}):setUp()
getPool(''):setCache(newPacketCache(1000))
addAction(QNameRule('self.home.example'), SpoofAction({{'192.0.2.9'}}))
{lines}
"""
        )
        return [self.binary, "--supervised", "--disable-syslog", "-C", str(conf)]

    def stop(self):
        super().stop()
        self.upstream.stop()


class Upstream:
    """A DNS server on threads, UDP and TCP on one port: ADDRESSES, NXDOMAIN for the rest of
    home.example, REFUSED elsewhere (dnsdist's backend)."""

    def __init__(self):
        # A port free for UDP may be taken for TCP (another test's connection has it as its
        # own end): take another then.
        for _ in range(50):
            self.udp = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
            self.udp.bind(("127.0.0.1", 0))
            self.port = self.udp.getsockname()[1]
            try:
                self.tcp = socket.create_server(("127.0.0.1", self.port))
                break
            except OSError:
                self.udp.close()
        else:
            raise OSError("no port free for both UDP and TCP")
        threading.Thread(target=self._serve_udp, daemon=True).start()
        threading.Thread(target=self._serve_tcp, daemon=True).start()

    def _serve_udp(self):
        while True:
            try:
                wire, peer = self.udp.recvfrom(4096)
            except OSError:
                return
            self.udp.sendto(self._answer(wire), peer)

    def _serve_tcp(self):
        while True:
            try:
                connection, _ = self.tcp.accept()
            except OSError:
                return
            with connection:
                try:
                    while True:
                        query, _ = dns.query.receive_tcp(connection, time.time() + 5)
                        dns.query.send_tcp(connection, self._answer(query.to_wire()))
                except (EOFError, OSError, dns.exception.DNSException):
                    pass

    @staticmethod
    def _answer(wire: bytes) -> bytes:
        query = dns.message.from_wire(wire)
        response = dns.message.make_response(query)
        question = query.question[0]
        key = (question.name.to_text(omit_final_dot=True), dns.rdatatype.to_text(question.rdtype))
        if key in ADDRESSES:
            response.answer.append(dns.rrset.from_text(question.name, 300, "IN", key[1], *ADDRESSES[key]))
        elif not question.name.to_text().endswith("home.example."):
            response.set_rcode(dns.rcode.REFUSED)
        else:
            response.set_rcode(dns.rcode.NXDOMAIN)
        return response.to_wire()

    def stop(self):
        self.udp.close()
        self.tcp.close()
