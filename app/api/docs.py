"""The browsable API reference at /v2/docs: Swagger UI served from the flask-swagger-ui package."""

import os

import flask_swagger_ui
from flask import Blueprint, redirect, send_from_directory

from app.auth import public

# Swagger UI's own dist files (JS, CSS, icons), as the package ships them.
ASSETS_DIR = os.path.join(os.path.dirname(flask_swagger_ui.__file__), "dist")

# flask-smorest renders the page itself; these point it at our copy of the assets.
SETTINGS = {
    "OPENAPI_SWAGGER_UI_PATH": "docs",
    # Relative to the page (/v2/docs), so the page still finds its assets when the service
    # is mounted under a path prefix.
    "OPENAPI_SWAGGER_UI_URL": "docs/assets/",
    # No validator badge: Swagger UI would fetch it from swagger.io. The document's address
    # relative to the page too (flask-smorest writes an absolute path), for the same reason.
    "OPENAPI_SWAGGER_UI_CONFIG": {"validatorUrl": None, "url": "openapi.json"},
}

blp = Blueprint("reference", __name__)


@blp.get("/<path:name>")
@public
def asset(name):
    return send_from_directory(ASSETS_DIR, name, max_age=24 * 3600)


@public
def page_with_slash():
    # Relative, so that it also leads to the page when the service sits under a path prefix.
    return redirect("../docs", 308)


def init_app(app):
    """Call before the Api is made: it reads the settings when it registers its pages."""
    for name, value in SETTINGS.items():
        app.config.setdefault(name, value)
    prefix = app.config["OPENAPI_URL_PREFIX"].rstrip("/")
    app.register_blueprint(blp, url_prefix=f"{prefix}/docs/assets")
    app.add_url_rule(f"{prefix}/docs/", "reference_slash", page_with_slash)
