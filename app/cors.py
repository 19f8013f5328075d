"""Cross-origin access for browser pages on other origins: off unless ANALYTICS_CORS_ORIGINS lists them."""

from flask import current_app, request

SETTING = "ANALYTICS_CORS_ORIGINS"
ALLOWED_METHODS = "GET, POST, PUT, DELETE"
ALLOWED_HEADERS = "Authorization, Content-Type, Last-Event-ID"
PREFLIGHT_MAX_AGE = 600


def init_app(app):
    value = app.config.get(SETTING) or ""
    if isinstance(value, str):
        value = value.split(",")
    origins = frozenset(origin.strip().rstrip("/") for origin in value if origin.strip())
    app.config[SETTING] = origins
    if origins:
        app.before_request(_answer_preflight)
        app.after_request(_add_headers)


def _allowed_origin() -> str | None:
    origin = request.headers.get("Origin")
    allowed = current_app.config[SETTING]
    if origin and (origin in allowed or "*" in allowed):
        return origin
    return None


def _answer_preflight():
    """Answer a browser's preflight for an allowed origin, before auth (it carries no key)."""
    if request.method != "OPTIONS" or request.endpoint is None:
        return None
    if not request.headers.get("Access-Control-Request-Method") or _allowed_origin() is None:
        return None
    response = current_app.make_default_options_response()
    response.status_code = 204
    response.headers["Access-Control-Allow-Methods"] = ALLOWED_METHODS
    response.headers["Access-Control-Allow-Headers"] = ALLOWED_HEADERS
    response.headers["Access-Control-Max-Age"] = str(PREFLIGHT_MAX_AGE)
    return response


def _add_headers(response):
    # Every answer depends on the Origin once CORS is on, so caches must key on it.
    response.vary.add("Origin")
    origin = _allowed_origin()
    if origin is not None:
        response.headers["Access-Control-Allow-Origin"] = origin
        response.headers["Access-Control-Expose-Headers"] = "Content-Disposition"
    return response
