"""gunicorn reads this file by itself when started from the project root."""

import importlib.util
import logging
import os
import shutil
import tempfile

import gunicorn.http.message

bind = os.environ.get("ANALYTICS_BIND", "127.0.0.1:8000")
workers = int(os.environ.get("ANALYTICS_WORKERS", "2"))


def _worker_class():
    """app/worker.py's HoldingWorker, loaded from its file (see its docstring for why)."""
    path = os.path.join(os.path.dirname(os.path.abspath(__file__)), "app", "worker.py")
    spec = importlib.util.spec_from_file_location("dns_analytics_worker", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module.HoldingWorker


# Threaded workers (gthread's): a slow request (a CSV export, a realtime stream) holds one
# thread, not a whole process, so the other requests keep being served; refused
# authentications are answered after a pause that holds no thread.
worker_class = _worker_class()
threads = int(os.environ.get("ANALYTICS_THREADS", "32"))
# Long exports and streams are legitimate; a stop must not wait long for them.
timeout = 120
graceful_timeout = 5
# Long URLs: 1,000 values of a filter (the documented limit) need far more than gunicorn's
# 4094-byte request line. The service answers a URL past MAX_URL_BYTES (512 KiB) with its own
# JSON 414 (app.requests.bound_url); gunicorn reads request lines up to 1 MiB, so that a
# longer URL reaches the service to be refused, while the line a client can make a worker
# hold in memory stays bounded. gunicorn caps the setting at 8190 unless it is 0 (no bound at
# all), so the cap is raised instead (a module constant, read at each request).
MAX_REQUEST_LINE = 1024 * 1024
gunicorn.http.message.MAX_REQUEST_LINE = MAX_REQUEST_LINE
limit_request_line = MAX_REQUEST_LINE
# gunicorn 25.1+ opens a control socket (for gunicornc) at one fixed path per user, so two
# services on a host (or a test run's many servers) would take it from each other. Off unless
# ANALYTICS_CONTROL_SOCKET names a path of this instance's own.
if os.environ.get("ANALYTICS_CONTROL_SOCKET"):
    control_socket = os.environ["ANALYTICS_CONTROL_SOCKET"]
else:
    control_socket_disable = True
accesslog = "-"
# The path without its query string: a realtime authToken must not end up in a log file.
access_log_format = '%(h)s "%(m)s %(U)s %(H)s" %(s)s %(B)s %(M)sms pid=%(p)s'


# Set when on_starting made the metrics folder itself, so that on_exit removes it again.
_metrics_folder_made = None


def on_starting(server):
    """Give the workers one folder for their metrics (prometheus-client's multiprocess mode),
    emptied at each start so that counts begin at zero with the service."""
    global _metrics_folder_made
    folder = os.environ.get("PROMETHEUS_MULTIPROC_DIR")
    if not folder:
        folder = _metrics_folder_made = tempfile.mkdtemp(prefix="dns-analytics-metrics-")
        os.environ["PROMETHEUS_MULTIPROC_DIR"] = folder
    os.makedirs(folder, exist_ok=True)
    for name in os.listdir(folder):
        if name.endswith(".db"):
            os.remove(os.path.join(folder, name))


def post_worker_init(worker):
    """Every worker runs the retention job's loop; a lease in the database lets one run at a time.
    The service's own log lines (retention runs, refused keys) go where gunicorn's go."""
    from app.jobs.retention import start_background

    service_log = logging.getLogger("app")
    service_log.handlers = list(worker.log.error_log.handlers)
    service_log.setLevel(logging.INFO)
    service_log.propagate = False
    start_background(worker.wsgi)


def child_exit(server, worker):
    """A dead worker's gauges (open streams) stop counting; its counters stay in the sums."""
    from prometheus_client import multiprocess

    multiprocess.mark_process_dead(worker.pid)


def on_exit(server):
    if _metrics_folder_made:
        shutil.rmtree(_metrics_folder_made, ignore_errors=True)
