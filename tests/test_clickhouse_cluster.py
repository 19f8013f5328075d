"""A cluster's statements (`?cluster=NAME`) run on one node. The store's code is given a
cluster's target; each statement it makes is checked as a cluster needs it, then run on the
test's chDB as that one node would run it. On one node the `_local` tables and the Distributed
tables over them hold the same rows, and ON CLUSTER and clusterAllReplicas reach that node
alone. So for every deletion, erasure, retention, expiry and privacy rewrite, the text is checked
(rows change in place only in each node's `_local` tables, ON CLUSTER; reads and inserts go
through the Distributed tables). The same differential tests then hold what those statements
do to the SQL store's answers. What several nodes do has not run here: the DDL queue, replicas,
shards (docs/clickhouse.md "A cluster")."""

import dataclasses
import re
import subprocess
import sys
import textwrap

import pytest
from test_clickhouse_privacy import (  # noqa: F401
    pair,
    test_no_old_value_is_left_in_a_mutations_text,
    test_stricter_settings_rewrite_what_the_sql_store_rewrites,
)
from test_clickhouse_records import (  # noqa: F401 (fixtures and tests collected here, on a cluster's text)
    _records,
    both,
    inside,
    test_deletions_leave_what_the_sql_stores_leave,
    test_records_above_the_counter_are_erased_before_the_next_batch,
    test_the_clients_last_activity_is_the_sql_stores,
)
from test_clickhouse_statistics import (  # noqa: F401
    stores,
    test_past_the_records_horizon_the_statistics_are_the_sql_stores,
    test_records_stored_while_retention_runs_go_with_it_as_on_the_sql_store,
)

from models.clickhouse import activity, connection, ingestion
from models.clickhouse import deletion as ch_deletion
from models.records.filters import Filters
from models.runtime.clock import now_ms
from models.runtime.config import DAY_MS
from schemas.records import parse_records

from support.servers import ROOT

pytestmark = [pytest.mark.against_sqlite, pytest.mark.slow]

CLUSTER = "farm"
# A statement that changes a table's rows in place, and the table it names.
_CHANGES = re.compile(r"(DELETE FROM|ALTER TABLE|OPTIMIZE TABLE|TRUNCATE TABLE)(?: IF EXISTS)? (\S+)( ON CLUSTER \w+)?")
# The one table that is each node's own by design: the rewrite map, filled where it is read.
_NODES_OWN = ".rewrite_map"


class OneNode(connection.Connection):
    """A cluster's connection whose every node is the test's chDB."""

    def __init__(self, node: connection.Connection):
        super().__init__(dataclasses.replace(node.target, cluster=CLUSTER))
        self.node = node
        self.said: list[str] = []

    def _here(self, sql: str, params: dict | None = None) -> tuple[str, dict | None]:
        self.said.append(sql)
        changes = _CHANGES.match(sql.lstrip())
        if changes and not changes.group(2).endswith(_NODES_OWN):
            assert changes.group(2).endswith("_local") and changes.group(3) == f" ON CLUSTER {CLUSTER}", sql
        else:  # a read of every replica's own rows names the `_local` tables, any other the Distributed ones
            assert "ON CLUSTER" not in sql, sql
            assert "_local" not in re.sub(rf"clusterAllReplicas\('{CLUSTER}', [\w.]+\)", "", sql), sql
        if params and re.search(r"FROM system\.(parts|tables)\b|system\.parts\)", sql):
            # a node's tables as the system tables name them: the `_local` ones
            assert all(params[k].endswith("_local") for k in ("table", "name") if k in params), (sql, params)
            params = {k: v.removesuffix("_local") if k in ("table", "name") else v for k, v in params.items()}
        sql = sql.replace(f" ON CLUSTER {CLUSTER}", "")
        sql = re.sub(rf"clusterAllReplicas\('{CLUSTER}', ([\w.]+)\)", r"\1", sql)
        sql = re.sub(r"\b(\w+)_local\b", r"\1", sql)
        return sql, params

    def rows(self, sql, params=None):
        return self.node.rows(*self._here(sql, params))

    def text(self, sql, params=None, settings=None):
        return self.node.text(*self._here(sql, params), settings)

    def command(self, sql, params=None):
        self.node.command(*self._here(sql, params))

    def insert(self, table, columns, rows, times=(), token=None, days=()):
        self._here(f"INSERT INTO {table}")
        self.node.insert(table, columns, rows, times, token, days)

    def close(self):
        pass  # the node is conftest's to close


@pytest.fixture
def clickhouse(clickhouse):
    return OneNode(clickhouse)


def test_a_clusters_deletions_retention_and_expiry_change_each_nodes_tables(make_app, database, clickhouse):
    """What a cluster's node is asked, by a client's deletion, retention of whole days and the
    statistics' expiry: rows deleted and days dropped in each node's `_local` tables ON CLUSTER,
    the days found among every node's parts, the records read back through the Distributed
    tables: what is left is what was not selected."""
    app = make_app(ANALYTICS_HOT_HOURS=2)
    now = now_ms()
    records = _records(now)
    with inside(app):
        ingestion.store_records(clickhouse, parse_records(records, now))
        ch_deletion.delete_clients(clickhouse, endpoints=["home"], client_ids=["tv"], end_ms=now)
        cutoff = (now // DAY_MS - 1) * DAY_MS - 1  # every record of the days before yesterday
        ch_deletion.delete_records(clickhouse, end_ms=cutoff, expire=True)
        ch_deletion.expire_statistics(clickhouse, cutoff + 1)
        left = activity.page_records(clickhouse, Filters(), 0, 1000)
    kept = [r for r in records if r["timestamp"] > cutoff and (r["endpointId"], r["clientId"]) != ("home", "tv")]
    assert len(kept) > 0
    assert sorted((row.ts, row.client, row.question) for row in left) == sorted(
        (r["timestamp"], r["clientId"], r["question"].lower()) for r in kept
    )
    said = "\n".join(clickhouse.said)
    assert "DELETE FROM analytics.records_local ON CLUSTER farm WHERE" in said
    assert "DELETE FROM analytics.last_activity_local ON CLUSTER farm WHERE" in said
    assert "ALTER TABLE analytics.records_local ON CLUSTER farm DROP PARTITION ID" in said
    assert "ALTER TABLE analytics.daily_counts_local ON CLUSTER farm DROP PARTITION ID" in said
    assert "FROM clusterAllReplicas('farm', system.parts)" in said
    assert "DELETE FROM analytics.names_seen_local ON CLUSTER farm WHERE" in said


def test_a_rewrites_map_is_filled_on_every_node_of_the_cluster(tmp_path):
    """The privacy rewrite's map on each host system.clusters lists for the cluster, each reached
    as the target is (its port, its user), through the vendor client: here its chDB backend, in a
    process of its own whose chDB was given a cluster of three hosts in two shards. Every host's
    client is the same chDB, so the map ends as one node's, filled once for each host."""
    config = tmp_path / "cluster.xml"
    config.write_text(
        "<clickhouse><remote_servers><farm>"
        "<shard><replica><host>node-a.example</host><port>9000</port></replica>"
        "<replica><host>node-b.example</host><port>9000</port></replica></shard>"
        "<shard><replica><host>node-c.example</host><port>9000</port></replica></shard>"
        "</farm></remote_servers></clickhouse>"
    )
    script = textwrap.dedent(
        f"""
        import clickhouse_connect
        from models.clickhouse import connection, rewrites
        from models.clickhouse.target import parse

        asked = []

        def connect(**given):
            asked.append((given["host"], given["port"], given["username"], tuple(sorted(given["settings"] or {{}}))))
            return clickhouse_connect.get_client(
                interface="chdb", path="{tmp_path}/ch?config-file={config}", database="default"
            )

        server = connection.Server(parse("clickhouse://dns:pw@ch.example:8124/default?cluster=farm"), connect)
        rewrites._put(server, [("client", "10.0.0.7", "10.0.0.0")])
        print(sorted(set(asked)))
        print(server.rows("SELECT joinGetOrNull('default.rewrite_map', 'kept', 'client', '10.0.0.7')"))
        rewrites._empty_map(server)
        print(server.rows("SELECT joinGetOrNull('default.rewrite_map', 'kept', 'client', '10.0.0.7')"))
        server.close()
        """
    )
    run = subprocess.run([sys.executable, "-c", script], cwd=ROOT, capture_output=True, text=True, timeout=120)
    assert run.returncode == 0, run.stderr
    hosts, filled, emptied = run.stdout.splitlines()
    # the cluster's connection inserts in the foreground and may mutate by subquery and map;
    # each node's, which only fills and empties its map, is a plain one
    cluster = ("allow_nondeterministic_mutations", "distributed_foreground_insert")
    assert hosts == str(
        sorted([("ch.example", 8124, "dns", cluster)] + [(f"node-{n}.example", 8124, "dns", ()) for n in "abc"])
    )
    assert filled == "[('10.0.0.0',)]" and emptied == "[(None,)]"
