"""The portal as production runs it: gunicorn, DEBUG off, the shipped deploy/configmap.yaml."""

import os
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from tests.loopback import free_port, wait_until_serving

ROOT = Path(__file__).resolve().parents[2]
HOST = "tessera.example.org"  # the configmap's ALLOWED_HOSTS
STRONG_SECRET = "k7Q2-production-smoke-test-secret-9fXw3LmZ0pRt8vBn4YcD6hJs1"


def configmap() -> dict[str, str]:
    return yaml.safe_load((ROOT / "deploy" / "configmap.yaml").read_text())["data"]


def production_env(database_url: str, **overrides: str) -> dict[str, str]:
    """The configmap plus the Secret's values, with this test run's PostgreSQL and Redis."""
    # Not DJANGO_ALLOW_ASYNC_UNSAFE either: the browser tests set it in this process (Playwright's
    # loop), and check --deploy rightly warns about it in a deployment.
    environment = {k: v for k, v in os.environ.items()
                   if not k.startswith(("SECURE_", "CSRF_", "ALLOWED_")) and k != "DJANGO_ALLOW_ASYNC_UNSAFE"}
    environment.update(configmap())
    environment.update(DATABASE_URL=database_url, SECRET_KEY=STRONG_SECRET, REDIS_URL=os.environ["REDIS_URL"],
                       LOG_LEVEL="WARNING", **overrides)
    return environment


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
        if not wait_until_serving(f"{url}/static/css/site.css", server, headers={"Host": HOST}):
            log.seek(0)
            pytest.fail(f"gunicorn did not serve: {log.read()[-2000:]}")
        yield url
    finally:
        server.terminate()
        server.wait(timeout=10)
        log.close()
