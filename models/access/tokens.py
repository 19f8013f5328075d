"""Single-use realtime tokens (EventSource cannot send headers): the secret they are signed
with, and the record of tokens already used. Issuing a token writes nothing; using one does."""

import secrets

from models.access.keys import secret_hash
from models.engine.database import query, write_transaction
from models.schema import settings

SECRET_SETTING = "stream_token_secret"


def ensure_token_secret():
    """Make the signing secret once, at schema creation (inside its write transaction), so that
    every worker and every process on the database signs and verifies with the same one."""
    if settings.read(SECRET_SETTING) is None:
        settings.write(SECRET_SETTING, secrets.token_hex(32))


def token_secret() -> bytes:
    return bytes.fromhex(settings.read(SECRET_SETTING))


def use_token(token: str, expires: int, now_ms: int) -> bool:
    """Mark a (validly signed, unexpired) token used; False if it was used before. Used tokens
    are kept until they expire, when their signature alone no longer lets them in."""
    with write_transaction():
        query("DELETE FROM stream_token WHERE expires < ?", [now_ms])
        token_hash = secret_hash(token)
        if query("SELECT 1 FROM stream_token WHERE token_hash = ?", [token_hash]).fetchone() is not None:
            return False
        query("INSERT INTO stream_token (token_hash, expires, principal) VALUES (?, ?, ?)", [token_hash, expires, ""])
    return True
