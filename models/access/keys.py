"""API keys: created with a random secret, stored as its hash, looked up, revoked."""

import hashlib
import json
import secrets

from models.engine.database import query, write_transaction

SECRET_PREFIX = "dnsa_"


def secret_hash(secret: str) -> str:
    return hashlib.sha256(secret.encode("utf-8", "surrogatepass")).hexdigest()


def create_key(name: str, scopes: list[str], endpoints: list[str] | None, now_ms: int) -> tuple[dict, str]:
    """A new key (as list_keys shows it) and its secret, which exists nowhere else afterwards."""
    secret = SECRET_PREFIX + secrets.token_urlsafe(32)
    (key_id,) = query(
        "INSERT INTO api_key (name, secret_hash, scopes, endpoints, created) VALUES (?, ?, ?, ?, ?) RETURNING id",
        [name, secret_hash(secret), json.dumps(sorted(scopes)), _json_or_null(endpoints), now_ms],
    ).fetchone()
    return find_key_by_id(key_id), secret


def find_key(secret: str) -> dict | None:
    """The live (not revoked) key with this secret."""
    row = query(
        f"SELECT {_COLUMNS} FROM api_key WHERE secret_hash = ? AND revoked IS NULL", [secret_hash(secret)]
    ).fetchone()
    return _key(row) if row else None


def find_key_by_id(key_id: int) -> dict | None:
    row = query(f"SELECT {_COLUMNS} FROM api_key WHERE id = ?", [key_id]).fetchone()
    return _key(row) if row else None


def key_is_live(key_id: int | None) -> bool:
    """Whether the key with this id still works (None: the operator key, from the config)."""
    if key_id is None:
        return True
    return query("SELECT 1 FROM api_key WHERE id = ? AND revoked IS NULL", [key_id]).fetchone() is not None


def list_keys() -> list[dict]:
    return [_key(row) for row in query(f"SELECT {_COLUMNS} FROM api_key ORDER BY id")]


def revoke_key(name_or_id: str, now_ms: int) -> dict | None:
    """Revoke a live key by name or id; the key as it was, or None if there is no such live key."""
    with write_transaction():
        row = query(
            # A key named "8" is the key "8", whatever key has the id 8.
            f"SELECT {_COLUMNS} FROM api_key WHERE (name = ? OR CAST(id AS TEXT) = ?) AND revoked IS NULL"
            " ORDER BY CASE WHEN name = ? THEN 0 ELSE 1 END LIMIT 1",
            [name_or_id, name_or_id, name_or_id],
        ).fetchone()
        if row is None:
            return None
        query("UPDATE api_key SET revoked = ? WHERE id = ?", [now_ms, row[0]])
    return _key(row)


_COLUMNS = "id, name, scopes, endpoints, created, revoked"


def _key(row) -> dict:
    ident, name, scopes, endpoints, created, revoked = row
    return {
        "id": ident,
        "name": name,
        "scopes": json.loads(scopes),
        "endpoints": None if endpoints is None else json.loads(endpoints),
        "created": created,
        "revoked": revoked,
    }


def _json_or_null(values):
    return None if values is None else json.dumps(sorted(set(values)))
