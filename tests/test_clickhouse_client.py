"""The ClickHouse store's server path run on the real engine: `connection.Server`, the code that
talks to a ClickHouse server through the vendor's client (clickhouse-connect), with the client's
own in-process chDB backend in place of its HTTP transport. Every statement, parameter, insert,
typed row and text of the server path runs, held to the SQL store by the same differential tests
as chDB's own path: the log, the export, deletions, statistics past the records' horizon,
retention and privacy rewrites (a choice of them: the others run the same statements). Only the
HTTP between client and server does not run (docs/clickhouse.md "Tested here")."""

import pytest
from test_clickhouse_privacy import (  # noqa: F401
    pair,
    test_no_old_value_is_left_in_a_mutations_text,
    test_stricter_settings_rewrite_what_the_sql_store_rewrites,
)
from test_clickhouse_records import (  # noqa: F401 (fixtures and tests collected here, on the server path)
    both,
    test_a_read_while_sightings_are_made_again_finds_them_as_before_or_after,
    test_deletions_leave_what_the_sql_stores_leave,
    test_every_page_of_the_log_is_the_sql_stores,
    test_records_above_the_counter_are_erased_before_the_next_batch,
    test_the_clients_last_activity_is_the_sql_stores,
    test_the_export_clickhouse_writes_is_the_sql_stores_byte_for_byte,
    test_the_export_is_the_sql_stores,
    test_the_live_tail_reads_what_the_sql_store_does,
    test_the_statistics_are_the_sql_stores,
    test_what_alerts_outputs_and_metrics_read_is_the_sql_stores,
)
from test_clickhouse_statistics import (  # noqa: F401
    stores,
    test_past_the_records_horizon_the_statistics_are_the_sql_stores,
    test_records_stored_while_retention_runs_go_with_it_as_on_the_sql_store,
)

from models.clickhouse import connection
from models.engine.database import QueryStopped

pytestmark = [pytest.mark.against_sqlite, pytest.mark.slow]


@pytest.fixture
def clickhouse(clickhouse):
    """The test's chDB (conftest's), reached as a server is: through clickhouse-connect's client,
    its chDB backend on the same folder (one engine a process: the two share it)."""
    import clickhouse_connect

    def connect(**given):
        return clickhouse_connect.get_client(
            interface="chdb", path=clickhouse.target.folder, database=given["database"]
        )

    server = connection.Server(clickhouse.target, connect)
    try:
        yield server
    finally:
        server.close()


def test_the_server_path_is_what_runs_here(clickhouse):
    assert isinstance(clickhouse, connection.Server)
    assert clickhouse.rows("SELECT 1 + {one:UInt8}", {"one": 1}) == [(2,)]


def test_a_read_past_its_time_budget_is_stopped_on_the_server_path(clickhouse):
    connection.limit_reads(0.2)
    try:
        with pytest.raises(QueryStopped):
            clickhouse.rows("SELECT count() FROM numbers(100000000000) WHERE sipHash64(number) = 1")
    finally:
        connection.limit_reads(None)
    assert clickhouse.rows("SELECT count() FROM numbers(1000)") == [(1000,)]
