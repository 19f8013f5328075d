"""The browsable API reference at /v2/docs: Swagger UI served from the flask-swagger-ui package."""

import os

import flask_swagger_ui
from flask import Blueprint, send_from_directory

from .auth import public

# Swagger UI's own dist files (JS, CSS, icons), as the package ships them.
ASSETS_DIR = os.path.join(os.path.dirname(flask_swagger_ui.__file__), "dist")

# flask-smorest renders the page itself; these point it at our copy of the assets.
SETTINGS = {
    "OPENAPI_SWAGGER_UI_PATH": "docs",
    # Relative to the page (/v2/docs), so the page still finds its assets when the service
    # is mounted under a path prefix.
    "OPENAPI_SWAGGER_UI_URL": "docs/assets/",
    # No validator badge: Swagger UI would fetch it from swagger.io.
    "OPENAPI_SWAGGER_UI_CONFIG": {"validatorUrl": None},
}

blp = Blueprint("reference", __name__)


@blp.get("/<path:name>")
@public
def asset(name):
    return send_from_directory(ASSETS_DIR, name, max_age=24 * 3600)


def init_app(app):
    """Call before the Api is made: it reads the settings when it registers its pages."""
    for name, value in SETTINGS.items():
        app.config.setdefault(name, value)
    prefix = app.config["OPENAPI_URL_PREFIX"].rstrip("/")
    app.register_blueprint(blp, url_prefix=f"{prefix}/docs/assets")
