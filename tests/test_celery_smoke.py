"""A real Celery task travels through Redis to a worker this test starts."""

import os
import subprocess
import sys
import uuid
from pathlib import Path

import pytest

from agents.tasks import ping

ROOT = Path(__file__).resolve().parent.parent


@pytest.fixture
def worker():
    queue = f"smoke-{uuid.uuid4().hex[:8]}"
    process = subprocess.Popen(
        [sys.executable, "-m", "celery", "-A", "tessera", "worker", "--pool", "solo", "--queues", queue,
         "--loglevel", "WARNING", "--without-gossip", "--without-mingle", "--without-heartbeat"],
        cwd=ROOT, env=dict(os.environ, CELERY_TASK_ALWAYS_EAGER="0"), stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT)
    yield queue
    process.terminate()
    try:
        process.wait(timeout=20)
    except subprocess.TimeoutExpired:
        process.kill()


def test_a_task_round_trips_through_redis(worker, settings):
    assert settings.CELERY_BROKER_URL.startswith("redis://")
    result = ping.apply_async(args=["hello"], queue=worker)
    assert result.get(timeout=60) == "pong:hello"
