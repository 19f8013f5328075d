"""The dashboard in a real browser: headless Chromium on the page a real gunicorn serves, against
known data; what the page shows must equal what the API answers for the same question."""

import json
import subprocess
import sys
import time
import urllib.parse
import urllib.request
from datetime import UTC, datetime, timedelta

import pytest

from browser import MISSING, Chromium, find_chromium
from helpers import API_KEY, AUTH, record
from servers import ROOT, Gunicorn

DESKTOP = (1280, 900)
PHONE = (390, 844)
CLIENTS = [("home", "laptop"), ("home", "phone"), ("home", "tv"), ("cabin", "laptop"), ("cabin", "sensor")]
DOMAINS = ["example.com", "news.example", "video.example", "mail.example", "shop.example"]
BLOCKED = ["ads.example.net", "tracker.example"]
PROTOCOLS = ["doh", "dot", "legacy", "doq"]
RR_TYPES = ["A", "AAAA", "HTTPS"]


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
        browser.resize(width, height, mobile)
        time.sleep(0.3)  # the chart follows the window's resize event
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
    browser.wait_for(f"document.getElementById('app').dataset.loaded === {json.dumps(view)}")


def show(browser, view):
    browser.evaluate(f"location.hash = {json.dumps(view)}")
    loaded(browser, view)


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
        "document.getElementById('f-search').value = '';"
        "document.getElementById('f-mode').value = 'includes';"
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


def test_admin_actions_show_the_audit_log(server, browser, shots):
    sign_in(browser, server, API_KEY, "admin")
    loaded(browser, "admin")
    window = page_window(browser)
    actions = api(server, "admin-action", [*window, ("pageSize", "50")])["actions"]
    ids = browser.evaluate("Array.from(document.querySelectorAll('#admin tbody tr'), (tr) => Number(tr.dataset.id))")
    assert ids == [a["id"] for a in actions] and ids
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


def test_a_read_only_key_sees_no_write_controls(server, browser, shots):
    key = server.create_key("--name", "viewer", "--scope", "read")
    sign_in(browser, server, key, "clients")
    loaded(browser, "clients")
    assert browser.evaluate("document.querySelectorAll('#clients tbody tr').length") > 0
    assert browser.evaluate("document.querySelectorAll('.alias-edit, .client-delete, .alias-form').length") == 0
    assert browser.evaluate("document.querySelector('#clients th.write-only').hidden") is True
    assert browser.evaluate("document.getElementById('nav-admin').hidden") is True
    assert browser.evaluate("document.getElementById('nav-outputs').hidden") is True
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


def test_a_key_that_may_not_read_is_told_so(server, browser):
    key = server.create_key("--name", "feeder", "--scope", "ingest")
    sign_in(browser, server, key)
    message = browser.wait_for("document.getElementById('signin-error').textContent")
    assert "may not read" in message
    assert browser.evaluate("document.getElementById('app').hidden") is True
    assert browser.evaluate("sessionStorage.length") == 0
