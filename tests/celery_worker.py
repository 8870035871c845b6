"""One real Celery worker on the test database, for tests whose tasks travel through Redis."""

import os
import subprocess
import sys
from contextlib import contextmanager

from django.conf import settings

from agents.tasks import ping
from tessera.celery import app


@contextmanager
def celery_worker(patience_s: float, **env: str):
    """A worker on the default queue (this test process's own Redis key prefix), up once it answers
    a ping; `env` is added to its environment."""
    app.control.purge()  # tasks earlier tests of this process enqueued with nobody to run them
    database = settings.DATABASES["default"]
    url = f"postgres://{database['USER']}@{database['HOST']}:{database['PORT'] or 5432}/{database['NAME']}"
    process = subprocess.Popen(
        [sys.executable, "-m", "celery", "-A", "tessera", "worker", "--pool", "solo", "--loglevel", "WARNING",
         "--without-gossip", "--without-mingle", "--without-heartbeat"],
        cwd=settings.BASE_DIR, env=dict(os.environ, CELERY_TASK_ALWAYS_EAGER="0", DATABASE_URL=url, **env),
        stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        assert ping.delay("up").get(timeout=patience_s) == "pong:up"
        yield process
    finally:
        process.terminate()
        try:
            process.wait(timeout=20)
        except subprocess.TimeoutExpired:
            process.kill()
