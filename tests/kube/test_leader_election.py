"""Leader election (agents/leader.py) against the real API server v1.20, as beat's ServiceAccount
with deploy/rbac.yaml's rights: a killed leader is replaced within about a lease duration, a
leader cut off from the API server (but not from PostgreSQL) stops cycling before its successor
starts, and no two cycles ever run at once under the advisory lock (agents/services.cycle_lock).

Timings are short (lease 4 s, renew deadline 2.5 s, retry 0.5 s) so the tests take seconds; the
production defaults (tessera/settings.py) keep the same order: retry < renew deadline < lease."""

from __future__ import annotations

import threading
import time
import uuid

import pytest
from django.db import connection
from kubernetes import client

from agents.leader import Elector, KubeLeaseStore
from agents.services import cycle_lock
from tests.kube.control_plane import BACKEND_GROUPS, BEAT_USER

NAMESPACE = "tessera-system"
DURATION, DEADLINE, RETRY = 4.0, 2.5, 0.5
CYCLE_S = 0.1


class Candidate:
    """One replica: an elector stepping every RETRY, and (cycles=True) a loop that runs a 'cycle'
    whenever it leads, gated twice: leadership, then the advisory lock, then leadership again."""

    def __init__(self, plane, lease: str, name: str, log: list, cycles: bool = False):
        self.api_client = plane.beat_client()
        store = KubeLeaseStore(self.api_client, name=lease, namespace=NAMESPACE, timeout_s=1.0)
        self.elector = Elector(store, name, lease_duration_s=DURATION, renew_deadline_s=DEADLINE,
                               retry_period_s=RETRY)
        self.name, self.log, self.stopped = name, log, threading.Event()
        self.threads = [threading.Thread(target=self.elector.run, args=(self.stopped.is_set,), daemon=True)]
        if cycles:
            self.threads.append(threading.Thread(target=self._cycles, daemon=True))

    def start(self) -> Candidate:
        for thread in self.threads:
            thread.start()
        return self

    def kill(self) -> None:
        self.stopped.set()
        for thread in self.threads:
            thread.join(timeout=10)

    def partition(self) -> None:
        """Its API calls go nowhere (a closed port), its database connection is untouched."""
        self.api_client.configuration.host = "https://127.0.0.1:9"

    def _cycles(self) -> None:
        try:
            while not self.stopped.is_set():
                if self.elector.leading():
                    with cycle_lock() as held:
                        if held and self.elector.leading():
                            self.log.append((self.name, "start", time.monotonic()))
                            time.sleep(CYCLE_S)
                            self.log.append((self.name, "end", time.monotonic()))
                time.sleep(0.05)
        finally:
            connection.close()


def wait_for(condition, timeout: float) -> float:
    started = time.monotonic()
    while not condition():
        assert time.monotonic() - started < timeout, "timed out"
        time.sleep(0.02)
    return time.monotonic() - started


def lease_name() -> str:
    return f"tessera-scheduler-{uuid.uuid4().hex[:6]}"


def beat_may(api_client, verb: str, resource: str, namespace: str, group: str = "") -> bool:
    review = client.AuthorizationV1Api(api_client).create_subject_access_review({
        "apiVersion": "authorization.k8s.io/v1", "kind": "SubjectAccessReview",
        "spec": {"user": BEAT_USER, "groups": BACKEND_GROUPS.split(","), "resourceAttributes": {
            "verb": verb, "group": group, "resource": resource, "namespace": namespace}}})
    return review.status.allowed


def test_beat_may_read_and_write_leases_in_its_namespace_and_nothing_else(kube_admin):
    for verb in ("get", "create", "update"):
        assert beat_may(kube_admin, verb, "leases", NAMESPACE, "coordination.k8s.io")
    assert not beat_may(kube_admin, "update", "leases", "kube-system", "coordination.k8s.io")
    assert not beat_may(kube_admin, "delete", "leases", NAMESPACE, "coordination.k8s.io")
    assert not beat_may(kube_admin, "list", "pods", "vision")


def test_a_killed_leader_is_replaced_within_the_lease_duration(control_plane, kube_admin):
    lease = lease_name()
    a = Candidate(control_plane, lease, "beat-a", []).start()
    wait_for(a.elector.leading, timeout=10)
    b = Candidate(control_plane, lease, "beat-b", []).start()
    time.sleep(3 * RETRY)
    assert a.elector.leading() and not b.elector.leading()
    a.kill()
    takeover = wait_for(b.elector.leading, timeout=3 * DURATION)
    print(f"\ntakeover after the leader was killed: {takeover:.2f} s (lease {DURATION:.0f} s, retry {RETRY} s)")
    b.kill()
    # Bounded by the follower's clock: one lease duration after it last saw a renewal, at its next look.
    assert takeover <= DURATION + 2 * RETRY
    record = client.CoordinationV1Api(kube_admin).read_namespaced_lease(lease, NAMESPACE).spec
    assert record.holder_identity == "beat-b" and record.lease_transitions == 1
    assert record.lease_duration_seconds == DURATION


@pytest.mark.django_db(transaction=True)
def test_a_partitioned_leader_stops_cycling_before_the_new_leader_starts(control_plane):
    lease, log = lease_name(), []
    a = Candidate(control_plane, lease, "beat-a", log, cycles=True).start()
    wait_for(a.elector.leading, timeout=10)
    b = Candidate(control_plane, lease, "beat-b", log, cycles=True).start()
    time.sleep(2.0)
    a.partition()
    cut = time.monotonic()
    wait_for(lambda: any(name == "beat-b" for name, _e, _t in log), timeout=3 * DURATION)
    time.sleep(1.0)
    a.kill(), b.kill()

    last_a = max(t for name, event, t in log if name == "beat-a" and event == "end")
    first_b = min(t for name, event, t in log if name == "beat-b" and event == "start")
    print(f"\npartitioned leader's last cycle ended {last_a - cut:.2f} s after the cut, "
          f"the new leader's first began {first_b - cut:.2f} s after it: gap {first_b - last_a:.2f} s")
    assert last_a < first_b
    assert last_a - cut <= DEADLINE + CYCLE_S + 0.2
    assert_no_overlap(log)


@pytest.mark.django_db(transaction=True)
def test_two_candidates_never_run_a_cycle_at_once(control_plane):
    lease, log = lease_name(), []
    candidates = [Candidate(control_plane, lease, f"beat-{n}", log, cycles=True).start() for n in "abc"]
    time.sleep(3.0)
    leader = next(c for c in candidates if c.elector.leading())
    leader.kill()  # one hand-over inside the window
    time.sleep(DURATION + 3.0)
    for candidate in candidates:
        candidate.kill()
    cycles = sum(1 for _n, event, _t in log if event == "start")
    print(f"\n{cycles} cycles by {sorted({n for n, _e, _t in log})}, none overlapping")
    assert len({n for n, _e, _t in log}) == 2
    assert_no_overlap(log)


def assert_no_overlap(log: list) -> None:
    running = 0
    for _name, event, _t in sorted(log, key=lambda entry: entry[2]):
        running += 1 if event == "start" else -1
        assert running in (0, 1), "two cycles ran at once"
