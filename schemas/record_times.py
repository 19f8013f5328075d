"""A record's timestamp: read as every time is (datetimes.parse_datetime), and refused when it
is further past its receipt than two hosts' clocks may differ by
(ANALYTICS_FUTURE_TOLERANCE_SECONDS): a record from the future would stand as its client's and
endpoint's last activity until that time came, and keep a feed-silent rule from ever firing."""

from models.runtime.config import DEFAULTS

from .datetimes import DatetimeError, format_ms, parse_datetime

_SETTING = "ANALYTICS_FUTURE_TOLERANCE_SECONDS"
_tolerance_ms = DEFAULTS[_SETTING] * 1000
# The earliest time ClickHouse's DateTime64 keeps (1900-01-01): where it keeps the records
# (ANALYTICS_RECORD_STORE), an older record is refused, not stored as another time.
CLICKHOUSE_EARLIEST_MS = -2_208_988_800_000
_earliest_ms = None


def configure(config) -> None:
    """Take the installation's tolerance and record store (the web app, a feed, a feed's store
    process)."""
    global _tolerance_ms, _earliest_ms
    _tolerance_ms = int(config[_SETTING]) * 1000
    _earliest_ms = CLICKHOUSE_EARLIEST_MS if config.get("ANALYTICS_RECORD_STORE") else None


def latest_ms(now: int) -> int:
    """The latest time a record received at `now` may carry."""
    return now + _tolerance_ms


def record_ms(timestamp, received_ms: int) -> int:
    """The record's time (its receipt when it has none). Raises ValueError with a message that
    follows "field 'timestamp' " and has no closing period."""
    if timestamp is None:
        return received_ms
    try:
        ts = parse_datetime(timestamp)
    except DatetimeError as exc:
        raise ValueError(f"is not a valid datetime: {exc.detail}") from None
    if _earliest_ms is not None and ts < _earliest_ms:
        raise ValueError(
            f"is {format_ms(ts)}, before {format_ms(_earliest_ms)}, the earliest time the ClickHouse record "
            "store keeps (ANALYTICS_RECORD_STORE)"
        )
    if ts > received_ms + _tolerance_ms:
        raise ValueError(
            f"is {format_ms(ts)}, more than {_tolerance_ms // 1000} s after the record was received "
            f"({format_ms(received_ms)}; {_SETTING}): send the time the query was answered, as epoch "
            "milliseconds or an RFC 3339 date-time, or no timestamp to have it stamped on receipt"
        )
    return ts
