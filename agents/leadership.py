"""Which beat replica sends the schedule: the one leading the Lease (agents/leader.py).

With TESSERA_BACKEND=kubernetes and TESSERA_LEADER_ELECTION on, beat runs two or more replicas;
each steps an elector in a thread, and every schedule entry is due only while its replica leads
(LeaderScheduler), so followers send nothing: no doubled cycles, polls or budget alerts. run_cycle is
sent with an expiry of lease duration - renew deadline, so a cycle a partitioned leader sent just
before it stopped is dropped by the worker if it arrives after a successor could have started.
The advisory lock (agents/services.cycle_lock) fences whatever is already running.

The demo (simulated backend, SQLite, one process) never elects: leading() is always True there.
"""

from __future__ import annotations

import functools
import logging
import socket
import threading
import time
import uuid

from celery.beat import PersistentScheduler
from celery.schedules import schedstate
from django.conf import settings

from agents import metrics
from agents.leader import Elector, KubeLeaseStore

log = logging.getLogger(__name__)
LEASE_DURATION_S, RENEW_DEADLINE_S, RETRY_PERIOD_S = 15.0, 10.0, 2.0
CYCLE_EXPIRES_S = LEASE_DURATION_S - RENEW_DEADLINE_S


def enabled() -> bool:
    return settings.TESSERA_LEADER_ELECTION and settings.TESSERA_BACKEND == "kubernetes"


@functools.cache
def elector() -> Elector:
    """This process's candidate; its identity names the pod (a pod's host name) and this process."""
    from kubernetes import client, config

    if settings.TESSERA_KUBECONFIG:
        api_client = config.new_client_from_config(config_file=settings.TESSERA_KUBECONFIG)
    else:
        config.load_incluster_config()
        api_client = client.ApiClient()
    store = KubeLeaseStore(api_client, name=settings.TESSERA_LEASE_NAME, namespace=settings.TESSERA_LEASE_NAMESPACE)
    identity = f"{socket.gethostname()}-{uuid.uuid4().hex[:6]}"
    return Elector(store, identity, lease_duration_s=LEASE_DURATION_S, renew_deadline_s=RENEW_DEADLINE_S,
                   retry_period_s=RETRY_PERIOD_S)


def leading() -> bool:
    return not enabled() or elector().leading()


def step_and_record(candidate: Elector) -> None:
    """One elector step, then the lease as read into the shared cache for /metrics."""
    was, writes = candidate.leading(), candidate.writes
    now = candidate.step()
    if now != was:
        log.info("leadership %s", "acquired" if now else "lost", extra={"identity": candidate.identity})
    lease = candidate.last  # as read before this step's write
    if candidate.writes > writes:
        metrics.leader_recorded(candidate.identity, time.time())  # renewed just now
    elif lease is not None and lease.holder and lease.renew_time is not None:
        metrics.leader_recorded(lease.holder, lease.renew_time.timestamp())


_stopping = threading.Event()


def start(stop: threading.Event | None = None) -> threading.Thread | None:
    """Step the elector every retry period in a daemon thread (beat calls it once at start)."""
    if not enabled():
        return None
    candidate, stop = elector(), stop or _stopping

    def loop() -> None:
        while not stop.is_set():
            try:
                step_and_record(candidate)
            except Exception:  # never let the thread die: leadership would simply run out
                log.exception("leader election step failed")
            stop.wait(candidate.retry_period_s)

    thread = threading.Thread(target=loop, name="leader-election", daemon=True)
    thread.start()
    return thread


class LeaderScheduler(PersistentScheduler):
    """Celery beat's scheduler (CELERY_BEAT_SCHEDULER) that sends only while this replica leads."""

    def setup_schedule(self):
        super().setup_schedule()
        for entry in self.schedule.values():
            if entry.task == "agents.run_cycle" and enabled():
                entry.options["expires"] = CYCLE_EXPIRES_S
        start()

    def close(self):
        super().close()
        if enabled():  # a clean stop hands over at once, not a lease duration later
            _stopping.set()
            elector().release()

    def is_due(self, entry):
        if not leading():
            return schedstate(is_due=False, next=RETRY_PERIOD_S)
        return super().is_due(entry)
