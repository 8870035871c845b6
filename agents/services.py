"""What the workers do, as plain functions over rows and a backend (agents/tasks.py is a thin shell).

Every function is safe to run twice or concurrently: rows change through conditional UPDATEs
and row locks, backend calls are idempotent, and multi-step work lives in ActionRequest rows
(agents/actions/) that any later run picks up where the last one stopped.
"""

from __future__ import annotations

import threading
from collections import defaultdict
from collections.abc import Callable
from contextlib import contextmanager
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta

from django.conf import settings
from django.db import connection, transaction

from agents import observe
from agents.actions.bind import bind_refusal_release
from agents.actions.pods import attempt_binds, job_pods, pod_stop, stop_pods
from agents.actions.state import CONFIRMED, HOLDING, REQUESTED
from agents.backends.base import RECLAIM_TAINT, Backend, JobObservation, JobStatus, NodeInventory
from agents.inventory import inventory_sync, jobs_release_on_node
from agents.native import native_stop, native_waiting_gone
from agents.rendezvous import services_end
from agents.runtime import failpoint
from agents.slices import slices_record
from agents.telemetry import NodeReading, Telemetry
from scheduling.clock import database_now
from scheduling.cycle import decide_and_apply
from scheduling.engine.reasons import PreemptReason
from scheduling.models import ActionRequest, Gpu, GpuSample, Job, Node
from scheduling.payloads import BindPayload, CheckpointPayload, PreemptPayload
from scheduling.services import job_release

Dispatch = Callable[[list[int]], None]
CYCLE_LOCK_KEY = 7_302_001  # pg advisory lock id: "one scheduling cycle at a time"
_LOCAL_CYCLE_LOCK = threading.Lock()  # SQLite (the embedded demo) has one process


def _on_commit(dispatch: Dispatch | None, ids: list[int]) -> None:
    if dispatch is not None and ids:
        transaction.on_commit(lambda: dispatch(list(ids)))


# -- poll_agents: heartbeats, GPU readings, reclaim notices, lost nodes ------------------------------

def agents_poll(*, backend: Backend, telemetry: Telemetry, now: datetime | None = None,
                dispatch: Dispatch | None = None, sync_inventory: bool = False) -> dict:
    """With sync_inventory (a real cluster: its nodes are the truth), the rows follow the cluster's
    node list first, and a node the cluster no longer lists is not revived by its agent."""
    now = now or database_now()
    listed = backend.inventory()
    synced = inventory_sync(inventory=listed, now=now) if sync_inventory else None
    nodes = list(Node.objects.select_related("tier"))
    inventory = {item.name: item for item in listed}
    if sync_inventory:
        nodes = [node for node in nodes if node.name in inventory]
    readings = telemetry.read([(node.name, node.agent_url) for node in nodes])
    answered, notices = [], []
    for node in nodes:
        reading, seen = readings.get(node.name), inventory.get(node.name)
        if reading is not None or (not node.agent_url and seen is not None and seen.ready):
            node_heartbeat(node=node, reading=reading, at=now)
            answered.append(node.name)
        notices += node_reclaim_notice(node=node, seen=seen, now=now, dispatch=dispatch)
    lost = nodes_mark_lost(now=now)
    result = {"answered": answered, "lost": lost, "reclaim_actions": notices}
    return result if synced is None else {**result, "inventory": synced}


@transaction.atomic
def node_heartbeat(*, node: Node, reading: NodeReading | None, at: datetime) -> None:
    Node.objects.filter(pk=node.pk).update(last_heartbeat=at)
    # A new node's first report makes it usable, as does a lost node answering again (its old jobs
    # were requeued when it was lost).
    Node.objects.filter(pk=node.pk, state__in=[Node.State.JOINING, Node.State.LOST]).update(state=Node.State.READY)
    if reading is None:
        return
    Node.objects.filter(pk=node.pk).update(telemetry_at=at)
    gpus = {gpu.index: gpu for gpu in Gpu.objects.filter(node=node)}
    gpus_health(node=node, reported={g.index for g in reading.gpus})
    samples = []
    for gpu_reading in reading.gpus:
        gpu = gpus.get(gpu_reading.index)
        if gpu is None:
            continue
        # The mode first: NVML and DCGM measure no utilisation in MIG mode, so a GPU that went into it
        # reports none, and waiting for one would never record the change.
        if gpu_reading.mig_enabled is not None and gpu_reading.mig_enabled != gpu.mig_enabled and gpu.mig_capable:
            Gpu.objects.filter(pk=gpu.pk).update(mig_enabled=gpu_reading.mig_enabled, layout_changed_at=at)
            gpu.mig_enabled = gpu_reading.mig_enabled
        # A GPU in MIG mode has no whole-GPU utilisation; a source that sends one without knowing the
        # mode (the simulator) is not stored, so charts read each slice's own (agents/slices.py).
        if gpu_reading.utilisation is None or gpu.mig_enabled:
            continue
        used = gpu_reading.memory_used_gb or 0.0
        Gpu.objects.filter(pk=gpu.pk).update(utilization=min(1.0, max(0.0, gpu_reading.utilisation)),
                                             memory_used_gb=used)
        samples.append(GpuSample(gpu=gpu, at=at, utilization=gpu_reading.utilisation, memory_used_gb=used))
    GpuSample.objects.bulk_create(samples, ignore_conflicts=True)  # a repeated poll at one time adds nothing
    slices_record(node=node, slices=reading.slices, at=at)


def gpus_health(*, node: Node, reported: set[int]) -> None:
    """A GPU the node's agent reports is healthy; one it stopped reporting (failed, fallen off the
    bus: NVML no longer lists it) takes no new work until it is back. An agent that reports no GPU
    at all says nothing about them."""
    if not reported:
        return
    Gpu.objects.filter(node=node, index__in=reported, healthy=False).update(healthy=True)
    Gpu.objects.filter(node=node, healthy=True).exclude(index__in=reported).update(healthy=False)


def reclaim_deadline(node: Node, seen: NodeInventory | None, now: datetime) -> float | None:
    """When the provider takes the node back, from its reclaim taint; None when no notice."""
    for taint in (seen.taints if seen else ()):
        key, _sep, rest = taint.partition("=")
        if key == RECLAIM_TAINT:
            value = rest.split(":", 1)[0]
            try:
                return float(value)
            except ValueError:  # a handler that gives no time: the tier's notice period
                return now.timestamp() + node.tier.reclaim_notice_s
    return None


@transaction.atomic
def node_reclaim_notice(*, node: Node, seen: NodeInventory | None, now: datetime,
                        dispatch: Dispatch | None = None) -> list[int]:
    """A spot reclaim notice: drain the node and start a stop-and-requeue flow for each job on it."""
    deadline = reclaim_deadline(node, seen, now)
    if deadline is None:
        return []
    Node.objects.filter(pk=node.pk, state=Node.State.READY).update(state=Node.State.DRAINING)
    created = []
    for job in Job.objects.filter(status__in=HOLDING, placements__gpu__node=node,
                                  placements__ended_at__isnull=True).distinct():
        action, new = ActionRequest.objects.get_or_create(
            key=f"spot-reclaim:{job.pk}:{job.run}",
            defaults={"kind": ActionRequest.Kind.PREEMPT, "job": job, "node": node,
                      "payload": PreemptPayload(job_id=job.pk, for_job_id=None, reason=PreemptReason.SPOT_RECLAIM,
                                                notice_deadline=deadline).as_payload()})
        if new:
            created.append(action.pk)
    _on_commit(dispatch, created)
    return created


def nodes_mark_lost(*, now: datetime) -> list[str]:
    limit = now - timedelta(seconds=settings.TESSERA_POLL_INTERVAL_S * settings.TESSERA_LOST_AFTER_MISSED)
    stale = Node.objects.exclude(state=Node.State.LOST).filter(last_heartbeat__lt=limit)
    return [name for node_id, name in stale.values_list("id", "name") if node_lose(node_id=node_id, limit=limit)]


@transaction.atomic
def node_lose(*, node_id: int, limit: datetime) -> bool:
    """Mark the node lost and requeue its jobs, billing them up to its last heartbeat only."""
    changed = Node.objects.filter(pk=node_id, last_heartbeat__lt=limit).exclude(state=Node.State.LOST) \
        .update(state=Node.State.LOST)
    if changed != 1:  # another worker got here first, or the node answered meanwhile
        return False
    node = Node.objects.get(pk=node_id)
    at = node.last_heartbeat
    jobs_release_on_node(node=node, at=at, message=f"Node {node.name} stopped answering after {at:%H:%M:%S}.")
    failpoint("node-lost.after-release")
    return True


# -- reconcile: the cluster's word on pods becomes job status ----------------------------------------
# How a pod of a running job ends besides succeeding or failing (docs/reference/kube-control-plane.md):
# it cannot start (the job's fault: failed, nothing billed), its node's kubelet refused it (a bind
# refusal: requeued a bounded number of times), or the cluster removed it (a drain's eviction, taint
# eviction, PodGC, node pressure: requeued from its last checkpoint, billed until seen).
CANNOT_START = frozenset({"ErrImagePull", "ImagePullBackOff", "InvalidImageName", "ErrImageNeverPull",
                          "CreateContainerConfigError", "CreateContainerError"})
NODE_REFUSED = ("OutOf", "UnexpectedAdmissionError", "NodeAffinity", "NodeSelectorMismatching", "InvalidNodeInfo")
CLUSTER_REMOVED = frozenset({"Evicted", "Shutdown", "NodeShutdown", "Terminated", "NodeLost", "Preempting"})
# A pod bound this long before the list was read must be in it; missing then, the cluster removed it.
SEEN_AFTER = timedelta(seconds=10)


@dataclass(frozen=True)
class PodsVerdict:
    outcome: str  # completed, failed, cannot-start, node-refused, evicted
    pod: str = ""
    observed: JobObservation | None = None
    ended_at: float | None = None  # completed: when its last pod ended, where the cluster says


def reconcile(*, backend: Backend, now: datetime | None = None) -> dict:
    now = now or database_now()
    observations = backend.poll_observations()
    by_pod = {(o.job_id, o.pod_name): o for o in observations}
    finished = defaultdict(list)
    holding = Job.objects.filter(status__in=HOLDING).select_related("team")
    current: dict[str, set[str]] = {}
    for job in holding:
        binds = attempt_binds(job)
        current[str(job.pk)] = {BindPayload.from_payload(b.payload).pod_name for b in binds}
        verdict = _pods_verdict(job, binds, by_pod, listed_at=now)
        if verdict and _job_end(job=job, verdict=verdict, at=now, backend=backend):
            finished[verdict.outcome].append(job.pk)
    orphans = _stop_orphans(backend, observations, current)
    gone = native_waiting_gone(observations, now=now, seen_after=SEEN_AFTER)
    if gone:
        finished["pod-deleted"] += gone
    ended = {pk for pks in finished.values() for pk in pks}
    return {"finished": dict(finished), "orphans_stopped": orphans,
            "services_removed": services_end(backend, [job for job in holding if job.pk not in ended])}


def _pods_verdict(job: Job, binds: list[ActionRequest], by_pod: dict, *, listed_at: datetime) -> PodsVerdict | None:
    if not binds:
        return None
    preempting = _preempt_in_flight(job)  # a pod it stops ends as that flow says
    observed = []
    for bind in binds:
        pod = BindPayload.from_payload(bind.payload).pod_name
        seen = by_pod.get((str(job.pk), pod))
        if seen is None:
            bound_before = bind.state == CONFIRMED and bind.updated_at <= listed_at - SEEN_AFTER
            return PodsVerdict("evicted", pod) if bound_before and not preempting else None
        observed.append(seen)
    if all(o.status == JobStatus.SUCCEEDED for o in observed):
        ends = [o.finished_at for o in observed]
        return PodsVerdict("completed", ended_at=None if None in ends else max(ends))
    if preempting:
        return None
    for o in observed:
        reason = o.reason or ""
        if o.status == JobStatus.PENDING and reason in CANNOT_START:
            return PodsVerdict("cannot-start", o.pod_name, o)
        if o.status == JobStatus.FAILED and reason.startswith(NODE_REFUSED):
            return PodsVerdict("node-refused", o.pod_name, o)
        if o.status == JobStatus.FAILED and (o.terminating or reason in CLUSTER_REMOVED):
            return PodsVerdict("evicted", o.pod_name, o)
    failed = next((o for o in observed if o.status == JobStatus.FAILED), None)
    return PodsVerdict("failed", failed.pod_name, failed) if failed else None


def _preempt_in_flight(job: Job) -> bool:
    return ActionRequest.objects.filter(job=job, kind=ActionRequest.Kind.PREEMPT, state=REQUESTED).exists()


def _job_end(*, job: Job, verdict: PodsVerdict, at: datetime, backend: Backend) -> bool:
    seen = verdict.observed
    words = f"{seen.reason}: {seen.message}" if seen and seen.message else (seen and seen.reason) or "deleted"
    if verdict.outcome == "node-refused":
        return bind_refusal_release(backend, job, f"node {seen.node_name} refused pod {verdict.pod}: {words}",
                                    final=False)
    progress = None
    if verdict.outcome == "completed":
        reason, progress = "completed", float(job.expected_runtime_s or job.max_runtime_s or job.progress_s)
        message = "The cluster reports the job completed."
        if verdict.ended_at is not None:  # billed until its last pod ended, not until this poll noticed
            at = min(at, datetime.fromtimestamp(verdict.ended_at, tz=UTC))
    elif verdict.outcome == "failed":
        reason, message = "failed", f"The cluster reports the job failed ({seen.reason}, exit code {seen.exit_code})."
    elif verdict.outcome == "cannot-start":  # it never ran: nothing billed
        reason, at, message = "failed", job.started_at, f"Pod {verdict.pod} cannot start: {words}"
    elif job.native and seen is None:  # someone deleted it (kubectl, its controller, the garbage collector)
        reason = "pod-deleted"
        message = f"Pod {job.pod_namespace}/{verdict.pod} was deleted outside Tessera while it ran."
    else:
        reason = "evicted"
        message = f"The cluster removed pod {verdict.pod} ({words})."
        if seen and seen.finished_at is not None:  # billed until its containers were stopped
            at = min(at, datetime.fromtimestamp(seen.finished_at, tz=UTC))
    released = job_release(job_id=job.pk, at=at, reason=reason, progress_s=progress, message=message)
    if released and reason != "completed":
        stop_pods(backend, job, job_pods(job), reason)  # the gang's other members stop with it
    return released


def _stop_orphans(backend: Backend, observations, current: dict[str, set[str]]) -> int:
    """A live pod that belongs to no current run (its job was released or cancelled meanwhile) is
    stopped."""
    stopped = 0
    for obs in observations:
        if obs.status not in (JobStatus.RUNNING, JobStatus.PENDING) or obs.terminating:
            continue
        if obs.pod_name in current.get(obs.job_id, set()):
            continue
        job = Job.objects.select_related("team").filter(pk=obs.job_id).first()
        if job is not None and job.status in HOLDING and obs.pod_name in job_pods(job):
            continue  # bound since the list above was read
        if obs.native:
            stopped += _stop_native_orphan(backend, job, obs)
            continue
        pod_stop(backend, obs.job_id, obs.namespace, obs.pod_name, "orphan")
        stopped += 1
    return stopped


def _stop_native_orphan(backend: Backend, job: Job | None, obs: JobObservation) -> int:
    """A native pod outside any run: one that waits for its job's placement, or was left Pending
    after a refusal, stays; a cancelled job's goes (with its owner, as a cancel does); a bound one
    that no run holds is stopped."""
    if job is not None and job.status == Job.Status.CANCELLED:
        native_stop(backend, job, [obs.pod_name], "cancelled")
        return 1
    if obs.node_name:
        pod_stop(backend, obs.job_id, obs.namespace, obs.pod_name, "orphan")
        return 1
    return 0


# -- checkpoint_due ------------------------------------------------------------------------------------

def checkpoints_due(*, now: datetime | None = None, dispatch: Dispatch | None = None,
                    interval_scale: float = 1.0) -> list[int]:
    """Ask each running, checkpointing job for a checkpoint once its interval has passed.
    `interval_scale` < 1 shortens intervals for a cluster that works faster than real time (the demo)."""
    now = now or database_now()
    created = []
    busy = set(ActionRequest.objects.filter(state=REQUESTED, kind__in=["checkpoint", "preempt"])
               .values_list("job_id", flat=True))
    for job in Job.objects.filter(status=Job.Status.RUNNING, checkpoint_interval_s__isnull=False):
        if job.pk in busy or not attempt_binds(job):
            continue
        due = _checkpoint_due_at(job, interval_scale)
        if due <= now:
            with transaction.atomic():
                action, new = ActionRequest.objects.get_or_create(
                    key=f"checkpoint:{job.pk}:{int(due.timestamp())}",
                    defaults={"kind": ActionRequest.Kind.CHECKPOINT, "job": job,
                              "payload": CheckpointPayload(job_id=job.pk).as_payload()})
                if new:
                    created.append(action.pk)
                    _on_commit(dispatch, [action.pk])
    return created


def _checkpoint_due_at(job: Job, scale: float) -> datetime:
    last = max(moment for moment in (job.last_checkpoint_at, job.started_at) if moment is not None)
    failed = ActionRequest.objects.filter(job=job, kind="checkpoint", state="failed", updated_at__gt=last) \
        .order_by("-updated_at").values_list("updated_at", flat=True).first()
    return max(last, failed or last) + timedelta(seconds=job.checkpoint_interval_s * scale)


# -- cycle_run (the task run_cycle): exactly one at a time ----------------------------------------------

@contextmanager
def cycle_lock():
    """PostgreSQL: a transaction-scoped advisory lock (a dead worker's lock dies with its
    connection, so no expiry to tune). SQLite (the demo): one process, a thread lock."""
    if connection.vendor == "postgresql":
        with transaction.atomic():
            with connection.cursor() as cursor:
                cursor.execute("SELECT pg_try_advisory_xact_lock(%s)", [CYCLE_LOCK_KEY])
                held = cursor.fetchone()[0]
            yield held
        return
    held = _LOCAL_CYCLE_LOCK.acquire(blocking=False)
    try:
        yield held
    finally:
        if held:
            _LOCAL_CYCLE_LOCK.release()


def cycle_run(*, dispatch: Dispatch | None = None, now: datetime | None = None) -> dict:
    """One scheduling cycle with the live policy (TESSERA_POLICY), unless another worker is
    running one: scheduling.cycle.decide_and_apply under cycle_lock."""
    with cycle_lock() as held:
        if not held:
            return {"ran": False}
        report = decide_and_apply(policy=settings.TESSERA_POLICY, now=now, dispatch=dispatch)
        observe.cycle_finished(report)
        failpoint("cycle.hold")
        return {"ran": True, "placed": report.applied.bound_jobs, "actions": report.applied.action_ids,
                "summary": report.summary()}


def requested_actions() -> list[int]:
    return list(ActionRequest.objects.filter(state=REQUESTED).order_by("id").values_list("id", flat=True))
