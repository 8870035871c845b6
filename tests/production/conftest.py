"""The portal as production runs it: gunicorn, DEBUG off, the shipped deploy/configmap.yaml."""

import os
import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest
import requests
import yaml

ROOT = Path(__file__).resolve().parents[2]
HOST = "tessera.example.org"  # the configmap's ALLOWED_HOSTS
STRONG_SECRET = "k7Q2-production-smoke-test-secret-9fXw3LmZ0pRt8vBn4YcD6hJs1"


def configmap() -> dict[str, str]:
    return yaml.safe_load((ROOT / "deploy" / "configmap.yaml").read_text())["data"]


def production_env(database_url: str, **overrides: str) -> dict[str, str]:
    """The configmap plus the Secret's values, with this test run's PostgreSQL and Redis."""
    environment = {k: v for k, v in os.environ.items() if not k.startswith(("SECURE_", "CSRF_", "ALLOWED_"))}
    environment.update(configmap())
    environment.update(DATABASE_URL=database_url, SECRET_KEY=STRONG_SECRET, REDIS_URL=os.environ["REDIS_URL"],
                       LOG_LEVEL="WARNING", **overrides)
    return environment


def free_port() -> int:
    """A free port in the range this suite's servers use (18500-18599)."""
    for port in range(18500, 18600):
        with socket.socket() as probe:
            if probe.connect_ex(("127.0.0.1", port)) != 0:
                return port
    raise RuntimeError("no free port in 18500-18599")


def database_url_of_the_tests() -> str:
    from django.db import connection

    db = connection.settings_dict
    return f"postgres://{db['USER']}@{db['HOST']}:{db['PORT'] or 5432}/{db['NAME']}"


@pytest.fixture(scope="module")
def gunicorn(django_db_setup, django_db_blocker, tmp_path_factory):
    """Base URL of a gunicorn serving the test database with the shipped production settings."""
    port = free_port()
    with django_db_blocker.unblock():
        environment = production_env(database_url_of_the_tests())
    log = (tmp_path_factory.mktemp("gunicorn") / "stderr").open("w+")
    server = subprocess.Popen([str(Path(sys.executable).parent / "gunicorn"), "tessera.wsgi:application",
                               "--bind", f"127.0.0.1:{port}", "--workers", "1"],
                              cwd=ROOT, env=environment, stdout=subprocess.DEVNULL, stderr=log)
    url = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + 90
        while time.monotonic() < deadline and server.poll() is None:
            try:
                requests.get(f"{url}/static/css/site.css", headers={"Host": HOST}, timeout=10)
                break
            except requests.RequestException:  # not listening yet, or the worker still booting
                time.sleep(0.2)
        if server.poll() is not None:
            log.seek(0)
            pytest.fail(f"gunicorn exited: {log.read()[-2000:]}")
        yield url
    finally:
        server.terminate()
        server.wait(timeout=10)
        log.close()
