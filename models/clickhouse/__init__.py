"""ClickHouse as the record store (docs/clickhouse.md): which one the settings name, talking to it
(chDB in this process, or a server), and its tables."""
