"""Sending one alert to one destination: an http(s) URL gets a signed webhook (JSON body, an
HMAC-SHA256 of the body in a header), any other URL goes to apprise (ntfy, Gotify, e-mail,
Matrix, Slack, Discord, Telegram, ...). Nothing else is fetched."""

import hashlib
import hmac
import urllib.error
import urllib.parse
import urllib.request
import warnings

import apprise
import orjson

with warnings.catch_warnings():
    # apprise's e-mail plugin imports imghdr, deprecated (Python 3.11, 3.12) and removed after,
    # on which it falls back by itself: imported here once, quietly, so no warning reaches a log.
    warnings.simplefilter("ignore", DeprecationWarning)
    try:
        import imghdr  # noqa: F401
    except ImportError:
        pass

SIGNATURE_HEADER = "X-DNS-Analytics-Signature"
TIMEOUT_SECONDS = 10
WEBHOOK_SCHEMES = ("http", "https")


class DeliveryError(Exception):
    """A destination did not take the alert; the message says why (shown in the history)."""


def problem(url: str) -> str | None:
    """Why `url` cannot be a destination (None: it can), judged without any network."""
    parts = urllib.parse.urlsplit(url)
    if parts.scheme.lower() in WEBHOOK_SCHEMES:
        return None if parts.hostname else "a webhook URL needs a host"
    return None if _notifier().add(url) else "neither http(s) nor a notification URL apprise knows"


def sign(secret: str, body: bytes) -> str:
    return "sha256=" + hmac.new(secret.encode(), body, hashlib.sha256).hexdigest()


def send(url: str, alert: dict, title: str, secret: str):
    """Deliver or raise DeliveryError."""
    if urllib.parse.urlsplit(url).scheme.lower() in WEBHOOK_SCHEMES:
        _webhook(url, orjson.dumps(alert), secret)
    else:
        _notify(url, title, alert)


class _NoRedirects(urllib.request.HTTPRedirectHandler):
    # A redirect would send the alert (or turn the POST into a GET) somewhere not configured.
    def redirect_request(self, *args, **kwargs):
        return None


_OPENER = urllib.request.build_opener(_NoRedirects)


def _webhook(url: str, body: bytes, secret: str):
    request = urllib.request.Request(
        url,
        data=body,
        method="POST",
        headers={
            "Content-Type": "application/json",
            "User-Agent": "dns-analytics-alerts",
            SIGNATURE_HEADER: sign(secret, body),
        },
    )
    try:
        with _OPENER.open(request, timeout=TIMEOUT_SECONDS) as response:
            response.read(65536)
    except urllib.error.HTTPError as error:
        raise DeliveryError(f"HTTP {error.code} {error.reason}") from None
    except (urllib.error.URLError, OSError, ValueError) as error:
        raise DeliveryError(str(getattr(error, "reason", error))) from None


def _notifier() -> apprise.Apprise:
    # Kept in memory: apprise would otherwise write its persistent store under the home folder.
    asset = apprise.AppriseAsset(storage_mode=apprise.PersistentStoreMode.MEMORY, service_timeout=TIMEOUT_SECONDS)
    return apprise.Apprise(asset=asset)


def _notify(url: str, title: str, alert: dict):
    notifier = _notifier()
    if not notifier.add(url):
        raise DeliveryError("not a notification URL apprise knows")
    body = f"{alert['message']}\n\n{orjson.dumps(alert, option=orjson.OPT_INDENT_2).decode()}"
    with apprise.LogCapture(level=apprise.logging.WARNING) as output:
        delivered = notifier.notify(body=body, title=title)
    if not delivered:
        said = " ".join(output.getvalue().split())
        raise DeliveryError(said[-500:] or "the notification service refused it")
