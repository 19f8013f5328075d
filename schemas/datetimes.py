"""Datetime on the wire: read RFC 3339 or epoch milliseconds (and, where an operation takes a
time, a time relative to the request: `now`, `-24h`), write YYYY-MM-DDTHH:MM:SS.mmmZ.

A number below MIN_NUMERIC_MS (1973-03-03 as milliseconds) is refused: it is nearly always epoch
seconds sent by mistake, which read as milliseconds would be a time in January 1970 (stored,
then expired at once; a window from 0 silently reads everything). An earlier time is still
readable, written as RFC 3339."""

import functools
import re
from datetime import UTC, datetime, timedelta

from models.runtime.clock import request_now_ms

# Epoch milliseconds of 0001-01-01T00:00:00.000Z and 9999-12-31T23:59:59.999Z.
MIN_MS = -62135596800000
MAX_MS = 253402300799999
# The smallest number read as epoch milliseconds: 1973-03-03T09:46:40Z.
MIN_NUMERIC_MS = 100_000_000_000

_EPOCH = datetime(1970, 1, 1, tzinfo=UTC)
_ONE_MS = timedelta(milliseconds=1)
_RFC3339 = re.compile(
    r"(\d{4})-(\d{2})-(\d{2})[Tt ](\d{2}):(\d{2}):(\d{2})(?:\.(\d{1,9}))?"
    # A '+' that was not URL-encoded arrives as a space: read it as '+'.
    r"(?:([Zz])|([+\- ])(\d{2}):(\d{2}))"
)
_EPOCH_MS = re.compile(r"-?\d{1,15}")
# now, -90s, -15m, -24h, -7d, -2w (also now-24h, as Grafana writes it): before the request.
_RELATIVE = re.compile(r"(?:now)?(?:-(\d{1,9})([smhdw]))?")
_UNIT_MS = {"s": 1000, "m": 60_000, "h": 3_600_000, "d": 86_400_000, "w": 604_800_000}
_RELATIVE_ENDS = tuple(_UNIT_MS)  # "now" ends in "w" too


class DatetimeError(ValueError):
    """A time that cannot be read: `detail` says what was seen and what to send."""

    def __init__(self, detail: str, shapeless: bool = False):
        super().__init__(f"Not a valid datetime: {detail}")
        self.detail = detail
        # Not a time's shape at all: where a request takes a relative time, one may be meant.
        self.shapeless = shapeless


def parse_time(value) -> int:
    """parse_datetime, or a time relative to the request's start (models.runtime.clock): `now`, or a
    whole number of seconds, minutes, hours, days or weeks before it (`-24h`, `now-7d`). The
    message of its DatetimeError ends with a period, as request parameters' messages do."""
    try:
        if isinstance(value, str) and value[:1] in ("n", "-") and value[-1:] in _RELATIVE_ENDS:
            match = _RELATIVE.fullmatch(value)
            if match:
                count, unit = match.groups()
                return _checked_ms(request_now_ms() - (int(count) * _UNIT_MS[unit] if unit else 0))
        return parse_datetime(value)
    except DatetimeError as exc:
        relative = ", or now or a time before it such as -24h (s, m, h, d, w)" if exc.shapeless else ""
        raise DatetimeError(f"{exc.detail}{relative}.") from None


def parse_datetime(value) -> int:
    """Epoch milliseconds from an RFC 3339 string, an integer or a string of digits.

    Raises DatetimeError, whose message is fit for the user (with no closing period).
    """
    if isinstance(value, bool) or not isinstance(value, int | str):
        raise DatetimeError(_SHAPES, shapeless=True)
    if isinstance(value, int):
        return _numeric_ms(value)
    if len(value) == 24 and value[4] == value[7] == "-" and value[10] == "T" and value[19] == "." and value[23] == "Z":
        # The shape this service writes (and most feeds send): the C parser, ~10x faster.
        try:
            moment = datetime.fromisoformat(value)
        except ValueError:
            pass
        else:
            return _checked_ms((moment - _EPOCH) // _ONE_MS)
    text = value.strip()
    if _EPOCH_MS.fullmatch(text):
        return _numeric_ms(int(text))
    match = _RFC3339.fullmatch(value)
    if not match:
        raise DatetimeError(_SHAPES, shapeless=True)
    year, month, day, hour, minute, second, fraction, zulu, sign, off_h, off_m = match.groups()
    leap_second = second == "60"
    try:
        moment = datetime(
            int(year),
            int(month),
            int(day),
            int(hour),
            int(minute),
            59 if leap_second else int(second),
            tzinfo=UTC,
        )
    except ValueError:
        raise DatetimeError(f"{value!r} is not a calendar date and time") from None
    if not zulu and (int(off_h) > 23 or int(off_m) > 59):
        raise DatetimeError(f"bad UTC offset in {value!r}")
    ms = (moment - _EPOCH) // timedelta(milliseconds=1)
    if leap_second:
        ms += 1000
    if fraction:
        ms += int(fraction[:3].ljust(3, "0"))
    if not zulu:
        offset_ms = (int(off_h) * 60 + int(off_m)) * 60000
        ms -= offset_ms if sign in "+ " else -offset_ms
    return _checked_ms(ms)


_SHAPES = "use RFC 3339 (e.g. 2024-05-01T12:00:00Z) or epoch milliseconds"


def _numeric_ms(ms: int) -> int:
    if ms < MIN_NUMERIC_MS:
        as_date = format_ms(_checked_ms(ms))[:10]
        if MIN_NUMERIC_MS <= ms * 1000 <= MAX_MS:
            raise DatetimeError(
                f"{ms} is {as_date} as epoch milliseconds; it looks like epoch seconds: "
                f"send milliseconds ({ms * 1000}) or an RFC 3339 date-time"
            )
        raise DatetimeError(
            f"{ms} is {as_date} as epoch milliseconds; a number before 1973-03-03 is taken for a mistake "
            "(epoch seconds?): send milliseconds, or an earlier time as an RFC 3339 date-time "
            "(e.g. 1970-01-01T00:00:00Z)"
        )
    return _checked_ms(ms)


def _checked_ms(ms: int) -> int:
    if not MIN_MS <= ms <= MAX_MS:
        raise DatetimeError("outside the years 1 to 9999")
    return ms


def format_ms(ms: int) -> str:
    """The one output shape of every time the service writes. (Client lists and CSV exports
    write one per row: the date and time up to the minute are worked out once per minute.)"""
    minute, rest = divmod(ms, 60_000)
    return f"{_minute(minute)}{rest // 1000:02d}.{rest % 1000:03d}Z"


@functools.lru_cache(maxsize=4096)
def _minute(minute: int) -> str:
    day, rest = divmod(minute, 1440)
    return f"{_date(day)}T{rest // 60:02d}:{rest % 60:02d}:"


@functools.lru_cache(maxsize=4096)
def _date(day: int) -> str:
    moment = _EPOCH + timedelta(days=day)
    return f"{moment.year:04d}-{moment.month:02d}-{moment.day:02d}"
