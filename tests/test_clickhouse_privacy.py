"""Privacy rewrites on ClickHouse against the SQL store's (docs/clickhouse.md, step 5 of the plan):
the same records stored in both, the same privacy changes (settings made stricter, age steps
reached) applied to both and rewritten to the end; then the tasks' figures, the log's pages,
the statistics that name values, the names first seen and the clients must be the SQL store's.
Each store has its SQL database of its own (settings, tasks, client entries are theirs)."""

import dataclasses
import random

import pytest
from test_clickhouse_records import HOUR_MS, NAMES, inside

from models.clickhouse import ingestion
from models.clickhouse import rewrites as ch_rewrites
from models.clickhouse import statistics as ch_statistics
from models.clickhouse.activity import page_records as ch_page_records
from models.clickhouse.clients import list_clients as ch_list_clients
from models.clients.activity import page_records
from models.clients.clients import list_clients
from models.engine.database import query, write_transaction
from models.privacy import privacy, rewrites
from models.records.filters import Filters
from models.runtime.clock import now_ms
from models.statistics import statistics
from schemas.records import parse_records

from support.helpers import AUTH, record

ENDPOINTS = ["home", "office", "lab"]
CLIENTS = ["192.0.2.17", "192.0.2.99", "198.51.100.7", "2001:db8:1234:5678::1", "laptop"]

# The ClickHouse store held to the SQL one, on SQLite (chDB is the other side; the rest of the
# suite holds SQLite and PostgreSQL to each other, so a second reference would only double the time).
# `slow`: minutes of a worker in all, chDB statements by the thousand; the fast lane leaves them to the whole run.
pytestmark = [pytest.mark.against_sqlite, pytest.mark.slow]


def _records(now: int, count: int = 180) -> list[dict]:
    rng = random.Random(46)
    made = []
    for i in range(count):
        client_id = rng.choice(CLIENTS)
        address = client_id if client_id != "laptop" else "192.0.2.200"
        ts = now - rng.randrange(70 * HOUR_MS)
        extra = {"sourceIp": address, "action": rng.choice([0, 1]), "rrType": "A"}
        if i % 3:
            extra["answers"] = [{"ips": [f"203.0.113.{i % 200}"], "geoip": {"countryCode": "NL"}}]
        if i % 4 == 0:
            extra["triggerValue"] = "||tracker.net^"
        if i % 5 == 0:
            extra["client"] = {"ip": address, "host": f"host-{i % 3}", "mac": "aa:bb:cc:dd:ee:ff"}
        made.append(record(rng.choice(ENDPOINTS), client_id, ts, rng.choice(NAMES), **extra))
    return made


@pytest.fixture
def pair(make_app, database, clickhouse, tmp_path):
    """Two apps holding the same records: the SQL store's (through POST /v2/ingest) and one whose
    records are in ClickHouse (its SQL database beside); (sql app, ClickHouse's app, ClickHouse,
    the time the records were made at)."""
    sql_app = make_app(ANALYTICS_HOT_HOURS=2)
    ch_app = make_app(ANALYTICS_HOT_HOURS=2, ANALYTICS_DATABASE=str(tmp_path / "beside.db"))
    now = now_ms()
    made = _records(now)
    for start in range(0, len(made), 60):
        batch = made[start : start + 60]
        assert sql_app.test_client().post("/v2/ingest", json=batch, headers=AUTH).status_code == 200
        with inside(ch_app):
            ingestion.store_records(clickhouse, parse_records(batch, now))
    return sql_app, ch_app, clickhouse, now


def _same_keys(sql_app, ch_app) -> None:
    """The SQL store's hash keys given to ClickHouse's app, so that a hashed address is the same
    in both (each key is made at random, per database)."""
    with inside(sql_app):
        keys = privacy.hash_keys(ENDPOINTS)
    with inside(ch_app):
        privacy.hash_keys(ENDPOINTS)
        with write_transaction():
            for name, key in keys.items():
                query("UPDATE privacy_setting SET hash_key = ? WHERE endpoint = ?", [key.hex(), name])


def _change_both(sql_app, ch_app, clickhouse, endpoint, fields, now):
    with inside(sql_app), write_transaction():
        expected = rewrites.change(endpoint, fields, now)
    with inside(ch_app), write_transaction():
        got = ch_rewrites.change_privacy(clickhouse, endpoint, fields, now)
    assert got == expected, (endpoint, fields)
    assert got[1] > 0, "records stored before the change are to be rewritten"


def _run_both(sql_app, ch_app, clickhouse):
    """Both stores' rewrites run to the end: (what each said, what each's tasks said at their end)."""
    said = {}
    with inside(sql_app):
        sql_finished = []
        said["sql"] = rewrites.run(lambda: False, lambda *args: sql_finished.append(args)), sql_finished
        pending = rewrites.in_force()
    with inside(ch_app):
        ch_finished = []
        said["ch"] = ch_rewrites.run_rewrites(clickhouse, lambda: False, lambda *a: ch_finished.append(a)), ch_finished
        assert ch_rewrites.privacy_in_force(clickhouse) == pending
        assert all(left == 0 for _, left in pending.values())
    # (Tasks made together are in the order the endpoints' table lists them, its own per engine.)
    assert said["ch"][0] == said["sql"][0] and sorted(map(repr, said["ch"][1])) == sorted(map(repr, said["sql"][1]))
    assert said["sql"][0] > 0, "records were rewritten"


def _shown(now, pages, count, top, newly_seen, clients) -> dict:
    """What the API shows of the records and clients: the log's pages, the counts and lists by
    every value a rewrite changes, the names first seen, the clients."""
    window = Filters(start_ms=now - 100 * HOUR_MS, end_ms=now)
    found = {"clients": clients()}
    for scope in [{}, *({"endpoint": [name]} for name in ENDPOINTS)]:
        filters = Filters(start_ms=window.start_ms, end_ms=window.end_ms, values=scope)
        found[str(scope)] = {
            "pages": [pages(filters, page, 40) for page in range(5)],
            # (ClickHouse finds a search's names first: activity.named)
            "searched": [
                pages(dataclasses.replace(filters, search=text, search_mode=mode), 0, 40)
                for text, mode in (("example", "includes"), ("example.com", "apex"), (r"^$|^www\.", "regex"))
            ],
            "count": count(filters),
            "top": [top(filters, column, 20) for column in ("client", "question", "registrable_domain")]
            + [top(filters, column, 20) for column in ("trigger_value", "dst_country")],
            "new": [newly_seen(filters, column, 20) for column in ("question", "registrable_domain")],
        }
    return found


def _assert_same(sql_app, ch_app, clickhouse, now):
    with inside(sql_app):
        expected = _shown(now, page_records, statistics.count, statistics.top, statistics.newly_seen, list_clients)
    with inside(ch_app):
        got = _shown(
            now,
            lambda *a: ch_page_records(clickhouse, *a),
            lambda *a: ch_statistics.count(clickhouse, *a),
            lambda *a: ch_statistics.top(clickhouse, *a),
            lambda *a: ch_statistics.newly_seen(clickhouse, *a),
            lambda: ch_list_clients(clickhouse),
        )
    for part in expected:
        assert got[part] == expected[part], part


CHANGES = [
    ("home", {"client_ip": "truncate", "question": "domain"}),
    ("office", {"client_ip": "hash", "answers": "drop", "client_metadata": "drop"}),
    (privacy.DEFAULT, {"client_ip": "drop", "question": "drop"}),
]


def test_stricter_settings_rewrite_what_the_sql_store_rewrites(pair):
    sql_app, ch_app, clickhouse, now = pair
    _same_keys(sql_app, ch_app)
    for endpoint, fields in CHANGES:
        _change_both(sql_app, ch_app, clickhouse, endpoint, fields, now)
        _run_both(sql_app, ch_app, clickhouse)
        _assert_same(sql_app, ch_app, clickhouse, now)


def test_every_name_a_record_holds_is_seen_through_every_statement_of_rewrites(pair, monkeypatch):
    """The log's searches find their names in names_seen first (activity.named): after each
    statement of the rewrites (settings made stricter, then age steps), every name the records
    hold (per endpoint and over all of them), if not '', is a name or a registrable domain of
    sightings from its first record to its last."""
    sql_app, ch_app, clickhouse, now = pair
    _same_keys(sql_app, ch_app)
    unseen, command = [], clickhouse.command

    def watched(sql, params=None):
        command(sql, params)
        unseen.extend(_names_unseen(clickhouse))

    monkeypatch.setattr(clickhouse, "command", watched)
    for endpoint, fields in CHANGES[:2]:
        _change_both(sql_app, ch_app, clickhouse, endpoint, fields, now)
        _run_both(sql_app, ch_app, clickhouse)
    with inside(ch_app), write_transaction():
        privacy.change(privacy.DEFAULT, {"age_steps": [{"after_days": 1, "question": "domain"}]})
        ch_rewrites.plan_ages(clickhouse, now)
    with inside(ch_app):
        assert ch_rewrites.run_rewrites(clickhouse, lambda: False) > 0
    assert not unseen


def _names_unseen(clickhouse) -> list:
    """The (endpoint or '', name) pairs of the records whose sightings do not span them."""
    return clickhouse.rows(
        "SELECT r.scope, r.question FROM (SELECT scope, question, min(ts) AS first, max(ts) AS last "
        "FROM analytics.records ARRAY JOIN [endpoint, ''] AS scope WHERE question != '' GROUP BY scope, question) AS r "
        "LEFT JOIN (SELECT endpoint, name, min(first) AS first, max(last) AS last FROM analytics.names_seen "
        "ARRAY JOIN [question, registrable_domain] AS name GROUP BY endpoint, name) AS s "
        "ON r.scope = s.endpoint AND r.question = s.name WHERE s.first > r.first OR s.last < r.last"
    )


def test_age_steps_rewrite_what_the_sql_store_rewrites(pair):
    """Records older than a day lose their address's last bits and metadata, older than two
    their names' detail and answers; planned again later, the records that aged since."""
    sql_app, ch_app, clickhouse, now = pair
    steps = [
        {"after_days": 1, "client_ip": "truncate", "ipv4_prefix": 16, "client_metadata": "drop"},
        {"after_days": 2, "question": "domain", "answers": "drop"},
    ]
    for when in (now, now + 10 * HOUR_MS):
        for app, plan in ((sql_app, rewrites.plan_ages), (ch_app, lambda at: ch_rewrites.plan_ages(clickhouse, at))):
            with inside(app), write_transaction():
                if when == now:
                    privacy.change(privacy.DEFAULT, {"age_steps": steps})
                plan(when)
        _run_both(sql_app, ch_app, clickhouse)
        _assert_same(sql_app, ch_app, clickhouse, now)


def test_no_old_value_is_left_in_a_mutations_text(pair):
    """ClickHouse keeps its last mutations' statements: an address or name rewritten away must
    not be in them (the values go through a memory-only map)."""
    sql_app, ch_app, clickhouse, now = pair
    _same_keys(sql_app, ch_app)
    for endpoint, fields in CHANGES:
        _change_both(sql_app, ch_app, clickhouse, endpoint, fields, now)
    with inside(ch_app):
        assert ch_rewrites.run_rewrites(clickhouse, lambda: False) > 0
        assert ch_rewrites.clean_unused_terms(clickhouse, lambda: False) == (0, 0)
    statements = "\n".join(row[0] for row in clickhouse.rows("SELECT command FROM system.mutations"))
    assert "UPDATE" in statements
    for value in CLIENTS[:4] + NAMES:
        assert value not in statements
    left = "SELECT groupUniqArray(client), groupUniqArray(question) FROM analytics.records"
    clients, names = clickhouse.rows(left)[0]
    assert not set(clients) & set(CLIENTS[:4]) and "www.example.com" not in names
