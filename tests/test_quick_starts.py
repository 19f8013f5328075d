"""docs/feeding.md's quick start per resolver, run from the docs' own blocks: the folder made by
its `install` line, the collector by its command, the real resolver (Unbound, BIND, Knot
Resolver, dnsdist) given its lines and run as Debian runs it (its own user, when the suite runs
as root), and the check's query seen arriving through the check's URL. And the collector's own
errors when it cannot make its socket.

What differs on a test machine is replaced, and only this (docs/testing.md, "The quick starts"):

| in the docs | in the test |
|---|---|
| `/run/dns-analytics` | a folder of the test's own |
| the resolver's group (`-g unbound`, ...) | the test's own group, when the suite does not run as root |
| the file the lines go into, `systemctl restart` | the test's resolver, started with the lines in its configuration |
| `dig @127.0.0.1 NAME` | the same question sent to the resolver's port |
| `curl ... "http://127.0.0.1:8000PATH"` | PATH asked of the test's app, with the test's key |
"""

import grp
import os
import re
import shlex
import subprocess

import dns.message
import dns.query
import pytest

from support import unbound
from support.collecting import FEED, Collector, api_client, short_folder
from support.helpers import AUTH, wait_for
from support.resolvers import DOCS_FOLDER, Bind, Dnsdist, Knot, documented_lines, quick_start
from support.servers import ROOT
from support.unbound import Unbound

# What is tested is the docs' lines and the collector: the store's engine adds nothing
# test_dnstap.py does not cover on both.
pytestmark = pytest.mark.sqlite_only

ROOTED = os.geteuid() == 0
# The quick start's name -> (starts the test's resolver, the group its folder is open to: the
# user Debian runs it as).
RESOLVERS = {
    "unbound": (lambda folder, socket_path, lines, user: Unbound(folder, dnstap=lines), "unbound"),
    "bind": (lambda folder, socket_path, lines, user: Bind(folder, socket_path, user=user, lines=lines), "bind"),
    "knot": (
        lambda folder, socket_path, lines, user: Knot(folder, socket_path, user=user, lines=lines),
        "knot-resolver",
    ),
    "dnsdist": (
        lambda folder, socket_path, lines, user: Dnsdist(folder, socket_path, user=user, lines=lines),
        "_dnsdist",
    ),
}


@pytest.fixture
def folder():
    with short_folder("quick-") as path:
        yield path


@pytest.fixture
def api(make_app, database):
    return api_client(make_app, database)


@pytest.mark.parametrize("name", RESOLVERS)
def test_each_quick_start_works_as_written(name, folder, api):
    start_resolver, group = RESOLVERS[name]
    if ROOTED and name == "unbound" and not unbound.USER:
        pytest.skip("no unbound user: Unbound would run as root, and the folder's group would prove nothing")
    socket_folder = folder / "run"
    user = group if ROOTED else None
    assert f"-g {group} " in quick_start(f"{name} folder")

    def as_here(text: str) -> str:
        text = text.replace(DOCS_FOLDER, str(socket_folder))
        return text if ROOTED else text.replace(f"-g {group} ", f"-g {grp.getgrgid(os.getgid()).gr_name} ")

    subprocess.run(["sh", "-ec", as_here(quick_start(f"{name} folder"))], check=True)
    assert oct(socket_folder.stat().st_mode & 0o777) == "0o750"

    program, command, *options = shlex.split(as_here(quick_start("collector")))
    assert (program, command) == (".venv/bin/dns-analytics-feed", "collect-dnstap")
    socket_path = options[options.index("--socket") + 1]
    collector = Collector(folder, api.database, *options, program=FEED, endpoint="home")
    resolver = None
    try:
        resolver = start_resolver(folder, socket_path, documented_lines(name, socket_path), user)
        question, path = check_lines()
        dns.query.udp(dns.message.make_query(question, "A"), "127.0.0.1", port=resolver.port, timeout=5)

        def arrived():
            response = api.get(path, headers=AUTH)
            assert response.status_code == 200, response.json
            return [record for record in response.json["queries"] if record["question"] == question]

        wait_for(arrived, 15, f"the check's {question} in {path}\n{collector.output()}")
        (record,) = arrived()
        assert record["endpointId"] == "home"
    finally:
        if resolver:
            resolver.stop()
        assert collector.stop() == 0


# One line of each quick start's lines as a slip in the docs would change it (dnsdist's was
# found so: it refused the queue size, and its quick start was skipped, not failed): the line,
# its slip, and what the resolver says of it.
SLIPS = {
    "unbound": (
        "dnstap-log-client-query-messages: yes",
        "dnstap-log-client-query-messages: perhaps",
        "error: expected yes or no",
    ),
    "bind": (
        "fstrm-set-output-queue-size 2;",
        "fstrm-set-output-queue-size 1;",
        "fstrm-set-output-queue-size '1' out of range (2..1024)",
    ),
    "knot": (
        "log_queries = true, log_responses = true",
        "log_queries = true log_responses = true",
        "'}' expected near 'log_responses'",
    ),
    "dnsdist": ("outputQueueSize = 2", "outputQueueSize = 1", "setting outputQueueSize failed"),
}


@pytest.mark.parametrize("name", RESOLVERS)
def test_a_quick_start_line_the_resolver_refuses_fails_the_test(name, folder):
    """Its quick start fails with the resolver's own words, not skipped as if the resolver were
    unavailable: it starts with the suite's own configuration, so the lines are at fault."""
    start_resolver, group = RESOLVERS[name]
    user = group if ROOTED else None
    socket_path = folder / "dnstap.sock"
    line, slip, said = SLIPS[name]
    lines = documented_lines(name, socket_path)
    assert lines.count(line) == 1, lines
    # Without the lines: where the resolver cannot start even so, skipped here (unavailable).
    start_resolver(folder, socket_path, "", user).stop()
    try:
        resolver = start_resolver(folder, socket_path, lines.replace(line, slip), user)
    except pytest.fail.Exception as failure:
        message = str(failure)
    except pytest.skip.Exception as skip:
        pytest.fail(f"skipped as unavailable, though it had just started without its lines: {skip}")
    else:
        resolver.stop()
        pytest.fail(f"it started with {slip!r}")
    assert slip in message and said in message, message


def check_lines() -> tuple[str, str]:
    """The check's question (from its `dig`) and the path and query its `curl` asks."""
    dig, curl = quick_start("check").strip().splitlines()
    words = shlex.split(dig)
    assert words[:2] == ["dig", "@127.0.0.1"] and len(words) == 3, dig
    url = re.search(r'"http://127\.0\.0\.1:8000(/v2/[^"]+)"', curl)
    assert url and url.group(1).count(words[2]) == 1, curl
    return words[2], url.group(1)


def test_a_folder_the_collector_may_not_write_in_is_named_with_the_fix(folder):
    """Its user may not make files there (as root, the collector runs as nobody): the error
    names the path, the user, and the command that makes the folder right."""
    socket_folder = folder / "run"
    socket_folder.mkdir(mode=0o755)
    database = folder / "db"
    database.mkdir(mode=0o777)
    database.chmod(0o777)
    # setpriv rather than Popen's user=: the interpreter the venv links to is under /root here,
    # whose exec Popen's child was refused.
    as_nobody = ["setpriv", "--reuid=nobody", "--regid=nogroup", "--clear-groups"] if ROOTED else []
    if not ROOTED:
        socket_folder.chmod(0o555)
    done = subprocess.run(
        [*as_nobody, *FEED, "collect-dnstap", "--socket", str(socket_folder / "dnstap.sock")],
        cwd=ROOT,
        env={**os.environ, "ANALYTICS_DATABASE": str(database / "analytics.db")},
        capture_output=True,
        text=True,
        timeout=60,
    )
    user = "nobody" if ROOTED else subprocess.run(["id", "-un"], capture_output=True, text=True).stdout.strip()
    assert done.returncode == 1, done
    assert done.stderr.strip() == (
        f"Error: {socket_folder}/dnstap.sock: permission denied: the collector runs as {user}, who may not make "
        f"files in {socket_folder}; make the folder {user}'s and open to the resolver's group "
        f"(install -d -m 0750 -o {user} -g GROUP {socket_folder}) or run the collector as the folder's owner"
    ), done.stderr


@pytest.mark.skipif(not ROOTED, reason="only a collector run as root makes a socket only root may use")
def test_a_socket_only_root_may_use_is_warned_of(folder, api):
    collector = Collector(folder, api.database, "--socket", str(folder / "dnstap.sock"), program=FEED)
    try:
        assert f"WARNING: only root may connect to {folder / 'dnstap.sock'} (root:root, mode 660)" in collector.output()
    finally:
        assert collector.stop() == 0
    # With the quick start's mode, no warning.
    collector = Collector(folder, api.database, "--socket", str(folder / "dnstap.sock"), "--socket-mode", "666")
    try:
        assert "WARNING" not in collector.output()
    finally:
        assert collector.stop() == 0
