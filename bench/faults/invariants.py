"""What must hold after every fault, read at a settled moment from the database and the simulated
cluster: no GPU double-allocated (in either), every job in exactly one state, every placement with
exactly one ledger interval ending with it, no billed second without a running pod, nothing lost."""

from __future__ import annotations

import json

BILLING_SLACK_S = 1.0  # a placement is committed, then its pod bound: the dispatch in between


def orphan_pods(state: dict) -> list[str]:
    """Running pods of no current run of a holding job (reconcile stops them)."""
    holding = _current_pods()
    return [key for key, pod in state["pods"].items()
            if pod["phase"] == "Running" and pod["stop_at"] is None and not state["nodes"][pod["node"]]["gone"]
            and pod["name"] not in holding.get(pod["job_id"], set())]


def unreconciled_pods(state: dict) -> list[str]:
    """Pods of a holding job's current run that have ended in the cluster: reconcile has yet to
    record the end (and close the ledger back at the pod's end). Until it has, an open interval
    reads as billed up to now, so the invariants are read only once there is none."""
    holding = _current_pods()
    return [key for key, pod in state["pods"].items()
            if pod["phase"] in ("Succeeded", "Failed") and pod["name"] in holding.get(pod["job_id"], set())]


def _current_pods() -> dict[str, set[str]]:
    """Job id -> the pod names of its current run, for every job that holds GPUs."""
    from agents.actions.pods import job_pods
    from scheduling.models import Job

    return {str(job.pk): set(job_pods(job)) for job in Job.objects.filter(status__in=Job.HOLDING_STATUSES)}


def pod_lives(sim) -> dict[tuple[str, str, int], list[tuple[float, float]]]:
    """(job id, node, GPU index) -> the spans a pod of that job ran there, gone pods included."""
    state = json.loads(sim.path.read_text())
    now = sim.now()
    lives: dict[tuple[str, str, int], list[tuple[float, float]]] = {}
    pods = [{**pod, "ran_until": pod["ended_at"] if pod["ended_at"] is not None else now}
            for pod in state["pods"].values()]
    if sim.history_path.exists():
        pods += [json.loads(line) for line in sim.history_path.read_text().splitlines() if line]
    for pod in pods:
        for index in pod["gpus"]:
            lives.setdefault((pod["job_id"], pod["node"], index), []).append((pod["started_at"], pod["ran_until"]))
    return lives


def billed_without_pod(sim) -> tuple[float, list[str]]:
    """Seconds billed beyond the bind slack while no pod of the job ran on that GPU, in total, and
    the intervals that have any."""
    from django.utils import timezone

    from billing.models import UsageInterval

    lives, now, total, bad = pod_lives(sim), timezone.now().timestamp(), 0.0, []
    for interval in UsageInterval.objects.select_related("node", "gpu"):
        start, end = interval.started_at.timestamp(), (interval.ended_at.timestamp() if interval.ended_at else now)
        spans = sorted(lives.get((str(interval.job_id), interval.node.name, interval.gpu.index), []))
        uncovered = _uncovered(start + BILLING_SLACK_S, end, spans)
        if uncovered > BILLING_SLACK_S:
            total += uncovered
            bad.append(f"interval {interval.pk} (job {interval.job_id}, {interval.node.name}/gpu{interval.gpu.index}) "
                       f"billed {uncovered:.1f} s with no pod running: billed {start % 1000:.1f}-{end % 1000:.1f}, "
                       f"pods {[(round(a % 1000, 1), round(b % 1000, 1)) for a, b in spans]}")
    return total, bad


def _uncovered(start: float, end: float, spans: list[tuple[float, float]]) -> float:
    missing, cursor = 0.0, start
    for span_start, span_end in spans:
        if span_start > cursor:
            missing += max(0.0, min(span_start, end) - cursor)
        cursor = max(cursor, span_end)
        if cursor >= end:
            return missing
    return missing + max(0.0, end - cursor)


def check(sim, job_ids: list[int]) -> list[str]:
    """Every invariant, read at a settled moment; returns the violations in words."""
    state = json.loads(sim.path.read_text())
    return (_double_allocations(state) + _job_states(state, job_ids) + _ledger() +
            [f"orphan pod {key} still running" for key in orphan_pods(state)] + billed_without_pod(sim)[1])


def _double_allocations(state: dict) -> list[str]:
    """No GPU given twice: over its whole share in the database, or to two live pods in the cluster."""
    from django.db.models import Sum

    from scheduling.models import Gpu

    found = []
    for gpu in Gpu.objects.select_related("node"):
        open_share = gpu.placements.filter(ended_at__isnull=True, mig_instance__isnull=True) \
            .aggregate(total=Sum("share_milli"))["total"] or 0
        if open_share > 1000:
            found.append(f"{gpu} allocated {open_share}/1000 in the database")
    held: dict[tuple[str, int], str] = {}
    for pod in state["pods"].values():
        if pod["phase"] == "Running" and not state["nodes"][pod["node"]]["gone"]:
            for index in pod["gpus"]:
                if (pod["node"], index) in held:
                    found.append(f"GPU {index} of {pod['node']} runs {held[(pod['node'], index)]} and {pod['name']}")
                held[(pod["node"], index)] = pod["name"]
    return found


def _job_states(state: dict, job_ids: list[int]) -> list[str]:
    """No job lost; each in one state: holding exactly when it has open placements, finished
    exactly when it has an end; a running one has its pods."""
    from django.db.models import Count, Q

    from scheduling.models import Job

    found = []
    jobs = Job.objects.filter(pk__in=job_ids).annotate(open=Count("placements",
                                                                  filter=Q(placements__ended_at__isnull=True)))
    if jobs.count() != len(job_ids):
        found.append(f"{len(job_ids) - jobs.count()} job(s) lost from the database")
    for job in jobs:
        holding = job.status in Job.HOLDING_STATUSES
        if holding != (job.open > 0):
            found.append(f"job {job.pk} is {job.status} with {job.open} open placement(s)")
        if (job.status in Job.FINISHED_STATUSES) != (job.finished_at is not None):
            found.append(f"job {job.pk} is {job.status} with finished_at {job.finished_at}")
    return found + _pods_of_holding_jobs(state, jobs)


def _ledger() -> list[str]:
    """Every placement has exactly one interval, which ends when it does."""
    from django.db.models import Count

    from billing.models import UsageInterval
    from scheduling.models import Placement

    found = [f"placement {placement.pk} has {placement.n} usage intervals"
             for placement in Placement.objects.annotate(n=Count("usage_interval")).exclude(n=1)]
    for interval in UsageInterval.objects.select_related("placement").exclude(placement__isnull=True):
        if interval.ended_at != interval.placement.ended_at:
            found.append(f"interval {interval.pk} ends {interval.ended_at}, "
                         f"its placement {interval.placement.ended_at}")
    if UsageInterval.objects.filter(placement__isnull=True).exists():
        found.append("usage intervals without a placement")
    return found


def _pods_of_holding_jobs(state: dict, jobs) -> list[str]:
    """Nothing lost: a job the database says runs has its pods in the cluster (bound and alive)."""
    from agents.actions.pods import attempt_binds, job_pods

    found = []
    for job in jobs:
        if job.status not in job.HOLDING_STATUSES or any(a.state != "confirmed" for a in attempt_binds(job)):
            continue
        for pod in job_pods(job):
            live = state["pods"].get(f"{job.team.name}/{pod}")
            if live is None:
                found.append(f"job {job.pk} is {job.status} but its pod {pod} is gone from the cluster")
    return found
