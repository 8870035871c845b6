"""The campaign's own processes: a private redis-server and Celery workers it can kill, pause and
restart, as a container runtime would."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Protocol

ROOT = Path(__file__).resolve().parents[2]
# Fast loops so a fault shows within seconds: a node is lost after 2 missed 1 s heartbeats.
WORKER_SETTINGS = {"TESSERA_POLL_INTERVAL_S": "1", "TESSERA_LOST_AFTER_MISSED": "2", "TESSERA_PREEMPT_GRACE_S": "4",
                   "TESSERA_CHECKPOINT_SAVE_S": "1", "TESSERA_ACTION_POLL_S": "1", "TESSERA_BACKEND": "simulated"}
# The periodic tasks, which beat and retries deliver in any order.
TASKS = ("agents.run_cycle", "agents.poll_agents", "agents.reconcile", "agents.checkpoint_due",
         "agents.resume_actions")
SKEWS_S = (0.0, 60.0, -30.0)  # worker 0 keeps true time, worker 1 runs a minute fast, worker 2 slow
# A worker whose Django clock is skewed; the cluster (the simulated backend) keeps its own clock.
WORKER_MAIN = """
import datetime, os, sys
from django.utils import timezone
_true_now, _skew = timezone.now, datetime.timedelta(seconds=float(os.environ["CAMPAIGN_SKEW_S"]))
timezone.now = lambda: _true_now() + _skew
from celery.__main__ import main
sys.argv[0] = "celery"
main()
"""


class WorkerHost(Protocol):
    """What a worker needs from its campaign."""

    queue: str
    workdir: Path
    state_path: Path
    database_url: str
    redis: PrivateRedis


class PrivateRedis:
    """A redis-server of the campaign's own, so stopping it hurts nobody else."""

    def __init__(self, port: int, workdir: Path) -> None:
        self.port, self.workdir, self.process = port, workdir, None
        self.url = f"redis://127.0.0.1:{port}/0"

    def start(self) -> None:
        self.process = subprocess.Popen(
            ["redis-server", "--port", str(self.port), "--bind", "127.0.0.1", "--save", "", "--appendonly", "no",
             "--dir", str(self.workdir)], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        import redis

        deadline = time.monotonic() + 10
        while time.monotonic() < deadline:
            try:
                redis.Redis.from_url(self.url, socket_connect_timeout=0.5).ping()
                return
            except redis.RedisError:
                time.sleep(0.05)
        raise RuntimeError(f"redis-server did not start on port {self.port}")

    def stop(self) -> None:
        if self.process is not None and self.process.poll() is None:
            self.process.kill()  # gone at once, its data with it: the cache and queued tasks are lost
            self.process.wait(timeout=10)


class Worker:
    """One Celery worker (prefork, one pool process) on the campaign's queue and a queue of its own."""

    def __init__(self, index: int, host: WorkerHost) -> None:
        self.index, self.host, self.process, self.generation = index, host, None, 0
        self.queue = f"{host.queue}-w{index}"
        self.skew_s = SKEWS_S[index % len(SKEWS_S)]

    def start(self) -> None:
        h = self.host
        env = dict(os.environ, CELERY_TASK_ALWAYS_EAGER="0", DATABASE_URL=h.database_url, REDIS_URL=h.redis.url,
                   REDIS_KEY_PREFIX=h.queue, TESSERA_SIMULATED_STATE=str(h.state_path), TESSERA_FAILPOINTS="",
                   CAMPAIGN_SKEW_S=str(self.skew_s), **WORKER_SETTINGS)
        self.generation += 1
        log = open(h.workdir / f"worker-{self.index}.log", "a")  # noqa: SIM115 (the child keeps it)
        self.process = subprocess.Popen(
            [sys.executable, "-c", WORKER_MAIN, "-A", "tessera", "worker", "--pool", "prefork", "--concurrency", "1",
             "--queues", f"{h.queue},{self.queue}", "--loglevel", "WARNING", "--without-gossip", "--without-mingle",
             "--without-heartbeat", "--hostname", f"{self.queue}-{self.generation}@%h"],
            cwd=ROOT, env=env, stdout=log, stderr=log, start_new_session=True)

    def alive(self) -> bool:
        return self.process is not None and self.process.poll() is None

    def signal(self, signum: int) -> None:
        """To the worker and its pool process alike, as a container's whole process tree."""
        if self.alive():
            os.killpg(self.process.pid, signum)

    def stop(self) -> None:
        if self.alive():
            self.signal(signal.SIGCONT)
            self.process.terminate()
            try:
                self.process.wait(timeout=15)
            except subprocess.TimeoutExpired:
                pass
        if self.process is not None:
            try:  # the pool process too, whatever became of its parent
                os.killpg(self.process.pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
            self.process.wait()
