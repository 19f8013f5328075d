"""The HTTP operations: one module per API group (a flask-smorest Blueprint each), the API
reference pages and the dashboard."""

from . import (
    access_log,
    activity_log,
    admin_actions,
    alerts,
    auth,
    clients,
    dashboard,
    data_availability,
    docs,
    ingest,
    metrics,
    outputs,
    privacy,
    statistics,
)


def init_app(app, api_class):
    docs.init_app(app)  # before the Api is made: it reads the reference's settings
    dashboard.init_app(app)
    app.register_blueprint(metrics.blp)
    api = api_class(app)
    modules = (
        auth,
        ingest,
        activity_log,
        data_availability,
        statistics,
        admin_actions,
        access_log,
        privacy,
        clients,
        outputs,
        alerts,
    )
    for module in modules:
        api.register_blueprint(module.blp)
    return api
