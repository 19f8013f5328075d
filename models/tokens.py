"""Single-use, short-lived tokens for the realtime stream (EventSource cannot send headers)."""

import json
import secrets

from .database import query, write_transaction
from .keys import secret_hash


def create_token(principal: dict, now_ms: int, lifetime_ms: int) -> tuple[str, int]:
    """A new token carrying `principal`; returns (token, expiry ms)."""
    token = secrets.token_urlsafe(32)
    expires = now_ms + lifetime_ms
    with write_transaction():
        query("DELETE FROM stream_token WHERE expires < ?", [now_ms])
        query(
            "INSERT INTO stream_token (token_hash, expires, principal) VALUES (?, ?, ?)",
            [secret_hash(token), expires, json.dumps(principal)],
        )
    return token, expires


def redeem_token(token: str, now_ms: int) -> dict | None:
    """The principal of a valid token, which is used up by this call; None if unknown,
    already used or expired."""
    with write_transaction():
        row = query(
            "DELETE FROM stream_token WHERE token_hash = ? RETURNING expires, principal", [secret_hash(token)]
        ).fetchone()
    if row is None or row[0] < now_ms:
        return None
    return json.loads(row[1])
