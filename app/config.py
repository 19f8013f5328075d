"""Configuration: defaults, then instance/config.py, then ANALYTICS_* environment variables."""

import os

DEFAULTS = {
    "ANALYTICS_DATABASE": None,  # None: instance/analytics.db
    "ANALYTICS_API_KEY": None,
    "ANALYTICS_RETENTION_DAYS": 33,
    # Statistics (daily rollups) outlive the records: kept this long (0: forever), never
    # shorter than the records.
    "ANALYTICS_STATISTICS_RETENTION_DAYS": 400,
    "ANALYTICS_RETENTION_INTERVAL": 3600,  # seconds between retention runs
    "ANALYTICS_PROXY_COUNT": 0,  # reverse proxies in front whose X-Forwarded-For is trusted
    "ANALYTICS_MAX_BODY_MB": 16,
    "ANALYTICS_MAX_BATCH": 50_000,
    "ANALYTICS_MAX_STREAMS": 16,  # realtime streams per worker process
    "ANALYTICS_MAX_EXPENSIVE_PER_KEY": 8,  # expensive requests per key per worker process (0: no cap)
    "ANALYTICS_MAX_STREAMS_PER_KEY": 4,  # realtime streams per API key and worker process (then 429)
    "ANALYTICS_STREAM_BACKLOG": 100_000,  # newest records a resumed stream replays at most
    "ANALYTICS_CORS_ORIGINS": "",  # comma-separated origins allowed cross-origin; empty: CORS off
    # SQLite: the write-ahead log is kept under this (see models.dialect.SQLite.after_write).
    "ANALYTICS_WAL_LIMIT_MB": 256,
    # Seconds a read's queries may take (0: no limit); past it the answer is a 503 (50302).
    "ANALYTICS_QUERY_SECONDS": 60.0,
    "ANALYTICS_METRICS_ENDPOINTS": 20,  # endpoints with a metrics label of their own
}
_INTEGERS = (
    "ANALYTICS_RETENTION_DAYS",
    "ANALYTICS_STATISTICS_RETENTION_DAYS",
    "ANALYTICS_RETENTION_INTERVAL",
    "ANALYTICS_PROXY_COUNT",
    "ANALYTICS_MAX_BODY_MB",
    "ANALYTICS_MAX_BATCH",
    "ANALYTICS_MAX_STREAMS",
    "ANALYTICS_MAX_EXPENSIVE_PER_KEY",
    "ANALYTICS_MAX_STREAMS_PER_KEY",
    "ANALYTICS_STREAM_BACKLOG",
    "ANALYTICS_METRICS_ENDPOINTS",
    "ANALYTICS_WAL_LIMIT_MB",
)

API_SETTINGS = {
    "API_TITLE": "DNS Analytics",
    "API_VERSION": "v2",
    "OPENAPI_VERSION": "3.0.3",
    "OPENAPI_URL_PREFIX": "/v2",
    "OPENAPI_JSON_PATH": "openapi.json",
    "JSON_SORT_KEYS": False,
}


def load_config(app, test_config=None):
    app.config.update(API_SETTINGS)
    app.config.update(DEFAULTS)
    app.config.from_pyfile("config.py", silent=True)
    for name in DEFAULTS:
        if os.environ.get(name):
            app.config[name] = os.environ[name]
    if test_config:
        app.config.update(test_config)
    for name in _INTEGERS:
        try:
            app.config[name] = int(app.config[name])
        except (TypeError, ValueError):
            raise RuntimeError(f"{name} must be an integer, got {app.config[name]!r}") from None
    try:
        app.config["ANALYTICS_QUERY_SECONDS"] = float(app.config["ANALYTICS_QUERY_SECONDS"])
    except (TypeError, ValueError):
        value = app.config["ANALYTICS_QUERY_SECONDS"]
        raise RuntimeError(f"ANALYTICS_QUERY_SECONDS must be a number, got {value!r}") from None
    if not app.config["ANALYTICS_DATABASE"]:
        app.config["ANALYTICS_DATABASE"] = os.path.join(app.instance_path, "analytics.db")
    app.config["MAX_CONTENT_LENGTH"] = app.config["ANALYTICS_MAX_BODY_MB"] * 1024 * 1024
