"""Configuration of the web app: the installation's settings (models.runtime.config) in Flask's config."""

import models.runtime.config
import schemas.record_times

API_SETTINGS = {
    "API_TITLE": "DNS Analytics",
    "API_VERSION": "v2",
    "OPENAPI_VERSION": "3.0.3",
    "OPENAPI_URL_PREFIX": "/v2",
    "OPENAPI_JSON_PATH": "openapi.json",
    "JSON_SORT_KEYS": False,
}


def load_config(app, test_config=None):
    app.config.update(API_SETTINGS)
    app.config.update(models.runtime.config.read(app.instance_path, test_config))
    app.config["MAX_CONTENT_LENGTH"] = app.config["ANALYTICS_MAX_BODY_MB"] * 1024 * 1024
    schemas.record_times.configure(app.config)
