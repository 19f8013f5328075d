"""The installation's settings: defaults, then instance/config.py, then ANALYTICS_* environment
variables. The web app (app/config.py) and the feeds read them the same way, from here."""

import os

# The project root's instance/ folder (this file is models/runtime/config.py): where the
# default SQLite store, the generated key and a feed's spool live.
INSTANCE_PATH = os.path.join(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))), "instance")
DAY_MS = 86_400_000

DEFAULTS = {
    "ANALYTICS_DATABASE": None,  # None: instance/analytics.db
    # A ClickHouse for the records (docs/clickhouse.md); empty: they stay in ANALYTICS_DATABASE.
    "ANALYTICS_RECORD_STORE": "",
    "ANALYTICS_API_KEY": None,
    "ANALYTICS_RETENTION_DAYS": 33,
    # Statistics (daily rollups) outlive the records: kept this long (0: forever), never
    # shorter than the records.
    "ANALYTICS_STATISTICS_RETENTION_DAYS": 400,
    "ANALYTICS_RETENTION_INTERVAL": 3600,  # seconds between retention runs
    "ANALYTICS_PRIVACY_INTERVAL": 300,  # seconds between runs of the privacy job (age steps, rewrites)
    "ANALYTICS_ALERT_INTERVAL": 60,  # seconds between runs of the alerts job (rules judged, deliveries tried)
    "ANALYTICS_PROXY_COUNT": 0,  # reverse proxies in front whose X-Forwarded-For is trusted
    "ANALYTICS_MAX_BODY_MB": 16,
    "ANALYTICS_MAX_BATCH": 50_000,
    "ANALYTICS_MAX_STREAMS": 16,  # realtime streams per worker process
    "ANALYTICS_MAX_EXPENSIVE_PER_KEY": 8,  # expensive requests per key per worker process (0: no cap)
    "ANALYTICS_MAX_STREAMS_PER_KEY": 4,  # realtime streams per API key and worker process (then 429)
    "ANALYTICS_STREAM_BACKLOG": 100_000,  # newest records a resumed stream replays at most
    "ANALYTICS_CORS_ORIGINS": "",  # comma-separated origins allowed cross-origin; empty: CORS off
    # SQLite: the write-ahead log is kept under this (see models.engine.sqlite.SQLite.after_write).
    "ANALYTICS_WAL_LIMIT_MB": 256,
    # Seconds a read's queries may take (0: no limit); past it the answer is a 503 (50302).
    "ANALYTICS_QUERY_SECONDS": 60.0,
    "ANALYTICS_METRICS_ENDPOINTS": 20,  # endpoints with a metrics label of their own
    # The operator's MaxMind / DB-IP databases (.mmdb) that fill in the geography a feed left
    # empty at ingest (models/geoip.py); empty: none.
    "ANALYTICS_GEOIP_DB": "",
    "ANALYTICS_ASN_DB": "",
    # Reads of the activity log, its export and stream recorded in the access log, kept this
    # many days (0: forever).
    "ANALYTICS_ACCESS_LOG": True,
    "ANALYTICS_ACCESS_LOG_RETENTION_DAYS": 365,
    # Records an output may fall behind by (a receiver down, too slow) before it skips ahead to
    # its newest this many (docs/outputs.md).
    "ANALYTICS_OUTPUT_BACKLOG": 1_000_000,
    # Seconds a process's lease on an output lasts unrenewed (it renews every third of it): how
    # long one that dies holding it (SIGKILL, a power cut) holds the others back (docs/outputs.md).
    "ANALYTICS_OUTPUT_LEASE_SECONDS": 30,
    # Records stored that may wait to be counted into the statistics' rollups by the counting
    # process before a batch being stored counts them itself (0: each batch is counted as it
    # is stored). Reads are exact either way: they count the waiting ones.
    "ANALYTICS_COUNT_BEHIND": 50_000,
    # Hours of records kept as rows before they are packed into blocks (models/records/freezing.py).
    "ANALYTICS_HOT_HOURS": 48,
    # Seconds a record's timestamp may be past its receipt (hosts' clocks differ); a record
    # further in the future is refused (schemas/record_times.py).
    "ANALYTICS_FUTURE_TOLERANCE_SECONDS": 300,
    # Seconds between the counting process's looks for records past the hot horizon to freeze
    # (models/records/freezing.py), records arriving or not.
    "ANALYTICS_FREEZE_INTERVAL": 10,
    # Records a deletion through the API (DELETE /v2/activity-log, DELETE /v2/client) removes a
    # write transaction: batches being stored wait for one of them at most.
    "ANALYTICS_DELETE_BATCH": 10_000,
}
_INTEGERS = (
    "ANALYTICS_HOT_HOURS",
    "ANALYTICS_FREEZE_INTERVAL",
    "ANALYTICS_DELETE_BATCH",
    "ANALYTICS_RETENTION_DAYS",
    "ANALYTICS_STATISTICS_RETENTION_DAYS",
    "ANALYTICS_RETENTION_INTERVAL",
    "ANALYTICS_PRIVACY_INTERVAL",
    "ANALYTICS_ALERT_INTERVAL",
    "ANALYTICS_PROXY_COUNT",
    "ANALYTICS_MAX_BODY_MB",
    "ANALYTICS_MAX_BATCH",
    "ANALYTICS_MAX_STREAMS",
    "ANALYTICS_MAX_EXPENSIVE_PER_KEY",
    "ANALYTICS_MAX_STREAMS_PER_KEY",
    "ANALYTICS_STREAM_BACKLOG",
    "ANALYTICS_METRICS_ENDPOINTS",
    "ANALYTICS_WAL_LIMIT_MB",
    "ANALYTICS_COUNT_BEHIND",
    "ANALYTICS_ACCESS_LOG_RETENTION_DAYS",
    "ANALYTICS_OUTPUT_BACKLOG",
    "ANALYTICS_OUTPUT_LEASE_SECONDS",
    "ANALYTICS_FUTURE_TOLERANCE_SECONDS",
)
_BOOLEANS = {"1": True, "true": True, "yes": True, "on": True, "0": False, "false": False, "no": False, "off": False}


def read(instance_path: str = INSTANCE_PATH, overrides: dict | None = None) -> dict:
    """Every setting, checked: the defaults, instance/config.py's upper-case names, the
    environment's ANALYTICS_* values, then `overrides`. Raises RuntimeError for a bad value."""
    settings = dict(DEFAULTS)
    settings.update(_instance_file(os.path.join(instance_path, "config.py")))
    for name in DEFAULTS:
        if os.environ.get(name):
            settings[name] = os.environ[name]
    settings.update(overrides or {})
    for name in _INTEGERS:
        try:
            settings[name] = int(settings[name])
        except (TypeError, ValueError):
            raise RuntimeError(f"{name} must be an integer, got {settings[name]!r}") from None
    for name in ("ANALYTICS_OUTPUT_LEASE_SECONDS", "ANALYTICS_FREEZE_INTERVAL", "ANALYTICS_DELETE_BATCH"):
        if settings[name] < 1:
            raise RuntimeError(f"{name} must be at least 1, got {settings[name]}")
    tolerance = settings["ANALYTICS_FUTURE_TOLERANCE_SECONDS"]
    if tolerance < 0:
        raise RuntimeError(f"ANALYTICS_FUTURE_TOLERANCE_SECONDS must be 0 or more, got {tolerance}")
    flag = settings["ANALYTICS_ACCESS_LOG"]
    if not isinstance(flag, bool):
        if str(flag).strip().lower() not in _BOOLEANS:
            raise RuntimeError(f"ANALYTICS_ACCESS_LOG must be true or false, got {flag!r}")
        settings["ANALYTICS_ACCESS_LOG"] = _BOOLEANS[str(flag).strip().lower()]
    try:
        settings["ANALYTICS_QUERY_SECONDS"] = float(settings["ANALYTICS_QUERY_SECONDS"])
    except (TypeError, ValueError):
        value = settings["ANALYTICS_QUERY_SECONDS"]
        raise RuntimeError(f"ANALYTICS_QUERY_SECONDS must be a number, got {value!r}") from None
    if not settings["ANALYTICS_DATABASE"]:
        settings["ANALYTICS_DATABASE"] = os.path.join(instance_path, "analytics.db")
    return settings


def _instance_file(path: str) -> dict:
    """The upper-case names a Python settings file defines (none when there is no file)."""
    try:
        with open(path, "rb") as handle:
            source = handle.read()
    except FileNotFoundError:
        return {}
    except OSError as exc:  # e.g. the file of the key scripts/serve made, read by another user
        raise RuntimeError(
            f"cannot read {path} ({exc.strerror}): it holds this installation's settings; run as a user "
            "who may read it, or give the settings as ANALYTICS_* environment variables"
        ) from None
    namespace = {"__file__": path}
    exec(compile(source, path, "exec"), namespace)  # noqa: S102 - the operator's own settings file
    return {name: value for name, value in namespace.items() if name.isupper()}


def horizon_ms(settings: dict, now: int) -> int | None:
    """Records strictly older than this (ms) expire at the next run; None when retention is off."""
    days = settings["ANALYTICS_RETENTION_DAYS"]
    return now - days * DAY_MS if days > 0 else None


def statistics_days(settings: dict) -> int:
    """How many days statistics are kept (0: forever): never fewer than the records."""
    records = settings["ANALYTICS_RETENTION_DAYS"]
    statistics = settings["ANALYTICS_STATISTICS_RETENTION_DAYS"]
    return 0 if records <= 0 or statistics <= 0 else max(records, statistics)
