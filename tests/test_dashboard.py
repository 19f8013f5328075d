"""The dashboard in a real browser: headless Chromium on the page a real gunicorn serves, against
known data; what the page shows must equal what the API answers for the same question."""

import json
import os
import subprocess
import sys
import time
import urllib.parse
import urllib.request
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest

from support import nginx
from support.browser import MISSING, Chromium, find_chromium
from support.helpers import API_KEY, AUTH, record
from support.servers import ROOT, Gunicorn, free_port

DESKTOP = (1280, 900)
PHONE = (390, 844)
CLIENTS = [("home", "laptop"), ("home", "phone"), ("home", "tv"), ("cabin", "laptop"), ("cabin", "sensor")]
DOMAINS = ["example.com", "news.example", "video.example", "mail.example", "shop.example"]
BLOCKED = ["ads.example.net", "tracker.example"]
# Names too long for a narrow column: the layout test's (a 58-character blocked one among them).
LONG_NAME = "img.instagram.com"
LONG_BLOCKED = "telemetry-collection.metrics-endpoint.adserver-example.net"
PROTOCOLS = ["doh", "dot", "legacy", "doq"]
RR_TYPES = ["A", "AAAA", "HTTPS"]
UPSTREAMS = ["9.9.9.9#53", "1.1.1.1#853", "192.0.2.53#53"]


def iso(moment: datetime) -> str:
    return moment.isoformat(timespec="milliseconds").replace("+00:00", "Z")


def known_data(now: datetime) -> list[dict]:
    """Every record within the last 36 hours: the last hour densely, so each window and its
    previous window have something to compare."""
    records = []
    for n in range(120):
        endpoint, client = CLIENTS[n % len(CLIENTS)]
        blocked = n % 4 == 0
        minutes_ago = n * 2 + 1 if n < 40 else (n * 37) % (36 * 60) + 1
        extra = {
            "rrType": RR_TYPES[n % 3],
            "protocol": PROTOCOLS[n % 4],
            "statusCode": "NXDOMAIN" if n % 9 == 0 else "NOERROR",
            "action": 0 if blocked else 1,
            "trigger": "filter" if blocked else "default",
            "sourceIp": f"192.0.2.{n % len(CLIENTS) + 10}",
            "answers": [] if blocked else [{"ips": [f"198.51.100.{n % 200}"]}],
            # What the resolver forwarded (blocked queries went nowhere), and how long it took.
            "upstream": "" if blocked else UPSTREAMS[n % 3],
            "responseTimeMs": None if blocked else round(0.4 + (n * 7) % 45 + n / 10, 1),
            "client": {
                "host": f"{client}.{endpoint}.lan",
                "mac": f"aa:bb:cc:00:00:{n % len(CLIENTS):02x}",
                "ip": f"192.0.2.{n % len(CLIENTS) + 10}",
                "vendor": "Acme",
                "os": {"type": "linux", "version": "6.1", "arch": "arm64"},
            },
        }
        question = BLOCKED[n // 4 % 2] if blocked else DOMAINS[(n * n) % len(DOMAINS)]
        records.append(record(endpoint, client, iso(now - timedelta(minutes=minutes_ago)), question, **extra))
    # Names a client asked for the first time within the last day (the client page's newly seen).
    for endpoint, client, minutes_ago, question in (
        ("home", "laptop", 30, "fresh.example.org"),
        ("home", "laptop", 200, "www.fresh.example.org"),
        ("cabin", "laptop", 90, "first.example.net"),
    ):
        records.append(record(endpoint, client, iso(now - timedelta(minutes=minutes_ago)), question))
    # Long names in this window and the one before it (the trends), blocked and newly seen ones.
    for n in range(6):
        records.append(record("home", "phone", iso(now - timedelta(minutes=5 + n)), LONG_NAME))
        records.append(record("home", "phone", iso(now - timedelta(hours=30, minutes=n)), LONG_NAME))
        blocked = {"action": 0, "trigger": "filter"}
        records.append(record("home", "laptop", iso(now - timedelta(minutes=7 + n)), LONG_BLOCKED, **blocked))
    records.append(record("home", "laptop", iso(now - timedelta(minutes=45)), "cdn-" + LONG_BLOCKED))
    # A client whose records were all deleted: the page says "data expired".
    records.append(record("home", "old-printer", iso(now - timedelta(hours=2)), "printer.example"))
    return records


@pytest.fixture(scope="module")
def server(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("dashboard-server")
    # A short backlog, so that a resume from far back shows its gap (the live tail's test).
    env = {
        "ANALYTICS_DATABASE": str(tmp / "analytics.db"),
        "ANALYTICS_API_KEY": API_KEY,
        "ANALYTICS_STREAM_BACKLOG": "5",
        "ANALYTICS_ALERT_INTERVAL": "1",  # the alerts view's alert comes within seconds
    }
    server = Gunicorn(tmp, env, workers=2)
    try:
        assert server.call("POST", "/v2/ingest", known_data(datetime.now(UTC)), AUTH)[0] == 200
        assert server.call("PUT", "/v2/client/alias/home/tv", {"alias": "Living room"}, AUTH)[0] == 200
        deleted = server.call("DELETE", "/v2/activity-log?endpointId=home&clientId[]=old-printer", None, AUTH)
        assert deleted == (200, {"deletedCount": 1})
        yield server
    finally:
        server.stop()


@pytest.fixture(scope="module")
def browser(tmp_path_factory):
    if find_chromium() is None:
        pytest.fail(MISSING, pytrace=False)  # loudly: a skip would hide the browser tests
    chromium = Chromium(tmp_path_factory.mktemp("chromium"))
    chromium.resize(*DESKTOP)
    try:
        yield chromium
    finally:
        chromium.close()


@pytest.fixture(scope="module")
def shots(tmp_path_factory):
    return tmp_path_factory.mktemp("dashboard-screenshots")


def screenshots(browser, shots, name, dark=False):
    """The view as a desktop and as a phone shows it (and in dark mode too with `dark`), saved as
    PNG files a person can open."""
    sizes = [("desktop", DESKTOP, False), ("phone", PHONE, True)]
    if dark:
        sizes += [("desktop-dark", DESKTOP, False), ("phone-dark", PHONE, True)]
    for label, (width, height), mobile in sizes:
        browser.color_scheme("dark" if label.endswith("dark") else "light")
        browser.resize(width, height, mobile)  # returns once the charts followed the resize event
        path = browser.screenshot(shots / f"{name}-{label}.png", full_page=mobile)
        print(f"screenshot: {path}")
    browser.color_scheme("light")
    browser.resize(*DESKTOP)


def api(server, path, params=(), headers=AUTH):
    query = urllib.parse.urlencode(list(params))
    status, body = server.call("GET", f"/v2/{path}?{query}" if query else f"/v2/{path}", None, headers)
    assert status == 200, body
    return body


def sign_in(browser, server, key, view="overview"):
    """Open the page, sign out if a key is kept, sign in with `key`; `view` loads next."""
    browser.open(f"{server.base}/")
    signed_in = browser.wait_for(
        "!document.getElementById('signin').hidden ? 'no' : document.getElementById('app').dataset.loaded && 'yes'"
    )
    if signed_in == "yes":
        browser.evaluate("document.getElementById('sign-out').click()")
    assert browser.evaluate("sessionStorage.length") == 0
    browser.evaluate(
        f"location.hash = {json.dumps(view)};"
        f"document.getElementById('signin-key').value = {json.dumps(key)};"
        "document.getElementById('signin-form').requestSubmit()"
    )


def loaded(browser, view):
    """Wait until the page shows `view` loaded for the URL it is at (not a URL before it)."""
    app = "document.getElementById('app').dataset"
    browser.wait_for(f"{app}.loaded === {json.dumps(view)} && {app}.url === location.hash")


def show(browser, view):
    """Go to `view`, a view's name with any parameters of its URL, and wait until it is loaded."""
    browser.evaluate(f"location.hash = {json.dumps(view)}")
    loaded(browser, view.split("?")[0])


def control(browser, element, value, event="change"):
    """Set a form control as a person would, and let the page hear of it."""
    browser.evaluate(
        f"(() => {{ const el = document.getElementById({json.dumps(element)}); el.value = {json.dumps(value)};"
        f" el.dispatchEvent(new Event({json.dumps(event)})); }})()"
    )


def page_window(browser):
    data = browser.evaluate("({...document.getElementById('app').dataset})")
    return [("startTime", data["start"]), ("endTime", data["end"])]


def bar_rows(browser, table):
    return browser.evaluate(
        f"Array.from(document.querySelectorAll('#{table} tr[data-value]'),"
        " (tr) => ({value: tr.dataset.value, count: Number(tr.dataset.count)}))"
    )


def number(browser, element):
    return float(browser.evaluate(f"document.getElementById('{element}').dataset.value"))


def test_the_page_is_served_with_a_strict_policy_and_a_wrong_key_is_refused(server, browser):
    for path in ("/", "/dashboard"):
        with urllib.request.urlopen(server.base + path) as response:
            assert response.headers["Content-Type"].startswith("text/html")
            policy = response.headers["Content-Security-Policy"]
    assert "script-src 'self'" in policy and "unsafe-inline" not in policy and "connect-src 'self'" in policy
    status, body = server.call("GET", "/v2/no-such-thing")
    assert status == 404 and body["success"] is False  # API paths keep their JSON 404

    sign_in(browser, server, "not-a-key")
    message = browser.wait_for("document.getElementById('signin-error').textContent")
    assert "refused" in message and "Invalid API key" in message
    assert browser.evaluate("document.getElementById('app').hidden") is True
    assert browser.evaluate("sessionStorage.length") == 0
    assert all("not-a-key" not in url for url in browser.requests)


def test_overview_shows_the_apis_numbers(server, browser, shots):
    sign_in(browser, server, API_KEY)
    loaded(browser, "overview")
    window = page_window(browser)
    total = api(server, "statistic/count", window)["count"]
    blocked = api(server, "statistic/count", [*window, ("action[]", "0")])["count"]
    assert total > 0 and blocked > 0
    assert number(browser, "total-count") == total
    assert number(browser, "blocked-count") == blocked
    assert number(browser, "blocked-share") == pytest.approx(blocked / total)
    chart = browser.evaluate("({...document.getElementById('chart').dataset})")
    assert (int(chart["total"]), int(chart["blocked"])) == (total, blocked)

    def top(group, *extra):
        return api(server, f"statistic/count/{group}", [*window, ("limit", "10"), *extra])["counts"]

    assert bar_rows(browser, "top-domains") == top("question")
    assert bar_rows(browser, "top-blocked") == top("question", ("action[]", "0"))
    assert bar_rows(browser, "top-clients") == top("clientId")
    for group in ("protocol", "statusCode", "rrType"):
        assert bar_rows(browser, f"by-{group}") == top(group)
    trends = api(server, "statistic/trend/question", [*window, ("limit", "10")])["trends"]
    assert bar_rows(browser, "trend-domains") == [{"value": t["value"], "count": t["count"]} for t in trends]

    # Every request went to the service, and its policy blocked nothing the page needs.
    assert all(url.startswith(f"{server.base}/") for url in browser.requests if not url.startswith("data:"))
    assert not [line for line in browser.console if "Content Security Policy" in line], browser.console
    screenshots(browser, shots, "overview", dark=True)

    # One endpoint, last hour: still the API's numbers.
    browser.evaluate(
        "document.getElementById('window').value = '3600';"
        "document.getElementById('endpoint').value = 'cabin';"
        "document.getElementById('endpoint').dispatchEvent(new Event('change'))"
    )
    loaded(browser, "overview")
    window = page_window(browser)
    assert number(browser, "total-count") == api(server, "statistic/count", [*window, ("endpointId", "cabin")])["count"]
    assert bar_rows(browser, "top-clients") == top("clientId", ("endpointId", "cabin"))

    # A custom window (local time in the page): from 30 hours ago to 1 hour ago.
    control(browser, "endpoint", "")
    loaded(browser, "overview")
    control(browser, "window", "custom")
    loaded(browser, "overview")
    local = "(d) => new Date(d - d.getTimezoneOffset() * 60000).toISOString().slice(0, 19)"
    browser.evaluate(
        f"(() => {{ const local = {local}, now = Date.now();"
        " document.getElementById('custom-start').value = local(new Date(now - 30 * 3600e3));"
        " document.getElementById('custom-end').value = local(new Date(now - 3600e3));"
        " document.getElementById('custom-end').dispatchEvent(new Event('change')); })()"
    )
    loaded(browser, "overview")
    window = page_window(browser)
    hours = (datetime.fromisoformat(window[1][1]) - datetime.fromisoformat(window[0][1])).total_seconds() / 3600
    assert hours == pytest.approx(29, abs=0.01)
    assert number(browser, "total-count") == api(server, "statistic/count", window)["count"]
    assert bar_rows(browser, "top-domains") == top("question")


def client_rows(browser):
    return browser.evaluate(
        "Array.from(document.querySelectorAll('#clients tbody tr'), (tr) => ({"
        " endpoint: tr.dataset.endpoint, client: tr.dataset.client, last: tr.dataset.last,"
        " cells: Array.from(tr.cells, (td) => td.textContent)}))"
    )


def test_clients_view_lists_the_apis_clients_and_changes_them(server, browser, shots):
    sign_in(browser, server, API_KEY, "clients")
    loaded(browser, "clients")
    items = api(server, "client")["items"]
    rows = client_rows(browser)
    expected = {(e, c): entry for e, block in items.items() for c, entry in block["clients"].items()}
    assert {(r["endpoint"], r["client"]) for r in rows} == set(expected)
    for r in rows:
        entry = expected[(r["endpoint"], r["client"])]
        assert r["last"] == (entry["lastActivityTime"] or "")
        assert r["cells"][2:6] == [entry["alias"], entry["host"], entry["ip"] or "", entry["mac"]]
        assert r["cells"][7] == entry["vendor"]
        if entry["lastActivityTime"] is None:
            assert r["cells"][8] == "data expired"
        else:
            assert r["cells"][8].endswith("ago") or r["cells"][8] == "just now"
    assert [r["last"] for r in rows] == sorted((r["last"] for r in rows), reverse=True)  # newest first
    assert rows[-1]["client"] == "old-printer"
    screenshots(browser, shots, "clients")

    # Search narrows the rows; a header sorts them.
    control(browser, "client-search", "Living", "input")
    assert [(r["endpoint"], r["client"]) for r in client_rows(browser)] == [("home", "tv")]
    control(browser, "client-search", "", "input")
    browser.evaluate("document.querySelector('#clients th[data-sort=clientId]').click()")
    names = [r["client"] for r in client_rows(browser)]
    assert names == sorted(names)

    # Set an alias, then clear it, from the page.
    row = "document.querySelector('#clients tr[data-endpoint=cabin][data-client=sensor]')"
    browser.evaluate(
        f"{row}.querySelector('.alias-edit').click();"
        f"{row}.querySelector('.alias-form input').value = 'Garden sensor';"
        f"{row}.querySelector('.alias-form').requestSubmit()"
    )
    browser.wait_for(f"{row} && {row}.cells[2].textContent === 'Garden sensor'")
    assert api(server, "client", [("endpointId", "cabin")])["items"]["cabin"]["clients"]["sensor"]["alias"] == (
        "Garden sensor"
    )
    browser.evaluate(
        f"{row}.querySelector('.alias-edit').click();"
        f"Array.from({row}.querySelectorAll('.alias-form button')).find((b) => b.textContent === 'Clear').click()"
    )
    browser.wait_for(f"{row} && {row}.cells[2].textContent === ''")
    assert api(server, "client", [("endpointId", "cabin")])["items"]["cabin"]["clients"]["sensor"]["alias"] == ""

    # Stop logging a client, then log it again: one of this test's own, as stopping deletes its
    # records, which the later tests' known data must keep.
    doorbell_record = record("cabin", "doorbell", iso(datetime.now(UTC) - timedelta(minutes=1)), "ring.example")
    assert server.call("POST", "/v2/ingest", [doorbell_record], AUTH)[0] == 200
    browser.evaluate("document.getElementById('refresh').click()")
    doorbell = "document.querySelector('#clients tr[data-endpoint=cabin][data-client=doorbell]')"
    browser.wait_for(f"{doorbell} !== null")
    loaded(browser, "clients")
    browser.evaluate(f"{doorbell}.querySelector('.client-logging').click()")
    browser.wait_for(f"{doorbell} && {doorbell}.querySelector('.not-logged') !== null")
    assert api(server, "client", [("endpointId", "cabin")])["items"]["cabin"]["clients"]["doorbell"]["logged"] is False
    assert "no longer logged" in browser.evaluate("document.getElementById('app-note').textContent")
    browser.evaluate(f"{doorbell}.querySelector('.client-logging').click()")
    browser.wait_for(f"{doorbell} && {doorbell}.querySelector('.not-logged') === null")
    assert api(server, "client", [("endpointId", "cabin")])["items"]["cabin"]["clients"]["doorbell"]["logged"] is True

    # Delete a client's data: the confirmation says what goes; confirming deletes it.
    browser.evaluate(f"{row}.querySelector('.client-delete').click()")
    text = browser.wait_for(
        "document.getElementById('confirm-delete').open && document.getElementById('delete-text').textContent"
    )
    assert '"sensor"' in text and '"cabin"' in text and "up to" in text and "cannot be undone" in text
    screenshots(browser, shots, "clients-delete")
    browser.evaluate("document.getElementById('delete-confirm').click()")
    browser.wait_for(f"!{row}")
    note = browser.evaluate("document.getElementById('app-note').textContent")
    assert note.startswith('Deleted the records of "sensor"') and "its entry was deleted" in note
    assert "sensor" not in api(server, "client", [("endpointId", "cabin")])["items"]["cabin"]["clients"]
    admin = api(server, "admin-action", [("startTime", "2020-01-01T00:00:00Z"), ("action", "client.delete")])
    deleted = admin["actions"][0]["metadata"]["result"]["deletedClients"]
    assert deleted == [{"endpointId": "cabin", "clientId": "sensor"}]


def log_rows(browser):
    return browser.evaluate(
        "Array.from(document.querySelectorAll('#log tbody tr'), (tr) => Array.from(tr.cells, (td) => td.textContent))"
    )


def test_query_log_shows_the_apis_page_and_tails_live(server, browser, shots):
    sign_in(browser, server, API_KEY, "log")
    loaded(browser, "log")
    window = page_window(browser)
    queries = api(server, "activity-log", [*window, ("pageSize", "50")])["queries"]
    assert [r[3] for r in log_rows(browser)] == [q["question"] for q in queries]

    # The filters as controls: blocked queries of one protocol.
    browser.evaluate(
        "document.getElementById('f-action').value = '0';"
        "document.getElementById('f-protocol').value = 'doh';"
        "document.getElementById('log-filters').requestSubmit()"
    )
    loaded(browser, "log")
    window = page_window(browser)
    filtered = api(server, "activity-log", [*window, ("action[]", "0"), ("protocol[]", "doh"), ("pageSize", "50")])
    rows = log_rows(browser)
    assert [r[3] for r in rows] == [q["question"] for q in filtered["queries"]] and rows
    assert {(r[6], r[7]) for r in rows} == {("doh", "blocked")}
    screenshots(browser, shots, "log")

    # A pattern (RE2) on the question: the page's rows are the API's.
    pattern = r"^[a-m][^.]*\.(com|net)$"
    browser.evaluate(
        "document.getElementById('f-action').value = '';"
        "document.getElementById('f-protocol').value = '';"
        f"document.getElementById('f-search').value = {json.dumps(pattern)};"
        "document.getElementById('f-mode').value = 'regex';"
        "document.getElementById('log-filters').requestSubmit()"
    )
    loaded(browser, "log")
    window = page_window(browser)
    search = [("searchQuestion", pattern), ("searchQuestionMode", "regex"), ("pageSize", "50")]
    matching = api(server, "activity-log", [*window, *search])["queries"]
    rows = log_rows(browser)
    assert [r[3] for r in rows] == [q["question"] for q in matching] and rows
    browser.evaluate(
        "document.getElementById('f-search').value = '';document.getElementById('f-mode').value = 'includes';"
    )

    # Live: a record ingested after the switch is on appears within 2 s.
    browser.evaluate(
        "document.getElementById('f-action').value = '';"
        "document.getElementById('f-protocol').value = '';"
        "document.getElementById('log-filters').requestSubmit()"
    )
    loaded(browser, "log")
    browser.evaluate("document.getElementById('live').click()")
    browser.wait_for("document.getElementById('live-status').dataset.state === 'open'")
    live = "Array.from(document.querySelectorAll('#log tbody tr.new'), (tr) => tr.cells[3].textContent)"
    now = datetime.now(UTC)
    assert server.call("POST", "/v2/ingest", [record("home", "laptop", iso(now), "live.example")], AUTH)[0] == 200
    started = time.monotonic()
    browser.wait_for(f"{live}.includes('live.example')", timeout=5)
    assert time.monotonic() - started < 2

    # After a drop (the whole server killed and restarted), the page reconnects with a new token
    # and the last event's id: a record ingested meanwhile arrives, nothing twice.
    server.kill_all()
    server.start()
    later = [record("home", "laptop", iso(datetime.now(UTC)), "after-the-drop.example")]
    assert server.call("POST", "/v2/ingest", later, AUTH)[0] == 200
    browser.wait_for(f"{live}.includes('after-the-drop.example')", timeout=15)
    assert browser.evaluate(live) == ["after-the-drop.example", "live.example"]

    # Away for longer than the backlog (8 records stored while the server was down, 5 the
    # backlog): the newest 5 arrive, and the page says where the others were left out.
    server.kill_all()
    missed = "\n".join(json.dumps(record("home", "tv", iso(datetime.now(UTC)), f"gap-{i}.example")) for i in range(8))
    command = [sys.executable, "-m", "flask", "--app", "wsgi", "ingest", "-"]
    subprocess.run(command, cwd=ROOT, env=server.env, input=missed, text=True, check=True, capture_output=True)
    server.start()
    browser.wait_for(f"{live}.includes('gap-7.example')", timeout=15)
    rows = "Array.from(document.querySelectorAll('#log tbody tr.new, #log tbody tr.gap'), (tr) => tr.className)"
    assert browser.evaluate(live) == [f"gap-{i}.example" for i in range(7, 2, -1)] + [
        "after-the-drop.example",
        "live.example",
    ]
    assert browser.evaluate(rows)[5] == "gap", "the gap is shown between the replayed and the older rows"
    browser.evaluate("document.getElementById('live').click()")
    assert browser.evaluate("document.getElementById('live-status').textContent") == ""


def shows_the_apis_first_page(server, browser, view, path, items):
    """Signed in as the operator, `view` lists exactly the entries of the API's first page."""
    sign_in(browser, server, API_KEY, view)
    loaded(browser, view)
    expected = api(server, path, [*page_window(browser), ("pageSize", "50")])[items]
    ids = browser.evaluate(f"Array.from(document.querySelectorAll('#{view} tbody tr'), (tr) => Number(tr.dataset.id))")
    assert ids == [entry["id"] for entry in expected] and ids


def test_admin_actions_show_the_audit_log(server, browser, shots):
    shows_the_apis_first_page(server, browser, "admin", "admin-action", "actions")
    browser.evaluate(
        "document.getElementById('a-action').value = 'client.alias.set';"
        "document.getElementById('admin-filters').requestSubmit()"
    )
    loaded(browser, "admin")
    shown = browser.evaluate(
        "Array.from(document.querySelectorAll('#admin tbody tr'), (tr) => tr.cells[1].textContent)"
    )
    assert shown and set(shown) == {"client.alias.set"}
    screenshots(browser, shots, "admin")


def test_access_log_shows_who_read_the_queries(server, browser, shots):
    reader = server.create_key("--name", "auditor-test", "--scope", "read")
    api(server, "activity-log", [("startTime", "-1d")], {"Authorization": reader})
    shows_the_apis_first_page(server, browser, "access", "access-log", "reads")
    control(browser, "r-key", "auditor-test", "input")
    browser.evaluate("document.getElementById('access-filters').requestSubmit()")
    loaded(browser, "access")
    shown = browser.evaluate(
        "Array.from(document.querySelectorAll('#access tbody tr'),"
        " (tr) => [tr.cells[1].textContent, tr.cells[2].textContent])"
    )
    assert shown == [["activity-log", "auditor-test"]]
    screenshots(browser, shots, "access")


# Each row's controls by name, and its age steps as the rows of its steps editor show them.
PRIVACY_ROWS = """Object.fromEntries(Array.from(document.querySelectorAll('#privacy tbody tr'), (tr) => [
  tr.dataset.endpoint,
  {
    ...Object.fromEntries(Array.from(tr.querySelectorAll('select[name], input[name]'), (c) => [c.name, c.value])),
    steps: Array.from(tr.querySelectorAll('.step'), (step) => Object.fromEntries(
      Array.from(step.querySelectorAll('[data-field]'), (c) => [c.dataset.field, c.value]).filter(([, v]) => v !== '')
        .map(([f, v]) => [f, /^[0-9]+$/.test(v) ? Number(v) : v]))),
  },
]))"""


def privacy_rows(browser):
    return browser.evaluate(PRIVACY_ROWS)


def test_privacy_view_shows_and_changes_the_settings(server, browser, shots):
    # A recent record of cabin's, for a change to rewrite.
    recent = record("cabin", "camera", iso(datetime.now(UTC) - timedelta(minutes=5)), "camera.example")
    assert server.call("POST", "/v2/ingest", [recent], AUTH)[0] == 200
    sign_in(browser, server, API_KEY, "privacy")
    loaded(browser, "privacy")
    default = api(server, "privacy")["items"]["_default"]
    rows = privacy_rows(browser)
    assert set(rows) == {"_default", "home", "cabin"}, "the default, and every endpoint (following it)"
    expected = {name: value if name == "steps" else str(value) for name, value in default.items()}
    del expected["pendingRewrite"]
    assert all(shown == expected for shown in rows.values())
    screenshots(browser, shots, "privacy")

    # Change one field of one endpoint: only it is sent, the rest keeps following the default.
    row = "document.querySelector('#privacy tr[data-endpoint=cabin]')"
    browser.evaluate(
        f"{row}.querySelector('[name=clientIp]').value = 'truncate';"
        f"{row}.querySelector('[name=ipv4Prefix]').value = '16';"
        f"{row}.querySelector('.privacy-save').click()"
    )
    browser.wait_for("document.getElementById('app-note').textContent.startsWith('Saved')")
    cabin = api(server, "privacy")["items"]["cabin"]
    pending = cabin.pop("pendingRewrite")  # its stored records, unless the privacy job was quick
    assert {**cabin, "pendingRewrite": 0} == {**default, "clientIp": "truncate", "ipv4Prefix": 16}
    stored = api(
        server, "activity-log", [("startTime", "0001-01-01T00:00:00Z"), ("endpointId", "cabin"), ("pageSize", "500")]
    )
    assert 0 <= pending <= len(stored["queries"]) and stored["queries"]
    entry = api(server, "admin-action", [("startTime", "2020-01-01T00:00:00Z"), ("action", "privacy.set")])
    assert entry["actions"][0]["metadata"]["body"] == {"clientIp": "truncate", "ipv4Prefix": 16}
    assert privacy_rows(browser)["cabin"]["clientIp"] == "truncate"

    # An endpoint with no record yet gets settings of its own.
    browser.evaluate(
        "document.getElementById('privacy-endpoint').value = 'garden';"
        "document.getElementById('privacy-add').requestSubmit()"
    )
    loaded(browser, "privacy")
    browser.evaluate(
        "(() => { const tr = document.querySelector('#privacy tr[data-endpoint=garden]');"
        " tr.querySelector('[name=question]').value = 'registrableDomain';"
        " tr.querySelector('.privacy-save').click(); })()"
    )
    browser.wait_for("document.getElementById('app-note').textContent.includes('garden')")
    garden = api(server, "privacy")["items"]["garden"]
    assert garden == {**default, "question": "registrableDomain"}

    # Age steps, a row each; stricter settings say how many stored records they rewrite.
    steps = [{"afterDays": 7, "clientIp": "truncate"}]
    browser.evaluate(
        f"{row}.querySelector('.step-add').click();"
        f"{row}.querySelector('.step [data-field=afterDays]').value = '7';"
        f"{row}.querySelector('.step [data-field=clientIp]').value = 'truncate';"
        f"{row}.querySelector('[name=answers]').value = 'drop';"
        f"{row}.querySelector('.privacy-save').click()"
    )
    note = browser.wait_for(
        "document.getElementById('app-note').textContent.includes('cabin') && "
        "document.getElementById('app-note').textContent"
    )
    cabin = api(server, "privacy")["items"]["cabin"]
    assert cabin["steps"] == steps and cabin["answers"] == "drop"
    assert "stored records are rewritten" in note
    loaded(browser, "privacy")
    assert privacy_rows(browser)["cabin"]["steps"] == steps


def test_outputs_are_listed_paused_and_deleted(server, browser, shots, tmp_path):
    failing = {"kind": "http", "url": "http://127.0.0.1:9/nobody-listens", "name": "siem", "endpointIds": ["home"]}
    quiet = {"kind": "file", "url": f"file://{tmp_path}/queries.jsonl", "name": "archive", "paused": True}
    made = [server.call("POST", "/v2/output", body, AUTH)[1] for body in (failing, quiet)]
    try:
        wait = time.monotonic() + 30
        while api(server, f"output/{made[0]['id']}")["failures"] == 0 and time.monotonic() < wait:
            time.sleep(0.2)
        sign_in(browser, server, API_KEY, "outputs")
        loaded(browser, "outputs")
        rows = browser.evaluate(
            "Array.from(document.querySelectorAll('#outputs tbody tr'), (tr) =>"
            " [Number(tr.dataset.id), tr.cells[0].textContent, tr.cells[3].textContent, tr.cells[8].textContent])"
        )
        assert [(r[0], r[1]) for r in rows] == [(o["id"], o["name"]) for o in made]
        assert rows[0][2].startswith("failing") and "refused" in rows[0][3]
        assert rows[1][2] == "paused"
        screenshots(browser, shots, "outputs")

        # The page marks itself loaded again once the change is made and the list read anew.
        unload = "delete document.getElementById('app').dataset.loaded;"
        browser.evaluate(unload + "document.querySelector('#outputs tbody tr .output-pause').click()")
        loaded(browser, "outputs")
        assert api(server, f"output/{made[0]['id']}")["paused"] is True
        browser.evaluate(
            unload + "window.confirm = () => true; document.querySelector('#outputs tbody tr .output-delete').click()"
        )
        loaded(browser, "outputs")
        assert [o["id"] for o in api(server, "output")["outputs"]] == [made[1]["id"]]
        assert browser.evaluate("document.querySelectorAll('#outputs tbody tr').length") == 1
    finally:
        for output in api(server, "output")["outputs"]:
            server.call("DELETE", f"/v2/output/{output['id']}", None, AUTH)


def test_alerts_view_shows_the_rules_and_what_they_fired(server, browser, shots):
    # Every client of "home" asked more than 0.001 queries a minute in the last day: the rule
    # fires for each at the job's next run, and nothing listens at its destination.
    rule = {
        "kind": "client-share",
        "endpointIds": ["home"],
        "metric": "rate",
        "threshold": 0.001,
        "windowMinutes": 1440,
        "destinations": [f"http://127.0.0.1:{free_port()}/hook"],
    }
    status, made = server.call("POST", "/v2/alert-rule", rule, AUTH)
    assert status == 201, made
    deadline = time.monotonic() + 20
    while not api(server, "alert", [("startTime", "-1h"), ("ruleId", made["id"])])["alerts"]:
        assert time.monotonic() < deadline, "the alerts job fired"
        time.sleep(0.3)
    shows_the_apis_first_page(server, browser, "alerts", "alert", "alerts")
    rules = browser.evaluate("Array.from(document.querySelectorAll('#alert-rules tbody tr'), (tr) => tr.dataset.id)")
    assert str(made["id"]) in rules
    # Each delivery names its destination; the rule's settings read as its form labels them.
    deliveries = browser.evaluate("document.querySelector('#alerts tbody td div.delivery').textContent")
    destination = rule["destinations"][0]
    assert deliveries.startswith((f"retrying: {destination} (", f"pending: {destination}")), deliveries
    settings = browser.evaluate(
        f"Array.from(document.querySelectorAll('#alert-rules tr[data-id=\"{made['id']}\"] td.fields div'),"
        " (div) => div.textContent)"
    )
    assert "Metric: rate" in settings and "Threshold: 0.001" in settings and "Window (minutes): 1440" in settings
    # The docs it names: the API reference the service serves (nothing elsewhere), one click away.
    reference = browser.evaluate("document.querySelector('#view-alerts a.reference').href")
    assert reference == f"{server.base}/v2/docs"
    with urllib.request.urlopen(reference) as response:
        assert response.status == 200
    screenshots(browser, shots, "alerts")


def fill(browser, form, values):
    """Set a form's named fields as a person would, in order (the kind first: it decides which
    fields the form shows)."""
    browser.evaluate(
        f"(() => {{ const form = document.getElementById({json.dumps(form)});"
        f" for (const [name, value] of Object.entries({json.dumps(values)})) {{"
        '   const el = form.querySelector(`[name="${name}"]`);'
        "   if (el.type === 'checkbox') el.checked = value; else el.value = value;"
        "   el.dispatchEvent(new Event('change')); } })()"
    )


def submit(browser, form, values, note=None):
    """Fill and submit the form; with `note`, wait until the page says it (the change was made,
    the list read anew), else until the form says why the API refused it, and return that."""
    fill(browser, form, values)
    app = "document.getElementById('app').dataset"
    browser.evaluate(f"delete {app}.loaded; document.getElementById({json.dumps(form)}).requestSubmit()")
    if note is None:
        return browser.wait_for(f"document.querySelector('#{form} .form-error').textContent")
    browser.wait_for(f"{app}.loaded && document.getElementById('app-note').textContent.includes({json.dumps(note)})")
    assert browser.evaluate(f"document.getElementById({json.dumps(form)})") is None, "the form went once saved"
    return browser.evaluate("document.getElementById('app-note').textContent")


def form_values(browser, form):
    return browser.evaluate(
        f"Object.fromEntries(Array.from(document.querySelectorAll('#{form} [name]'),"
        " (el) => [el.name, el.type === 'checkbox' ? el.checked : el.value]))"
    )


def click_in_row(browser, table, row_id, button):
    browser.evaluate(f"document.querySelector('#{table} tr[data-id=\"{row_id}\"] .{button}').click()")


def admin_entries(server, action):
    return api(server, "admin-action", [("startTime", "-1h"), ("action", action)])["actions"]


def test_alert_rules_are_created_changed_and_deleted_in_the_dashboard(server, browser, shots):
    # Nothing listens at either: deliveries fail, and nothing else happens.
    hook = f"http://127.0.0.1:{free_port()}/hook"
    ntfy = f"ntfy://127.0.0.1:{free_port()}/dns-alerts"
    before = {r["id"] for r in api(server, "alert-rule")["items"]}
    sign_in(browser, server, API_KEY, "alerts")
    loaded(browser, "alerts")
    try:
        browser.evaluate("document.getElementById('rule-new').click()")
        note = submit(
            browser,
            "rule-form",
            {
                "kind": "feed-silent",
                "endpointIds": "home, cabin",
                "cooldown": "600",
                "destinations": f"{hook}\n{ntfy}",
                "silentMinutes": "15",
            },
            "Created alert rule",
        )
        silent = next(r for r in api(server, "alert-rule")["items"] if r["id"] not in before)
        assert {name: value for name, value in silent.items() if name not in ("id", "createdAt", "updatedAt")} == {
            "kind": "feed-silent",
            "endpointIds": ["cabin", "home"],  # (sorted)
            "clientIds": None,
            "cooldown": 600,
            "destinations": [hook, ntfy],
            "silentMinutes": 15,
        }
        secret = note.rsplit(" ", 1)[-1]  # shown this once, in the note
        assert len(secret) > 30 and f"alert rule {silent['id']} (feed-silent)" in note

        # The kind chooses the fields: a watched-domain rule, for one client.
        browser.evaluate("document.getElementById('rule-new').click()")
        hidden = "document.querySelector('#rule-form [name=silentMinutes]').closest('label').hidden"
        watch = [
            {"match": "suffix", "value": "doh.example"},
            {"match": "pattern", "value": "^[a-z0-9]{20,}\\.example$"},
        ]
        fill(browser, "rule-form", {"kind": "watched-domain"})
        assert browser.evaluate(hidden) is True
        submit(
            browser,
            "rule-form",
            {
                "endpointIds": "home",
                "clientIds": "laptop",
                "destinations": hook,
                "watch": "\n".join(f"{w['match']} {w['value']}" for w in watch),
            },
            "Created alert rule",
        )
        watched = next(r for r in api(server, "alert-rule")["items"] if r["kind"] == "watched-domain")
        assert (watched["endpointIds"], watched["clientIds"], watched["watch"]) == (["home"], ["laptop"], watch)
        assert watched["cooldown"] == 3600, "a field left empty takes the API's default"
        assert secret not in browser.evaluate("document.body.innerText"), "a secret is shown once only"

        # The API's refusal is said in the form, which keeps what was typed; nothing is stored.
        browser.evaluate("document.getElementById('rule-new').click()")
        share = {"kind": "client-share", "endpointIds": "home", "destinations": hook, "metric": "nxdomain"}
        refused = submit(browser, "rule-form", {**share, "threshold": "2"})
        assert refused == "Invalid 'threshold': a share is at most 1."
        assert form_values(browser, "rule-form")["threshold"] == "2"
        screenshots(browser, shots, "alert-rule-refused")
        refused = submit(browser, "rule-form", {"threshold": "0.5", "destinations": "nope://where"})
        assert refused.startswith("Invalid 'destinations[0]': neither http(s) nor a notification URL")
        assert {r["kind"] for r in api(server, "alert-rule")["items"] if r["id"] not in before} == {
            "feed-silent",
            "watched-domain",
        }
        submit(browser, "rule-form", {"destinations": hook, "windowMinutes": "30"}, "Created alert rule")
        made = next(
            r for r in api(server, "alert-rule")["items"] if r["kind"] == "client-share" and r["id"] not in before
        )
        assert (made["metric"], made["threshold"], made["windowMinutes"], made["minQueries"]) == (
            "nxdomain",
            0.5,
            30,
            20,
        )

        # Change: the form shows the rule as it is, and sends only what changed.
        click_in_row(browser, "alert-rules", silent["id"], "rule-change")
        shown = form_values(browser, "rule-form")
        assert (shown["kind"], shown["endpointIds"], shown["silentMinutes"], shown["cooldown"]) == (
            "feed-silent",
            "cabin, home",
            "15",
            "600",
        )
        assert browser.evaluate("document.querySelector('#rule-form [name=kind]').disabled") is True
        assert secret not in browser.evaluate("document.body.innerText")
        assert submit(browser, "rule-form", {}) == "Nothing to save: no field was changed."
        submit(browser, "rule-form", {"silentMinutes": "30", "endpointIds": "home"}, f"Saved alert rule {silent['id']}")
        changed = api(server, f"alert-rule/{silent['id']}")
        assert changed == {**silent, "silentMinutes": 30, "endpointIds": ["home"], "updatedAt": changed["updatedAt"]}
        assert admin_entries(server, "alert-rule.change")[0]["metadata"]["body"] == {
            "silentMinutes": 30,
            "endpointIds": ["home"],
        }
        click_in_row(browser, "alert-rules", silent["id"], "rule-change")
        refused = submit(browser, "rule-form", {"silentMinutes": "0"})
        assert refused.startswith("Invalid 'silentMinutes'")
        assert api(server, f"alert-rule/{silent['id']}") == changed

        # Delete, once confirmed.
        browser.evaluate("window.confirm = () => false")
        click_in_row(browser, "alert-rules", silent["id"], "rule-delete")
        assert server.call("GET", f"/v2/alert-rule/{silent['id']}", None, AUTH)[0] == 200
        browser.evaluate("window.confirm = () => true; delete document.getElementById('app').dataset.loaded")
        click_in_row(browser, "alert-rules", silent["id"], "rule-delete")
        browser.wait_for(f"document.getElementById('app-note').textContent === 'Deleted alert rule {silent['id']}.'")
        assert server.call("GET", f"/v2/alert-rule/{silent['id']}", None, AUTH)[0] == 404
        shown = browser.evaluate(
            "Array.from(document.querySelectorAll('#alert-rules tbody tr'), (tr) => tr.dataset.id)"
        )
        assert str(silent["id"]) not in shown and str(watched["id"]) in shown
    finally:
        for rule in api(server, "alert-rule")["items"]:
            if rule["id"] not in before:
                server.call("DELETE", f"/v2/alert-rule/{rule['id']}", None, AUTH)


def test_outputs_are_created_and_changed_in_the_dashboard(server, browser, shots, tmp_path):
    sign_in(browser, server, API_KEY, "outputs")
    loaded(browser, "outputs")
    try:
        browser.evaluate("document.getElementById('output-new').click()")
        file_output = {
            "kind": "file",
            "url": f"file://{tmp_path}/dashboard.jsonl",
            "name": "archive",
            "endpointIds": "home",
            "start": "now",
            "paused": True,
            "maxBytes": "2048",
            "keep": "2",
        }
        note = submit(browser, "output-form", file_output, "Created output")
        [made] = api(server, "output")["outputs"]
        assert note == f"Created output {made['id']} (archive): 0 records to send."
        assert (made["kind"], made["url"], made["endpointIds"], made["shape"], made["paused"]) == (
            "file",
            file_output["url"],
            ["home"],
            "queryData",
            True,
        )
        assert made["options"] == {"maxBytes": 2048, "keep": 2, "batchSize": 500}
        assert made["cursor"] > 0 and made["backlog"] == 0  # from now on, past the records stored

        # An http output: its headers and TLS; refusals said in the form, nothing stored.
        browser.evaluate("document.getElementById('output-new').click()")
        http = {"kind": "http", "url": "ftp://siem.lan/in", "name": "siem", "headers": "Authorization: Bearer s3cret"}
        assert submit(browser, "output-form", http) == "Invalid 'url': an http output needs an http:// or https:// URL"
        assert submit(browser, "output-form", {"url": "https://siem.lan/in", "headers": "no colon"}) == (
            'Headers: "no colon" is not "Name: value".'
        )
        assert submit(browser, "output-form", {"headers": http["headers"], "name": "archive"}).endswith(
            "exists already."
        )
        assert len(api(server, "output")["outputs"]) == 1
        fill(browser, "output-form", {"tls": "off"})
        assert browser.evaluate("document.querySelector('#output-form [name=caCert]').hidden") is True
        submit(browser, "output-form", {"name": "siem", "shape": "controlD", "paused": True}, "Created output")
        siem = next(o for o in api(server, "output")["outputs"] if o["name"] == "siem")
        assert (siem["url"], siem["shape"], siem["endpointIds"]) == ("https://siem.lan/in", "controlD", None)
        assert siem["options"] == {
            "headers": {"Authorization": "<redacted>"},
            "tls": {"verify": False},
            "batchSize": 500,
            "timeoutSeconds": 10,
        }

        # Change: the headers' values are not shown, and not sent unless typed anew.
        click_in_row(browser, "outputs", siem["id"], "output-change")
        shown = form_values(browser, "output-form")
        screenshots(browser, shots, "output-change")
        assert (shown["url"], shown["tls"], shown["headers"], shown["shape"]) == (
            "https://siem.lan/in",
            "off",
            "",
            "controlD",
        )
        assert "s3cret" not in browser.evaluate("document.body.innerText")
        assert "unchanged: Authorization" in browser.evaluate(
            "document.querySelector('#output-form [name=headers]').placeholder"
        )
        assert submit(browser, "output-form", {"format": "rfc3164"}) == "Nothing to save: no field was changed."
        submit(browser, "output-form", {"batchSize": "100", "endpointIds": "home, cabin"}, f"Saved output {siem['id']}")
        changed = api(server, f"output/{siem['id']}")
        assert changed["options"] == {**siem["options"], "batchSize": 100}
        assert changed["endpointIds"] == ["cabin", "home"]  # (sorted)
        assert admin_entries(server, "output.change")[0]["metadata"]["body"] == {
            "batchSize": 100,
            "endpointIds": ["home", "cabin"],
        }
        click_in_row(browser, "outputs", siem["id"], "output-change")
        refused = submit(browser, "output-form", {"url": "http://siem.lan/in"})
        assert refused == "Invalid 'tls': only for https:// and tls:// URLs"
        submit(browser, "output-form", {"tls": "", "endpointIds": ""}, f"Saved output {siem['id']}")
        changed = api(server, f"output/{siem['id']}")
        assert changed["url"] == "http://siem.lan/in" and "tls" not in changed["options"]
        assert changed["endpointIds"] is None
    finally:
        for output in api(server, "output")["outputs"]:
            server.call("DELETE", f"/v2/output/{output['id']}", None, AUTH)


def test_a_read_only_key_sees_no_write_controls(server, browser, shots):
    key = server.create_key("--name", "viewer", "--scope", "read")
    sign_in(browser, server, key, "clients")
    loaded(browser, "clients")
    assert browser.evaluate("document.querySelectorAll('#clients tbody tr').length") > 0
    controls = "document.querySelectorAll('.alias-edit, .client-delete, .alias-form, .client-logging').length"
    assert browser.evaluate(controls) == 0
    assert browser.evaluate("document.querySelector('#clients th.write-only').hidden") is True
    assert browser.evaluate("document.getElementById('nav-admin').hidden") is True
    assert browser.evaluate("document.getElementById('nav-privacy').hidden") is True
    assert browser.evaluate("document.getElementById('nav-access').hidden") is True
    assert browser.evaluate("document.getElementById('nav-outputs').hidden") is True
    assert browser.evaluate("document.getElementById('nav-alerts').hidden") is True
    # The admin view is not offered: asking for it shows the overview.
    browser.evaluate("location.hash = 'admin'")
    loaded(browser, "overview")
    assert browser.evaluate("document.getElementById('view-admin').hidden") is True
    assert browser.evaluate("document.getElementById('view-overview').hidden") is False
    screenshots(browser, shots, "read-only-clients")


def test_an_endpoint_limited_key_sees_only_its_endpoints(server, browser):
    key = server.create_key("--name", "cabin-viewer", "--scope", "read", "--endpoint", "cabin")
    sign_in(browser, server, key, "clients")
    loaded(browser, "clients")
    options = browser.evaluate("Array.from(document.getElementById('endpoint').options, (o) => o.value)")
    assert options == ["", "cabin"]
    assert {r["endpoint"] for r in client_rows(browser)} == {"cabin"}
    show(browser, "overview")
    window = page_window(browser)
    limited = {"Authorization": key}
    assert number(browser, "total-count") == api(server, "statistic/count", window, limited)["count"]
    assert number(browser, "total-count") == api(server, "statistic/count", [*window, ("endpointId", "cabin")])["count"]
    # An address naming an endpoint the key may not read: the page says the API's refusal.
    browser.evaluate("location.hash = 'overview?window=24h&endpoint=home'")
    loaded(browser, "error")
    assert "not allowed endpoint 'home'" in browser.evaluate("document.getElementById('app-error').textContent")


def test_a_key_that_may_not_read_is_told_so(server, browser):
    key = server.create_key("--name", "feeder", "--scope", "ingest")
    sign_in(browser, server, key)
    message = browser.wait_for("document.getElementById('signin-error').textContent")
    assert "may not read" in message
    assert browser.evaluate("document.getElementById('app').hidden") is True
    assert browser.evaluate("sessionStorage.length") == 0


def client_scope(window, endpoint, client):
    return [*window, *([("endpointId", endpoint)] if endpoint else []), ("clientId[]", client)]


def check_client_page(server, browser, endpoint, client):
    """The client page's numbers are the API's for the same client (on `endpoint`, or on every
    endpoint with None) and window."""
    window = page_window(browser)
    scope = client_scope(window, endpoint, client)
    total = api(server, "statistic/count", scope)["count"]
    blocked = api(server, "statistic/count", [*scope, ("action[]", "0")])["count"]
    assert total > 0 and blocked > 0
    assert (number(browser, "c-total"), number(browser, "c-blocked")) == (total, blocked)
    assert number(browser, "c-share") == pytest.approx(blocked / total)
    chart = browser.evaluate("({...document.getElementById('client-chart').dataset})")
    assert (int(chart["total"]), int(chart["blocked"])) == (total, blocked)

    def top(group, *extra):
        return api(server, f"statistic/count/{group}", [*scope, ("limit", "10"), *extra])["counts"]

    assert bar_rows(browser, "c-top-domains") == top("question")
    assert bar_rows(browser, "c-top-sites") == top("registrableDomain")
    assert bar_rows(browser, "c-top-blocked") == top("question", ("action[]", "0"))
    assert bar_rows(browser, "c-by-statusCode") == top("statusCode")
    upstreams = top("upstream")
    assert bar_rows(browser, "c-by-upstream") == upstreams and len(upstreams) > 2

    shown_new = (
        "Array.from(document.querySelectorAll('#{} tr[data-value]'), (tr) =>"
        " ({{value: tr.dataset.value, firstSeen: tr.dataset.firstSeen, count: Number(tr.dataset.count)}}))"
    )
    for table, group in (("c-new-names", "question"), ("c-new-sites", "registrableDomain")):
        names = api(server, f"statistic/first-seen/{group}", [*scope, ("limit", "10")])["names"]
        assert browser.evaluate(shown_new.format(table)) == names and names

    summary = api(server, "statistic/latency", scope)
    per_upstream = api(server, "statistic/latency/upstream", [*scope, ("limit", "10")])["latencies"]
    shown = browser.evaluate(
        "Array.from(document.querySelectorAll('#c-latency tr[data-upstream]'),"
        " (tr) => [tr.dataset.upstream, JSON.parse(tr.dataset.numbers)])"
    )
    fields = ("count", "meanMs", "p50Ms", "p95Ms", "maxMs")
    expected = [["*", [summary[f] for f in fields]]]
    expected += [[lat["value"], [lat[f] for f in fields]] for lat in per_upstream]
    assert shown == expected and summary["count"] > 0

    # First seen: the client's oldest record kept; last seen: its client entries' last activity.
    oldest = api(
        server,
        "activity-log",
        [*client_scope([("startTime", "0001-01-01T00:00:00Z")], endpoint, client), ("sortOrder", "asc")],
    )
    assert browser.evaluate("document.getElementById('c-first').dataset.value") == oldest["queries"][0]["timestamp"]
    items = api(server, "client", [*([("endpointId", endpoint)] if endpoint else []), ("clientId[]", client)])["items"]
    entries = {e: block["clients"][client] for e, block in items.items() if client in block["clients"]}
    assert browser.evaluate("document.getElementById('c-last').dataset.value") == max(
        c["lastActivityTime"] for c in entries.values()
    )
    shown_entries = browser.evaluate(
        "Array.from(document.querySelectorAll('#client-entries tbody tr'), (tr) => tr.dataset.endpoint)"
    )
    assert sorted(shown_entries) == sorted(entries)


def test_client_page_shows_the_apis_numbers_for_one_client(server, browser, shots):
    # From the Clients view: one client on one endpoint.
    sign_in(browser, server, API_KEY, "clients")
    loaded(browser, "clients")
    browser.evaluate("document.querySelector('#clients tr[data-endpoint=home][data-client=laptop] a').click()")
    loaded(browser, "client")
    assert browser.evaluate("document.getElementById('endpoint').value") == "home"
    assert browser.evaluate("document.getElementById('client-title').textContent") == "laptop"
    check_client_page(server, browser, "home", "laptop")
    assert not [line for line in browser.console if "Content Security Policy" in line], browser.console
    screenshots(browser, shots, "client", dark=True)

    # Its query log is one click away: the log view filtered on it, in the same window.
    browser.evaluate("document.getElementById('client-log').click()")
    loaded(browser, "log")
    assert browser.evaluate("document.getElementById('f-client').value") == "laptop"
    assert browser.evaluate("document.getElementById('endpoint').value") == "home"
    window = page_window(browser)
    queries = api(server, "activity-log", [*client_scope(window, "home", "laptop"), ("pageSize", "50")])["queries"]
    rows = log_rows(browser)
    assert [r[3] for r in rows] == [q["question"] for q in queries] and rows
    assert {(r[1], r[2]) for r in rows} == {("home", "laptop")}

    # From the overview's top clients, over every endpoint (as that row counts it), 7 days:
    # the client id on each endpoint it has an entry on.
    browser.evaluate("location.hash = 'overview?window=7d'")
    loaded(browser, "overview")
    browser.evaluate("document.querySelector('#top-clients tr[data-value=laptop] a').click()")
    loaded(browser, "client")
    assert browser.evaluate("document.getElementById('endpoint').value") == ""
    check_client_page(server, browser, None, "laptop")
    clicked = next(r["count"] for r in bar_rows(browser, "top-clients") if r["value"] == "laptop")
    assert number(browser, "c-total") == clicked  # the count of the row clicked


# What a view shows and the state it shows it in: its controls, its window, its rows.
VIEW_STATE = """(() => {
  const value = (id) => document.getElementById(id).value;
  const texts = (selector) => Array.from(document.querySelectorAll(selector), (el) => el.textContent);
  const app = document.getElementById('app').dataset;
  return {
    href: location.href,
    view: app.loaded,
    shown: Array.from(document.querySelectorAll('main > section'), (s) => s.hidden ? '' : s.id).join(''),
    window: value('window'),
    custom: value('window') === 'custom' ? [value('custom-start'), value('custom-end'), app.start, app.end] : null,
    length: Date.parse(app.end) - Date.parse(app.start),
    endpoint: value('endpoint'),
    page: document.getElementById({log: 'log-page', admin: 'admin-page'}[app.loaded])?.textContent ?? '',
    controls: ({
      clients: ['client-search'],
      log: ['f-client', 'f-action', 'f-trigger', 'f-rrType', 'f-statusCode', 'f-protocol', 'f-search', 'f-mode'],
      admin: ['a-action', 'a-search'],
    }[app.loaded] || []).map(value),
    rows: {
      overview: () => [texts('#top-domains td'), document.getElementById('total-count').dataset.value],
      clients: () => texts('#clients tbody tr td:nth-child(2)'),
      client: () => [document.getElementById('client-title').textContent, texts('#c-top-domains td'),
        document.getElementById('c-total').dataset.value],
      log: () => texts('#log tbody tr td:nth-child(4)'),
      admin: () => texts('#admin tbody tr td:nth-child(2)'),
    }[app.loaded](),
  };
})()"""


def shown_urls(browser):
    """Every URL the page shows: its own, and every link's."""
    return browser.evaluate("[location.href, ...Array.from(document.querySelectorAll('a[href]'), (a) => a.href)]")


def reopen(browser, server, url, key=API_KEY):
    """Open `url` in a fresh page with no key kept, and sign in there (the URL untouched)."""
    browser.evaluate("document.getElementById('sign-out').click()")
    assert browser.evaluate("sessionStorage.length") == 0
    browser.open("about:blank")
    browser.open(url)
    browser.wait_for("!document.getElementById('signin').hidden")
    browser.evaluate(
        f"document.getElementById('signin-key').value = {json.dumps(key)};"
        "document.getElementById('signin-form').requestSubmit()"
    )


def test_a_views_url_restores_it_and_never_holds_the_key(server, browser):
    """Each view's state is in its URL: copied, opened in a fresh page and signed in (or
    reloaded with the key kept), it shows the same view in the same state; no URL the page
    shows or requests holds the key."""
    seen = []  # every URL requested or shown along the way
    sign_in(browser, server, API_KEY, "overview")
    loaded(browser, "overview")

    def settle(view):
        loaded(browser, view)
        seen.extend(browser.requests)
        seen.extend(shown_urls(browser))

    def submit(form, **values):
        assignments = "".join(
            f"document.getElementById({json.dumps(k.replace('_', '-'))}).value = {json.dumps(v)};"
            for k, v in values.items()
        )
        browser.evaluate(f"{assignments} document.getElementById({json.dumps(form)}).requestSubmit()")

    def local(hours_ago):
        return browser.evaluate(
            f"(() => {{ const d = new Date(Date.now() - {hours_ago} * 3600e3);"
            " return new Date(d - d.getTimezoneOffset() * 60000).toISOString().slice(0, 19); })()"
        )

    def overview():  # one endpoint, the last hour
        browser.evaluate("document.getElementById('window').value = '3600'")
        control(browser, "endpoint", "cabin")
        return "overview", {"window": "3600", "endpoint": "cabin"}

    def clients():  # searched and sorted
        show(browser, "clients")
        control(browser, "client-search", "home", "input")
        browser.evaluate("document.querySelector('#clients th[data-sort=clientId]').click()")
        return "clients", {"controls": ["home"], "rows": ["laptop", "old-printer", "phone", "tv"]}

    def log():  # filtered, 7 days, the second page
        browser.evaluate("location.hash = 'log?window=7d'")
        loaded(browser, "log")
        submit("log-filters", f_search="example", f_mode="endsWith", f_trigger="default")
        loaded(browser, "log")
        browser.evaluate("document.getElementById('log-next').click()")
        controls = ["", "", "default", "", "", "", "example", "endsWith"]
        return "log", {"window": "604800", "controls": controls, "page": "Page 2"}

    def client():  # one client in a custom window
        show(browser, "clients")
        browser.evaluate("document.querySelector('#clients tr[data-endpoint=home][data-client=phone] a').click()")
        loaded(browser, "client")
        start, end = local(30), local(1)
        browser.evaluate(
            "document.getElementById('window').value = 'custom';"
            f"document.getElementById('custom-start').value = {json.dumps(start)};"
        )
        control(browser, "custom-end", end)
        return "client", {"window": "custom", "endpoint": "home", "custom": [start, end]}

    def admin():  # filtered by action; Back and Forward go through the states
        show(browser, "admin")
        submit("admin-filters", a_action="client.alias.set")
        loaded(browser, "admin")
        for step, action in (("back", ""), ("forward", "client.alias.set")):
            browser.evaluate(f"history.{step}()")
            browser.wait_for(
                f"document.getElementById('a-action').value === {json.dumps(action)}"
                " && document.getElementById('app').dataset.loaded === 'admin'"
            )
        return "admin", {"controls": ["client.alias.set", ""]}

    for build in (overview, clients, log, client, admin):
        view, expected = build()
        settle(view)
        before = browser.evaluate(VIEW_STATE)
        assert {name: before[name][: len(value)] for name, value in expected.items()} == expected
        url = before["href"]
        assert url.startswith(f"{server.base}/#{view}?"), url
        assert before["view"] == view and before["shown"] == f"view-{view}"

        # A fresh page, signed in: the same view, in the same state.
        reopen(browser, server, url)
        settle(view)
        after = browser.evaluate(VIEW_STATE)
        assert after["href"] == url
        assert {**after, "length": round(after["length"], -3)} == {**before, "length": round(before["length"], -3)}

        # Reloaded with the key kept: the same again.
        browser.open("about:blank")
        browser.open(url)
        settle(view)
        assert browser.evaluate(VIEW_STATE)["href"] == url

    assert seen and all(url.startswith((f"{server.base}/", "data:", "about:blank")) for url in seen)
    assert not [url for url in seen if API_KEY in url or urllib.parse.quote(API_KEY) in url]


# The most API calls the page had in flight at once, and the protocols they went over (resource
# timing: a call runs from its fetch to its response's end).
IN_FLIGHT = """(() => {
  const calls = performance.getEntriesByType('resource').filter((e) => new URL(e.name).pathname.startsWith('/v2/'));
  const events = calls.flatMap((e) => [[e.startTime, 1], [e.responseEnd, -1]]);
  events.sort((a, b) => a[0] - b[0] || a[1] - b[1]);  // an end before a start at the same time
  let now = 0, most = 0;
  for (const [, step] of events) most = Math.max(most, (now += step));
  return {most, calls: calls.length, protocols: [...new Set(calls.map((e) => e.nextHopProtocol))]};
})()"""


def test_over_http2_the_page_keeps_six_calls_in_flight(server, tmp_path_factory):
    """Behind the nginx site (HTTP/2), where the browser would send every panel's call at once:
    the page keeps to 6, within a key's fair share, and every view loads."""
    if nginx.UNAVAILABLE:
        pytest.skip(nginx.banner())
    front = nginx.Nginx(server.port)
    # The test's own certificate: nothing but this loopback site is reachable anyway.
    chromium = Chromium(tmp_path_factory.mktemp("chromium-h2"), flags=("--ignore-certificate-errors",))
    try:
        chromium.resize(*DESKTOP)
        base = f"https://127.0.0.1:{front.https_port}"
        chromium.open(f"{base}/#client?window=7d&endpoint=home&clientId=laptop")
        chromium.wait_for("!document.getElementById('signin').hidden")
        chromium.evaluate(
            f"document.getElementById('signin-key').value = {json.dumps(API_KEY)};"
            "document.getElementById('signin-form').requestSubmit()"
        )
        loaded(chromium, "client")
        assert number(chromium, "c-total") > 0
        chromium.evaluate("performance.clearResourceTimings(); location.hash = 'overview?window=7d'")
        loaded(chromium, "overview")
        flight = chromium.evaluate(IN_FLIGHT)
        assert flight["protocols"] == ["h2"] and flight["calls"] == 14
        assert flight["most"] <= 6, flight
    finally:
        chromium.close()
        front.stop()


def test_a_client_id_with_a_comma_is_one_client_in_the_log_filter(server, browser):
    # Last in the module: the clients it adds are not in the data the other tests expect.
    when = iso(datetime.now(UTC) - timedelta(minutes=3))
    records = [
        record("home", "Smith, John", when, "comma.example"),
        record("home", "Smith", when, "smith.example"),
        record("home", 'say "hi"', when, "quote.example"),
    ]
    assert server.call("POST", "/v2/ingest", records, AUTH)[0] == 200
    # The client page's link to its query log quotes the id, and the log shows that client only.
    show_client = "client?window=24h&endpoint=home&clientId=" + urllib.parse.quote("Smith, John")
    sign_in(browser, server, API_KEY, show_client)
    loaded(browser, "client")
    browser.evaluate("document.getElementById('client-log').click()")
    loaded(browser, "log")
    assert browser.evaluate("document.getElementById('f-client').value") == '"Smith, John"'
    assert {(r[2], r[3]) for r in log_rows(browser)} == {("Smith, John", "comma.example")}
    # Typed: quoted items (a quote in one doubled) and plain ones.
    control(browser, "f-client", '"say ""hi""", Smith', event="input")
    browser.evaluate("document.getElementById('log-filters').requestSubmit()")
    browser.wait_for(
        "Array.from(document.querySelectorAll('#log tbody tr'), (tr) => tr.cells[3].textContent).sort().join()"
        " === 'quote.example,smith.example'"
    )


# Every box of the shown view (the bar, panels, cards) against what it holds: an element that
# reaches past its box, a scrolling element that has to scroll, or a word laid out on two lines.
# A cell cut short with an ellipsis is fine if its title holds the whole text.
LAYOUT = r"""(() => {
  const problems = [];
  const shown = (el) => el.getClientRects().length > 0;
  const describe = (el) => el.tagName.toLowerCase() + (el.id ? '#' + el.id : '')
    + (el.className && typeof el.className === 'string' ? '.' + el.className.trim().split(/\s+/).join('.') : '');
  const boxes = Array.from(document.querySelectorAll('header.bar, .panel, .card')).filter(shown);
  for (const box of boxes) {
    const outer = box.getBoundingClientRect();
    const where = describe(box) + ' ' + (box.querySelector('h2')?.textContent ?? '');
    for (const el of [box, ...box.querySelectorAll('*')]) {
      if (!shown(el) || el.closest('.uplot canvas')) continue;
      const style = getComputedStyle(el);
      if (style.textOverflow === 'ellipsis' && el.scrollWidth > el.clientWidth + 1) {
        if (el.title !== el.textContent) problems.push(`${where}: ${describe(el)} cut short without its text as title`);
        continue;
      }
      if (['auto', 'scroll'].includes(style.overflowX) && el.scrollWidth > el.clientWidth + 1) {
        problems.push(`${where}: ${describe(el)} scrolls (${el.scrollWidth} > ${el.clientWidth})`);
      }
      const rect = el.getBoundingClientRect();
      if (!el.closest('.uplot') && (rect.right > outer.right + 1 || rect.left < outer.left - 1)) {
        const span = (r) => `${Math.round(r.left)}..${Math.round(r.right)}`;
        problems.push(`${where}: ${describe(el)} reaches past its box (${span(rect)} of ${span(outer)})`);
      }
    }
    const walker = document.createTreeWalker(box, NodeFilter.SHOW_TEXT);
    for (let node = walker.nextNode(); node; node = walker.nextNode()) {
      if (!node.parentElement || !shown(node.parentElement)) continue;
      for (const match of node.textContent.matchAll(/\S{2,}/g)) {
        const range = document.createRange();
        range.setStart(node, match.index);
        range.setEnd(node, match.index + match[0].length);
        const lines = new Set(Array.from(range.getClientRects(), (r) => Math.round(r.top)));
        if (lines.size > 1) problems.push(`${where}: "${match[0]}" broken over ${lines.size} lines`);
      }
    }
  }
  if (document.documentElement.scrollWidth > innerWidth + 1) {
    problems.push(`the page is ${document.documentElement.scrollWidth} px wide in a ${innerWidth} px window`);
  }
  return problems;
})()"""

LAYOUT_VIEWS = [
    "overview",
    "clients",
    "client?endpoint=home&clientId=laptop",
    "log",
    "admin",
    "access",
    "privacy",
    "outputs",
    "alerts",
]


def test_every_view_lays_out_at_desktop_and_phone_width(server, browser, tmp_path):
    """At 1400 px and at a phone's 390 px, no element of any view is wider than its box and no
    name is broken inside a word, with long names in every list."""
    watched = {
        "kind": "watched-domain",
        "endpointIds": ["home"],
        "watch": [{"match": "suffix", "value": LONG_BLOCKED}],
        "destinations": [f"http://127.0.0.1:{free_port()}/a-long-path/to/the/receiver/hook"],
    }
    assert server.call("POST", "/v2/alert-rule", watched, AUTH)[0] == 201
    steps = {"steps": [{"afterDays": 7, "clientIp": "truncate"}, {"afterDays": 30, "clientIp": "drop"}]}
    assert server.call("PUT", "/v2/privacy/layout-endpoint", steps, AUTH)[0] == 200
    output = {
        "kind": "http",
        "url": f"http://127.0.0.1:{free_port()}/collector/with/a/long/path",
        "endpointIds": ["layout-endpoint"],
        "name": "a-receiver-with-a-rather-long-name",
    }
    assert server.call("POST", "/v2/output", output, AUTH)[0] == 201

    # The screenshots of docs/dashboard.md: DASHBOARD_SCREENSHOTS=docs/images (halved, phones'
    # cut at 1,600 px, to keep the repository small).
    shots = Path(os.environ.get("DASHBOARD_SCREENSHOTS") or tmp_path)
    sign_in(browser, server, API_KEY)
    loaded(browser, "overview")
    problems = []
    for label, (width, height), mobile in (("desktop", (1400, 900), False), ("phone", PHONE, True)):
        browser.resize(width, height, mobile)
        for view in LAYOUT_VIEWS:
            show(browser, view)
            problems += [f"{width} px, {view}: {p}" for p in browser.evaluate(LAYOUT)]
            name = view.split("?")[0]
            browser.screenshot(shots / f"dashboard-{name}-{label}.png", full_page=mobile, scale=0.5, max_height=1600)
    browser.resize(*DESKTOP)
    assert problems == [], "\n".join(problems)


def test_the_chart_log_and_clients_say_what_they_hold(server, browser):
    """The chart's legend shows the newest whole bucket before any hover, and the buckets only
    partly in the window are left out of it and said; the log says its total and links each
    client to its page; the clients list counts each client's queries in the window."""
    sign_in(browser, server, API_KEY, "overview?window=1h")
    loaded(browser, "overview")
    window = page_window(browser)
    legend = browser.evaluate(
        "Array.from(document.querySelectorAll('#chart .u-legend .u-value'), (el) => el.textContent)"
    )
    assert legend and "--" not in legend, legend
    series = api(server, "statistic/timeseries", [*window, ("interval", "60"), ("limit", "1000")])
    start, end = (datetime.fromisoformat(value).timestamp() for _, value in window)
    whole = [b for b in series["queries"] if start <= datetime.fromisoformat(b["time"]).timestamp() <= end - 60]
    assert legend[1] == str(whole[-1]["count"])  # the newest whole minute's queries
    partial = int(browser.evaluate("document.getElementById('chart').dataset.partial"))
    assert partial == len(series["queries"]) - len(whole) > 0
    assert "left out of the chart" in browser.evaluate("document.querySelector('#chart .chart-note').textContent")

    show(browser, "log?window=24h&action=0")
    window = page_window(browser)
    total = api(server, "statistic/count", [*window, ("action[]", "0")])["count"]
    assert number(browser, "log-total") == total
    link = browser.evaluate("document.querySelector('#log tbody tr a.client-link').getAttribute('href')")
    client = browser.evaluate("document.querySelector('#log tbody tr a.client-link').textContent")
    browser.evaluate("document.querySelector('#log tbody tr a.client-link').click()")
    loaded(browser, "client")
    assert browser.evaluate("document.getElementById('client-title').textContent") == client
    assert f"clientId={client}" in link

    show(browser, "clients?window=1h")
    window = page_window(browser)
    shown = browser.evaluate(
        "Array.from(document.querySelectorAll('#clients tbody tr'),"
        " (tr) => [tr.dataset.endpoint, tr.dataset.client, tr.querySelector('td.queries').textContent])"
    )
    expected = {}
    for endpoint in ("home", "cabin"):
        for c in api(server, "statistic/count/clientId", [*window, ("endpointId", endpoint), ("limit", "1000")])[
            "counts"
        ]:
            expected[endpoint, c["value"]] = c["count"]
    assert {(e, c): int(n.replace(",", "")) for e, c, n in shown} == {
        (e, c): expected.get((e, c), 0) for e, c, _ in shown
    }
    assert any(int(n) for _, _, n in shown) and any(int(n) == 0 for _, _, n in shown)
