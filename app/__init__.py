"""The application factory."""

import os

from flask import Flask
from werkzeug.middleware.proxy_fix import ProxyFix

import models

from . import auth, budget, cli, cors, dashboard, docs, metrics, security, shares
from .config import load_config
from .extensions import Api, JSONProvider
from .requests import bound_chunked_body, bound_url, refuse_nul_in_path

INSTANCE_PATH = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "instance")


class App(Flask):
    json_provider_class = JSONProvider

    def app_context(self):
        # The store is one module-level binding. With several apps in one process (tests),
        # each request, CLI command and background job binds its own app's database first.
        if "database" in self.extensions:
            models.bind(self.extensions["database"])
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

    app.extensions["database"] = models.open_database(
        app.config["ANALYTICS_DATABASE"], app.config["ANALYTICS_WAL_LIMIT_MB"] << 20
    )
    with models.connection():
        models.create_schema()

    app.before_request(bound_url)  # first: like an over-long body, refused before it costs anything
    app.before_request(_connect)
    metrics.init_app(app)  # before the key check, so that refused requests are timed too
    auth.init_app(app)
    app.before_request(refuse_nul_in_path)
    app.before_request(bound_chunked_body)
    shares.init_app(app)  # after the key check: a request without a valid key takes no share
    app.teardown_request(_close)
    # After _close: teardowns run in reverse order, so the budget is lifted before the
    # connection goes back to the pool.
    budget.init_app(app)
    cors.init_app(app)
    security.init_app(app)
    docs.init_app(app)
    dashboard.init_app(app)

    api = Api(app)
    from . import activity_log, admin_actions, clients, data_availability, ingest, statistics
    from .auth import token

    api.register_blueprint(token.blp)
    api.register_blueprint(ingest.blp)
    api.register_blueprint(activity_log.blp)
    api.register_blueprint(data_availability.blp)
    api.register_blueprint(statistics.blp)
    api.register_blueprint(admin_actions.blp)
    api.register_blueprint(clients.blp)
    cli.register(app)
    return app


def _connect():
    models.db.connect(reuse_if_open=True)


def _close(exc):
    if not models.db.is_closed():
        models.db.close()
