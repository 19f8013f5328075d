"""gunicorn reads this file by itself when started from the project root."""

import logging
import os
import secrets
import shutil
import signal
import tempfile

bind = os.environ.get("ANALYTICS_BIND", "127.0.0.1:8000")
workers = int(os.environ.get("ANALYTICS_WORKERS", "2"))


# Threaded workers: a slow request (a CSV export, a realtime stream) holds one thread, not a
# whole process, so the other requests keep being served. gunicorn as shipped, configured: what
# it cannot do against hostile clients (slow senders, floods, guessing loops) is the reverse
# proxy's job (deploy/nginx-site.conf; BENCHMARKS.md, "The worker question"). gunicorn alone,
# without nginx in front, is for development.
worker_class = "gthread"
threads = int(os.environ.get("ANALYTICS_THREADS", "32"))
# Long exports and streams are legitimate; a stop must not wait long for them.
timeout = 120
graceful_timeout = 5
# The request's head is bounded here too, not only by the proxy in front: reached directly
# (scripts/serve), one connection must not make a worker hold or burn without end. 1,000 values
# of a filter (the documented limit) need URLs far longer than the 8190 bytes gunicorn's Python
# parser can bound a line at; its only longer setting, 0, bounds nothing, and a line that never
# ends then grows the worker and costs it more at every read. gunicorn's C parser (gunicorn_h1c,
# a dependency) bounds the head even at 0: the line, then the whole head with the header fields
# below. "fast" makes a missing C parser an error at start, never a silent fallback to no bound.
# The service answers a URL past MAX_URL_BYTES with its own JSON 414
# (app.guards.request_size.bound_url). Figures: docs/operating.md, "Long URLs".
try:
    import gunicorn_h1c  # noqa: F401
except ImportError:
    raise SystemExit("gunicorn_h1c (gunicorn's C parser, which bounds a request's head) is missing") from None
http_parser = "fast"
limit_request_line = 0
limit_request_fields = 100
limit_request_field_size = 8190
# gunicorn 25.1+ opens a control socket (for gunicornc) at one fixed path per user, so two
# services on a host (or a test run's many servers) would take it from each other. Off unless
# ANALYTICS_CONTROL_SOCKET names a path of this instance's own.
if os.environ.get("ANALYTICS_CONTROL_SOCKET"):
    control_socket = os.environ["ANALYTICS_CONTROL_SOCKET"]
else:
    control_socket_disable = True
# The rollups are counted behind the requests in a process of their own (app/jobs/counting.py):
# gunicorn's "dirty" pool, which it starts, restarts when it dies, reloads and stops with the
# service. In the web workers the counting shared an interpreter lock with the requests.
dirty_workers = 1
# ":1", one process loads it: without a count gunicorn imports the class in the master to read
# its `workers`, and with it the whole application, which every worker forked after a reload
# (HUP) would then run as it was at the start instead of the code on disk.
dirty_apps = ["app.jobs.counting:CountingProcess:1"]
# gunicorn names the dirty pool's pid file in the temporary folder by proc_name, and at start
# stops the process a file of that name holds, taking it for the orphan of a crash: two services
# on a host (or a test run's many servers) with one name would stop each other's, and a file a
# killed master left would name a pid used again by any process of the user. A name of its own
# for each start finds no such file; the pool stops by itself once its master is gone, and the
# counting process once its pool is (app/jobs/counting.py).
proc_name = f"dns-analytics-{os.getpid()}-{secrets.token_hex(4)}"
accesslog = "-"
# The path without its query string: a realtime authToken must not end up in a log file.
access_log_format = '%(h)s "%(m)s %(U)s %(H)s" %(s)s %(B)s %(M)sms pid=%(p)s'


# Set when on_starting made the metrics folder itself, so that on_exit removes it again.
_metrics_folder_made = None


def on_starting(server):
    """Refuse a database a newer release has used; give the workers one folder for their metrics
    (prometheus-client's multiprocess mode), emptied at each start so that counts begin at zero
    with the service."""
    global _metrics_folder_made
    refusal = _newer_database(server.cfg.workers)
    if refusal:
        server.halt(reason=refusal, exit_status=server.WORKER_BOOT_ERROR)
    folder = os.environ.get("PROMETHEUS_MULTIPROC_DIR")
    if not folder:
        folder = _metrics_folder_made = tempfile.mkdtemp(prefix="dns-analytics-metrics-")
        os.environ["PROMETHEUS_MULTIPROC_DIR"] = folder
    os.makedirs(folder, exist_ok=True)
    for name in os.listdir(folder):
        if name.endswith(".db"):
            os.remove(os.path.join(folder, name))


def _newer_database(workers: int) -> str | None:
    """The refusal of a database a newer release has used (or of a record store this release
    cannot serve from, or chDB's folder given to more than one worker), before any worker
    starts: the workers refuse it too (wsgi.py), but two of them stopping at once make
    gunicorn's halt fail with a traceback of its own. Looked at in a child process, so that the
    master imports nothing of the application (see dirty_apps)."""
    read, write = os.pipe()
    pid = os.fork()
    if pid == 0:
        try:
            os.write(write, _refusal_of_the_database(workers).encode())
        finally:
            os._exit(0)
    os.close(write)
    with os.fdopen(read, "rb") as said:
        refusal = said.read().decode()
    os.waitpid(pid, 0)
    return refusal or None


def _refusal_of_the_database(workers: int) -> str:
    import models.clickhouse.target
    import models.engine.database
    import models.migrations.run
    import models.runtime.config

    try:
        settings = models.runtime.config.read()
        target = models.clickhouse.target.from_settings(settings)
        if target is not None and target.in_process and workers > 1:
            return (
                f"ANALYTICS_RECORD_STORE: chdb://{target.folder} is opened by one process, and gunicorn was "
                f"given {workers} workers: run it with -w 1 (feeds send with --url), or use a ClickHouse server "
                "(clickhouse://...)"
            )
        models.engine.database.open_database(settings["ANALYTICS_DATABASE"], settings["ANALYTICS_WAL_LIMIT_MB"] << 20)
        with models.engine.database.connection():
            models.migrations.run.pending()
    except (models.migrations.run.NewerDatabase, models.clickhouse.target.BadTarget) as refusal:
        return str(refusal)
    except Exception:
        pass  # a bad setting, a database out of reach: the workers report it, as before
    return ""


def post_worker_init(worker):
    """Every worker runs the loops of the retention and privacy jobs and the outputs' delivery
    watcher; leases in the database let one run each job, and one deliver each output, at a
    time. The service's own log lines (retention runs, privacy rewrites, refused keys) go where
    gunicorn's go. Batches of records are parsed with the garbage collector quieted (see
    models.runtime.process)."""
    from app.jobs import counting
    from app.jobs.retention import start_background
    from app.outputs import delivery

    _service_process(worker)
    start_background(worker.wsgi)
    delivery.start_background(worker.wsgi)
    counting.count_behind(worker.wsgi)  # how many records may wait for the counting process


def dirty_worker_init(worker):
    """The counting process (see dirty_apps) logs where gunicorn does, like the workers, ends
    with its arbiter (which gunicorn starts again, with a new one), and stops when told to even
    while it was starting (see on_reload)."""
    from app.jobs import counting

    _service_process(worker)
    counting.stop_with(worker)


def _service_process(worker):
    from models.runtime.process import quiet_garbage_collector

    quiet_garbage_collector()
    service_log = logging.getLogger("app")
    service_log.handlers = list(worker.log.error_log.handlers)
    service_log.setLevel(logging.INFO)
    service_log.propagate = False


def on_reload(server):
    """A reload (HUP) starts the counting process again too, on the code and configuration on
    disk like the new workers: gunicorn's dirty arbiter, told of the reload, keeps its pool of
    one as it is. Stopped, the process is started again at once by its arbiter."""
    for pid in _children(server.dirty_arbiter_pid):
        try:
            os.kill(pid, signal.SIGTERM)
        except ProcessLookupError:
            pass


def _children(pid: int) -> list[int]:
    if not pid:
        return []
    try:
        with open(f"/proc/{pid}/task/{pid}/children") as file:
            return [int(child) for child in file.read().split()]
    except OSError:  # not Linux, or a kernel without the file: the counting process is kept
        return []


def pre_request(worker, req):
    """An error answer to a request with a body closes its connection (app/connection.py)."""
    from app import connection

    connection.serving(req)


def worker_exit(server, worker):
    """A worker stopping (a restart, a reload) hands its outputs over at once (one that failed
    to boot has no application, and nothing to hand over)."""
    from app.outputs import delivery

    if getattr(worker, "wsgi", None) is not None:
        delivery.stop(worker.wsgi)


def child_exit(server, worker):
    """A dead worker's gauges (open streams) stop counting; its counters stay in the sums."""
    from prometheus_client import multiprocess

    multiprocess.mark_process_dead(worker.pid)


def on_exit(server):
    if _metrics_folder_made:
        shutil.rmtree(_metrics_folder_made, ignore_errors=True)
