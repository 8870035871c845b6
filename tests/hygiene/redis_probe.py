"""Another test run, started by test_redis_isolation.py on the same Redis database (not collected
on its own: its name does not start with test_). It writes the names the first run wrote, clears
its cache and queues a task, as any suite may."""

import os

from django.core.cache import cache

from agents.tasks import ping
from tests.conftest import REDIS_KEY_PREFIX


def test_a_second_run_writes_the_same_names_in_its_own_key_space():
    assert REDIS_KEY_PREFIX and REDIS_KEY_PREFIX != os.environ["FIRST_RUN_PREFIX"]
    cache.set("shared-name", "second run")
    ping.apply_async(args=["second run"], queue=os.environ["SHARED_QUEUE"])
    assert cache.get("shared-name") == "second run"
    cache.clear()
    assert cache.get("shared-name") is None
