"""Realtime tokens that carry what they grant, signed with the store's secret (HMAC-SHA256):
any worker verifies one without reading the database, and issuing one writes nothing."""

import base64
import hashlib
import hmac
import secrets

import orjson


def _b64(data: bytes) -> str:
    return base64.urlsafe_b64encode(data).rstrip(b"=").decode("ascii")


def _unb64(text: str) -> bytes:
    return base64.urlsafe_b64decode(text + "=" * (-len(text) % 4))


def sign(secret: bytes, claims: dict) -> str:
    # A nonce makes two tokens issued in the same millisecond for the same key distinct, so
    # that using one does not use up the other.
    payload = _b64(orjson.dumps({**claims, "nonce": secrets.token_urlsafe(12)}))
    return f"{payload}.{_b64(hmac.digest(secret, payload.encode('ascii'), hashlib.sha256))}"


def verify(secret: bytes, token: str) -> dict | None:
    """The claims of a token signed with `secret`, or None for anything else."""
    payload, _, signature = token.partition(".")
    try:
        expected = hmac.digest(secret, payload.encode("ascii"), hashlib.sha256)
        if not hmac.compare_digest(_unb64(signature), expected):
            return None
        claims = orjson.loads(_unb64(payload))
    except (ValueError, UnicodeError):
        return None
    return claims if isinstance(claims, dict) else None
