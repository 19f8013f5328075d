"""The WSGI entry point: `gunicorn wsgi:app`."""

import sys

from gunicorn.arbiter import Arbiter

from app import create_app
from models.migrations.run import NewerDatabase

try:
    app = create_app()
except NewerDatabase as refusal:
    # One line, no traceback, and gunicorn's code for a worker that cannot boot: the master stops
    # instead of starting workers again and again (the counting process exits the same way, and
    # `flask --app wsgi` with the line too).
    print(refusal, file=sys.stderr)
    sys.exit(Arbiter.WORKER_BOOT_ERROR)
