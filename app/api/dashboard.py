"""The dashboard at / and /dashboard: a static page whose script is a client of the public /v2 API."""

import os

from flask import Blueprint, send_from_directory

from app.auth import public

# The page, script, styles and charting library live with the app (setup.cfg ships them).
ASSETS_DIR = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "static", "dashboard")

# Only the service's own files run or style the page, it talks to the service alone, and no
# other page may frame it. No inline script or style: a value injected into the page cannot run.
POLICY = "; ".join(
    (
        "default-src 'none'",
        "script-src 'self'",
        "style-src 'self'",
        "img-src 'self' data:",
        "connect-src 'self'",
        "base-uri 'none'",
        "form-action 'none'",
        "frame-ancestors 'none'",
    )
)

blp = Blueprint("dashboard", __name__)


@blp.get("/")
@blp.get("/dashboard")
@public
def page():
    response = send_from_directory(ASSETS_DIR, "index.html", max_age=0)
    response.headers["Content-Security-Policy"] = POLICY
    response.headers["Cache-Control"] = "no-cache"
    return response


@blp.get("/dashboard/assets/<path:name>")
@public
def asset(name):
    return send_from_directory(ASSETS_DIR, name, max_age=3600)


def init_app(app):
    app.register_blueprint(blp)
