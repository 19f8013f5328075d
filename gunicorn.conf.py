"""gunicorn reads this file by itself when started from the project root."""

import os

bind = os.environ.get("ANALYTICS_BIND", "127.0.0.1:8000")
workers = int(os.environ.get("ANALYTICS_WORKERS", "2"))
# Threaded workers: a slow request (a CSV export, a realtime stream) holds one thread, not a
# whole process, so the other requests keep being served.
worker_class = "gthread"
threads = int(os.environ.get("ANALYTICS_THREADS", "32"))
# Long exports and streams are legitimate; a stop must not wait long for them.
timeout = 120
graceful_timeout = 5
accesslog = "-"
# The path without its query string: a realtime authToken must not end up in a log file.
access_log_format = '%(h)s "%(m)s %(U)s %(H)s" %(s)s %(B)s %(M)sms pid=%(p)s'


def post_worker_init(worker):
    """Every worker runs the retention job's loop; a lease in the database lets one run at a time."""
    from app.retention import start_background

    start_background(worker.wsgi)
