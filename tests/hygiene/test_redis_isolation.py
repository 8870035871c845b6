"""Two test runs on one Redis database do not see, consume or clear each other's keys."""

import os
import subprocess
import sys
import uuid

import redis
from django.conf import settings
from django.core.cache import cache

from agents.tasks import ping
from tessera.celery import app
from tests.conftest import REDIS_KEY_PREFIX
from tests.hygiene.repo import ROOT


def test_cache_and_celery_use_this_runs_prefix():
    assert REDIS_KEY_PREFIX.startswith("test-")
    assert cache.key_prefix == REDIS_KEY_PREFIX
    assert app.conf.broker_transport_options["global_keyprefix"] == f"{REDIS_KEY_PREFIX}:"
    assert app.backend.task_keyprefix.decode().startswith(f"{REDIS_KEY_PREFIX}:")


def test_a_second_run_on_the_same_redis_leaves_this_ones_keys_alone():
    queue = f"isolation-{uuid.uuid4().hex[:8]}"
    cache.set("shared-name", "first run")
    ping.apply_async(args=["first run"], queue=queue)  # no worker listens: it stays queued
    client = redis.Redis.from_url(settings.REDIS_URL)
    assert client.llen(f"{REDIS_KEY_PREFIX}:{queue}") == 1
    environment = {key: value for key, value in os.environ.items() if not key.startswith("PYTEST_XDIST")}
    environment.update(FIRST_RUN_PREFIX=REDIS_KEY_PREFIX, SHARED_QUEUE=queue)
    second = subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:randomly", "tests/hygiene/redis_probe.py"],
                            cwd=ROOT, env=environment, capture_output=True, text=True, timeout=180)
    assert second.returncode == 0, second.stdout + second.stderr
    try:
        assert cache.get("shared-name") == "first run"  # its cache.clear() left ours
        assert client.llen(f"{REDIS_KEY_PREFIX}:{queue}") == 1  # its task went to its own queue
    finally:
        client.delete(f"{REDIS_KEY_PREFIX}:{queue}")
        cache.delete("shared-name")
