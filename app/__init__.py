"""The application factory."""

from flask import Flask
from werkzeug.middleware.proxy_fix import ProxyFix

import models.clickhouse.target
import models.engine.database
import models.migrations.run
import models.runtime.config
import models.stores.bound
import schemas.geoip
from models.runtime.clock import pin_request_now

from . import api, auth, commands, cors, guards, metrics, security
from .config import load_config
from .extensions import Api, JSONProvider
from .guards import budget, request_size, shares
from .requests import refuse_nul_in_path

INSTANCE_PATH = models.runtime.config.INSTANCE_PATH


class App(Flask):
    json_provider_class = JSONProvider

    def app_context(self):
        # The store is one module-level binding. With several apps in one process (tests),
        # each request, CLI command and background job binds its own app's database and record store first.
        if "database" in self.extensions:
            models.engine.database.bind(self.extensions["database"])
        if "records" in self.extensions:
            models.stores.bound.bind(self.extensions["records"])
        return super().app_context()


def create_app(test_config=None) -> Flask:
    instance_path = (test_config or {}).get("INSTANCE_PATH", INSTANCE_PATH)
    app = App(__name__, instance_path=instance_path, instance_relative_config=True)
    load_config(app, test_config)
    if app.config["ANALYTICS_PROXY_COUNT"]:
        # Behind a reverse proxy: the client's address (for the admin-action log and the
        # failed-authentication limit) comes from the proxies' X-Forwarded-For, and the path
        # prefix the service is mounted under (deploy/nginx-site.conf) from X-Forwarded-Prefix.
        count = app.config["ANALYTICS_PROXY_COUNT"]
        app.wsgi_app = ProxyFix(app.wsgi_app, x_for=count, x_proto=count, x_host=count, x_prefix=count)

    # A record store the settings name wrongly is refused before anything is opened.
    models.clickhouse.target.from_settings(app.config)
    app.extensions["database"] = models.engine.database.open_database(
        app.config["ANALYTICS_DATABASE"], app.config["ANALYTICS_WAL_LIMIT_MB"] << 20
    )
    with models.engine.database.connection():
        # The steps this start ran (`flask --app wsgi migrate` shows them).
        app.extensions["schema_steps"] = models.migrations.run.create_schema()
    schemas.geoip.configure(app.config["ANALYTICS_GEOIP_DB"] or None, app.config["ANALYTICS_ASN_DB"] or None)
    app.extensions["records"] = models.stores.bound.for_settings(app.config)
    models.stores.bound.bind(app.extensions["records"])
    app.extensions["records"].configure(app.config)

    app.extensions["guards"] = guards.State()
    app.before_request(request_size.bound_url)  # first: like an over-long body, refused before it costs anything
    app.before_request(_connect)
    metrics.init_app(app)  # before the key check, so that refused requests are timed too
    auth.init_app(app)
    app.before_request(refuse_nul_in_path)
    app.before_request(request_size.bound_chunked_body)
    shares.init_app(app)  # after the key check: a request without a valid key takes no share
    app.teardown_request(_close)
    # After _close: teardowns run in reverse order, so the budget is lifted before the
    # connection goes back to the pool.
    budget.init_app(app)
    cors.init_app(app)
    security.init_app(app)
    api.init_app(app, Api)
    commands.register(app)
    return app


def _connect():
    pin_request_now()
    models.engine.database.db.connect(reuse_if_open=True)


def _close(exc):
    if not models.engine.database.db.is_closed():
        models.engine.database.db.close()
