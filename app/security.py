"""Security headers on every response."""

HEADERS = {
    "X-Content-Type-Options": "nosniff",
    "X-Frame-Options": "DENY",
    "Referrer-Policy": "no-referrer",
    "Cross-Origin-Resource-Policy": "same-site",
}
# API answers hold query data: no shared cache may keep them, and a browser must never run
# them as a page. (The HTML reference page sets its own rules.)
API_HEADERS = {
    "Cache-Control": "no-store",
    "Content-Security-Policy": "default-src 'none'; frame-ancestors 'none'",
}


def init_app(app):
    app.after_request(_add_headers)


def _add_headers(response):
    for name, value in HEADERS.items():
        response.headers.setdefault(name, value)
    if response.mimetype != "text/html":
        for name, value in API_HEADERS.items():
            response.headers.setdefault(name, value)
    return response
