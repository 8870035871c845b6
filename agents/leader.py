"""Leader election on a Kubernetes Lease (coordination.k8s.io/v1): one scheduling loop at a time.

Why our own ~150 lines and not `kubernetes.leaderelection` (client 37): that module runs the
leader's work in a daemon thread it cannot stop, gives no "am I leader *now*" answer to gate a
cycle on, reads time.time()/time.sleep directly (its decisions cannot be tested with a clock we
control), and sets no request timeout, so a leader whose API server hangs blocks inside a renew.

The rules, as client-go's leaderelection has them:
- Nobody trusts another host's clock. A follower times a lease from the moment *it* first saw
  the current record (after its read returned), and may take it over only lease_duration later.
- The leader counts its leadership from the moment *before* it sent its last successful renew,
  and stops considering itself leader renew_deadline after that, renew_deadline < lease_duration:
  a leader that cannot renew (killed, partitioned) has stopped before any follower may acquire.
- Every write carries the resourceVersion it read (optimistic concurrency): of two candidates
  racing for an expired lease the API server lets exactly one win (409 Conflict for the other).

The PostgreSQL advisory lock (agents/services.py, cycle_lock) stays the second fence: a cycle
already running when leadership moves holds its transaction's lock until it ends.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass
from datetime import UTC, datetime

import urllib3
from kubernetes import client
from kubernetes.client.exceptions import ApiException


class LeaseConflict(Exception):
    """Someone else wrote the Lease since we read it (409): we lost the race."""


class LeaseUnavailable(Exception):
    """The API server could not be reached or refused: nothing is known, nothing changes."""


@dataclass(frozen=True)
class Lease:
    holder: str | None
    duration_s: float | None
    renew_time: datetime | None  # the holder's clock: for metrics only, never for decisions
    acquire_time: datetime | None
    transitions: int
    resource_version: str


def _micro_time(moment: datetime) -> str:
    """RFC 3339 with microseconds, as the API server's MicroTime wants it (isoformat drops .000000)."""
    return moment.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%S.%fZ")


class KubeLeaseStore:
    """One Lease object read and written with the `kubernetes` client, each call bounded by timeout_s."""

    def __init__(self, api_client: client.ApiClient, *, name: str, namespace: str, timeout_s: float = 2.0):
        self.api = client.CoordinationV1Api(api_client)
        self.name, self.namespace, self.timeout_s = name, namespace, timeout_s

    def read(self) -> Lease | None:
        try:
            lease = self._call(self.api.read_namespaced_lease, self.name, self.namespace)
        except LeaseConflict as error:  # a read never conflicts; a 404 arrives here as None
            raise LeaseUnavailable(str(error)) from None
        if lease is None:
            return None
        spec = lease.spec
        return Lease(holder=spec.holder_identity or None, duration_s=spec.lease_duration_seconds,
                     renew_time=spec.renew_time, acquire_time=spec.acquire_time,
                     transitions=spec.lease_transitions or 0, resource_version=lease.metadata.resource_version)

    def write(self, previous: Lease | None, *, holder: str, duration_s: float, acquired: bool) -> None:
        """Create the Lease (previous None) or replace exactly the version read (LeaseConflict if not)."""
        now = _micro_time(datetime.now(UTC))
        spec = {"holderIdentity": holder, "leaseDurationSeconds": max(1, round(duration_s)), "renewTime": now,
                "leaseTransitions": (previous.transitions if previous else 0) + (1 if acquired and previous else 0)}
        kept = None if acquired or previous is None else previous.acquire_time
        spec["acquireTime"] = _micro_time(kept) if kept else now
        body = {"apiVersion": "coordination.k8s.io/v1", "kind": "Lease", "spec": spec,
                "metadata": {"name": self.name, "namespace": self.namespace}}
        if previous is None:
            self._call(self.api.create_namespaced_lease, self.namespace, body)
            return
        body["metadata"]["resourceVersion"] = previous.resource_version
        self._call(self.api.replace_namespaced_lease, self.name, self.namespace, body)

    def _call(self, method, *args):
        try:
            return method(*args, _request_timeout=self.timeout_s)
        except ApiException as error:
            if error.status == 404:
                return None
            if error.status == 409:
                raise LeaseConflict(error.reason) from None
            raise LeaseUnavailable(f"{error.status} {error.reason}") from None
        except (urllib3.exceptions.HTTPError, OSError) as error:
            raise LeaseUnavailable(str(error)) from None


class Elector:
    """The decisions of one candidate; step() once every retry_period, leading() before each cycle."""

    def __init__(self, store, identity: str, *, lease_duration_s: float = 15.0, renew_deadline_s: float = 10.0,
                 retry_period_s: float = 2.0, clock: Callable[[], float] = time.monotonic):
        if not 0 < retry_period_s < renew_deadline_s < lease_duration_s:
            raise ValueError("need 0 < retry_period_s < renew_deadline_s < lease_duration_s")
        self.store, self.identity, self.clock = store, identity, clock
        self.lease_duration_s, self.renew_deadline_s = lease_duration_s, renew_deadline_s
        self.retry_period_s = retry_period_s
        self._valid_until: float | None = None  # our clock: when we stop being leader unless renewed
        self._seen: tuple[str | None, str] | None = None  # (holder, resourceVersion) last read
        self._seen_at = 0.0  # our clock: when that record was first read
        self.last: Lease | None = None  # the record last read, for metrics
        self.writes = 0  # successful creates and renewals, for metrics

    def leading(self) -> bool:
        return self._valid_until is not None and self.clock() < self._valid_until

    def step(self) -> bool:
        """Read the Lease once and renew, acquire or wait; returns leading()."""
        sent = self.clock()
        try:
            lease = self.store.read()
            self._observe(lease)
            if lease is None or lease.holder == self.identity or self._expired(lease):
                acquired = lease is None or lease.holder != self.identity
                self.store.write(lease, holder=self.identity, duration_s=self.lease_duration_s, acquired=acquired)
                self._valid_until = sent + self.renew_deadline_s
                self.writes += 1
            else:
                self._valid_until = None  # someone else holds a live lease
        except LeaseConflict:
            self._valid_until = None
        except LeaseUnavailable:
            pass  # keep what we had: leadership runs out by itself at _valid_until
        return self.leading()

    def release(self) -> None:
        """Stop leading now and clear the holder, so a follower takes over at its next look instead
        of a lease duration later (a clean shutdown: a rolling update, a drained node)."""
        if not self.leading():
            return
        self._valid_until = None  # first: from here on this process sends nothing
        try:
            lease = self.store.read()
            if lease is not None and lease.holder == self.identity:
                self.store.write(lease, holder="", duration_s=self.lease_duration_s, acquired=False)
        except (LeaseConflict, LeaseUnavailable):
            pass  # it expires by itself

    def _observe(self, lease: Lease | None) -> None:
        self.last = lease
        key = None if lease is None else (lease.holder, lease.resource_version)
        if key != self._seen:
            self._seen, self._seen_at = key, self.clock()  # after the read: never before the write

    def _expired(self, lease: Lease) -> bool:
        if not lease.holder:
            return True  # released
        duration = lease.duration_s or self.lease_duration_s
        return self.clock() >= self._seen_at + duration

    def run(self, stop: Callable[[], bool], sleep: Callable[[float], None] = time.sleep) -> None:
        """Step every retry_period until stop() (the thread a process runs it in)."""
        while not stop():
            self.step()
            sleep(self.retry_period_s)
