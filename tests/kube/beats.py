"""Real `celery beat` processes with leader election on, for the failover tests: start, count
what each sent (its log), SIGKILL; and who holds the Lease."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time

from django.conf import settings
from kubernetes import client

from tests.kube.control_plane import ROOT


def beat_env(control_plane, folder, lease: str, **extra: str) -> dict:
    """A beat replica's environment: the real backend, beat's ServiceAccount, this run's Redis keys."""
    kubeconfig = control_plane.write_kubeconfig(folder / "beat.kubeconfig", control_plane.beat_token)
    return dict(os.environ, TESSERA_BACKEND="kubernetes", TESSERA_LEADER_ELECTION="1", TESSERA_LEASE_NAME=lease,
                TESSERA_KUBECONFIG=str(kubeconfig), REDIS_KEY_PREFIX=settings.REDIS_KEY_PREFIX, LOG_FORMAT="text",
                **extra)


class Beat:
    def __init__(self, name: str, env: dict, folder):
        self.name, self.log = name, folder / f"{name}.log"
        with open(self.log, "wb") as out:
            self.process = subprocess.Popen(
                [sys.executable, "-m", "celery", "-A", "tessera", "beat", "--loglevel", "INFO",
                 "--schedule", str(folder / f"{name}-schedule")],
                cwd=ROOT, env=env, stdout=out, stderr=subprocess.STDOUT)

    def sent(self, entry: str = "run-cycle") -> int:
        """How many times this beat sent the schedule entry (its log says each)."""
        return self.log.read_text(errors="replace").count(f"Sending due task {entry}")

    def kill(self) -> None:
        if self.process.poll() is None:
            self.process.send_signal(signal.SIGKILL)
            self.process.wait()


def holder(admin, lease: str) -> str:
    try:
        return client.CoordinationV1Api(admin).read_namespaced_lease(lease, "tessera-system").spec.holder_identity
    except client.exceptions.ApiException:
        return ""


def seconds_until(condition, timeout: float, what: str = "condition") -> float:
    """Wait for condition(); returns how long it took."""
    started = time.monotonic()
    while not condition():
        assert time.monotonic() - started < timeout, f"timed out waiting for {what}"
        time.sleep(0.1)
    return time.monotonic() - started
