"""A time budget for every read: a query past it is stopped in the engine and the answer says
so; a read whose client has gone is stopped too (on SQLite), instead of running for nobody."""

import time

from flask import current_app, g, request
from peewee import DatabaseError
from werkzeug.exceptions import InternalServerError

import models.engine.database
from app.errors import ApiError, ErrorCode, error_response
from app.requests import hung_up
from models.stores.bound import records

# Reads whose answers stream: each of their queries is a short batch, bounded by its size.
STREAMED = {"activity_log.export_csv", "activity_log.stream"}


def init_app(app):
    app.before_request(_start)
    app.teardown_request(_end)
    # Every database error: on PostgreSQL a statement after a cancelled one in the same
    # transaction fails with an InternalError, not an OperationalError.
    app.register_error_handler(DatabaseError, _stopped)
    app.register_error_handler(models.engine.database.QueryStopped, _stopped)


def _start():
    seconds = current_app.config["ANALYTICS_QUERY_SECONDS"]
    if request.method != "GET" or seconds <= 0 or request.endpoint in STREAMED or request.endpoint is None:
        return  # (a pooled connection comes without a limit: see models.engine.database.connection and _end)
    peer = request.environ.get("gunicorn.socket")
    models.engine.database.limit_queries(seconds, (lambda: hung_up(peer)) if peer is not None else None)
    records().limit_reads(seconds)
    g.budget = time.monotonic()


def _end(exc):
    if "budget" not in g:
        return
    records().limit_reads(None)
    if not models.engine.database.db.is_closed():
        models.engine.database.limit_queries(None)


def _stopped(error: Exception):
    stopped = isinstance(error, models.engine.database.QueryStopped) or models.engine.database.is_stopped_query(error)
    if not stopped:
        current_app.logger.error("database error in %s %s", request.method, request.path, exc_info=error)
        return error_response(InternalServerError())
    seconds = current_app.config["ANALYTICS_QUERY_SECONDS"]
    return error_response(
        ApiError(
            ErrorCode.TOO_SLOW,
            f"The query ran past its time budget ({seconds:g} s, ANALYTICS_QUERY_SECONDS): "
            "narrow the window or the filters.",
        )
    )
