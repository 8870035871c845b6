"""A Plan -> rows, in one transaction with row locks.

Binds become placements (and open ledger intervals) at once, so the database's constraints
catch any double allocation; preemptions and repartitions become ActionRequests that the next
snapshot counts as in flight. Backend work is dispatched only after the commit.
"""

from __future__ import annotations

import logging
from collections import defaultdict
from dataclasses import dataclass, field
from datetime import datetime, timedelta

from django.conf import settings
from django.db import IntegrityError, connection, transaction

from portal import freshness
from scheduling import engine
from scheduling.engine.reasons import PreemptReason
from scheduling.models import ActionRequest, Gpu, Job, MigInstance, Placement, run_id
from scheduling.native import member_pod_name
from scheduling.payloads import AllocationRequest, BindPayload, PreemptPayload, RepartitionPayload
from scheduling.services import job_event_add, placement_start

log = logging.getLogger(__name__)
# Why a job is asked to stop, as a whole sentence about the job that needs its GPUs ({job}: "job #807").
PREEMPTION_WHY = {
    PreemptReason.PREEMPT: "Asked to stop so that {job}, of a higher priority, can start.",
    PreemptReason.RECLAIM: "Asked to stop so that {job} can start: its team is taking back the guaranteed GPUs "
                           "this job borrowed.",
    PreemptReason.CONSOLIDATE: "Asked to stop so that {job} can start; this job restarts from its checkpoint on "
                               "free GPUs elsewhere.",
}


@dataclass
class ApplyResult:
    bound_jobs: list[int] = field(default_factory=list)
    skipped_jobs: list[int] = field(default_factory=list)
    action_ids: list[int] = field(default_factory=list)


@transaction.atomic
def apply_plan(plan: engine.Plan, *, now: datetime) -> ApplyResult:
    result = ApplyResult()
    binds_by_job: dict[str, list[engine.Bind]] = defaultdict(list)
    for bind in plan.binds:
        binds_by_job[bind.job_id].append(bind)
    # Only the jobs that change state are locked; the waiting ones get their queue information in
    # one conditional update (_write_pending_info), whatever the queue's length.
    job_ids = {int(j) for j in binds_by_job} | {int(p.job_id) for p in plan.preemptions}
    jobs = Job.objects.select_for_update().in_bulk(job_ids)
    gpus = _gpus_by_place(plan.binds)
    for job_id, binds in binds_by_job.items():
        job = jobs.get(int(job_id))
        if job is None or job.status not in Job.WAITING_STATUSES or not _bind_job(job, binds, gpus, now, result):
            result.skipped_jobs.append(int(job_id))
    for preemption in plan.preemptions:
        _request_preemption(jobs.get(int(preemption.job_id)), preemption, now, result)
    for repartition in plan.repartitions:
        _request_repartition(repartition, now, result)
    waiting_teams = _write_pending_info(plan, now)
    # The portal's cached team views, of the teams whose jobs changed.
    freshness.teams_changed({job.team_id for job in jobs.values()} | waiting_teams)
    return result


def _gpus_by_place(binds) -> dict[tuple[str, int], Gpu]:
    nodes = {bind.node for bind in binds}
    rows = Gpu.objects.select_for_update().filter(node__name__in=nodes).select_related("node")
    return {(gpu.node.name, gpu.index): gpu for gpu in rows}


def _bind_job(job: Job, binds, gpus, now, result: ApplyResult) -> bool:
    """All members of the job or none: a savepoint undoes a partly written gang."""
    try:
        with transaction.atomic():
            for bind in sorted(binds, key=lambda b: b.member):
                placements = [_place(job, gpus[(bind.node, a.gpu_index)], a, now) for a in bind.allocations]
                result.action_ids.append(_bind_action(job, bind, placements, now).pk)
    except (IntegrityError, KeyError) as error:
        log.warning("bind of job %s skipped: %s", job.pk, error)
        return False
    job.status = Job.Status.RUNNING
    job.started_at = now
    job.borrowed = any(b.borrowed for b in binds)
    job.pending_reason_code = job.pending_reason = ""
    job.estimated_start = job.queue_position_team = job.queue_position_overall = None
    job.save()
    nodes = ", ".join(sorted({b.node for b in binds}))
    job_event_add(job=job, at=now, kind="placed",
                  message=f"Placed on {nodes}" + (" (borrowed capacity)" if job.borrowed else ""))
    result.bound_jobs.append(job.pk)
    return True


def _place(job: Job, gpu: Gpu, allocation: engine.Allocation, now) -> Placement:
    instance = None
    share = allocation.milli
    memory = allocation.memory_gb
    if allocation.mig_profile is not None:
        instance = _mig_instance(gpu, allocation.mig_profile, allocation.mig_start)
        share = instance.share_milli
        memory = instance.memory_gb
    elif share >= 1000:
        memory = gpu.memory_gb
    placement = Placement.objects.create(job=job, gpu=gpu, mig_instance=instance, share_milli=min(share, 1000),
                                         mig_profile=instance.profile if instance else "", memory_gb=memory,
                                         started_at=now)
    placement_start(placement=placement)
    return placement


def _mig_instance(gpu: Gpu, profile_name: str, start: int) -> MigInstance:
    """The instance at (gpu, start), created when the engine asks for one on free slices."""
    existing = gpu.mig_instances.filter(start_slot=start).first()
    if existing is not None:
        return existing
    instance = MigInstance.for_profile(gpu, profile_name, start)
    instance.save()
    return instance


def _bind_action(job: Job, bind: engine.Bind, placements, now) -> ActionRequest:
    attempt = run_id(now)  # the run's id: the job starts now
    return ActionRequest.objects.create(
        key=f"bind:{job.pk}:{bind.member}:{attempt}", kind=ActionRequest.Kind.BIND, job=job,
        node=placements[0].gpu.node,
        payload=BindPayload(
            job_id=job.pk, member=bind.member, node=bind.node,
            pod_name=_pod_name(job, bind.member, attempt),
            placements=tuple(p.pk for p in placements),
            allocations=tuple(AllocationRequest(gpu_index=a.gpu_index, milli=a.milli, mig_profile=a.mig_profile,
                                                mig_start=a.mig_start) for a in bind.allocations)).as_payload())


def _pod_name(job: Job, member: int, attempt: int) -> str:
    """The pod that runs member `member`: one Tessera creates, or the native pod it binds."""
    return member_pod_name(job, member) if job.native else f"{job.team.name}-{job.pk}-{attempt}-{member}"


def _request_preemption(job: Job | None, preemption: engine.Preempt, now, result: ApplyResult) -> None:
    if job is None or job.status not in (Job.Status.RUNNING, Job.Status.CHECKPOINTING):
        return
    action, created = ActionRequest.objects.get_or_create(
        key=f"preempt:{job.pk}:{job.run}",
        defaults={"kind": ActionRequest.Kind.PREEMPT, "job": job,
                  "payload": PreemptPayload(job_id=job.pk, for_job_id=_row_id(preemption.for_job_id),
                                            reason=preemption.reason, notice_deadline=None).as_payload()})
    if created:
        result.action_ids.append(action.pk)
        job_event_add(job=job, at=now, kind="preemption-requested",
                      message=PREEMPTION_WHY[preemption.reason].format(
                          job=f"job #{preemption.for_job_id}" if preemption.for_job_id else "another job"))


def _row_id(engine_id: str | None) -> int | None:
    """An engine job id (the row's primary key as a string) as the row's key."""
    return None if engine_id is None else int(engine_id)


def _request_repartition(repartition: engine.Repartition, now, result: ApplyResult) -> None:
    gpu = Gpu.objects.select_related("node").get(node__name=repartition.node, index=repartition.gpu_index)
    action = ActionRequest.objects.create(
        key=f"repartition:{repartition.node}:{repartition.gpu_index}:{int(now.timestamp())}",
        kind=ActionRequest.Kind.REPARTITION, node=gpu.node,
        payload=RepartitionPayload(node=repartition.node, gpu_index=repartition.gpu_index,
                                   mig_enabled=repartition.mig_enabled, layout=repartition.layout).as_payload())
    result.action_ids.append(action.pk)


# Each waiting job's queue information, written in batches of one statement that joins the new
# values (hash join: linear in the queue) and skips rows already showing them, so a steady queue
# costs no writes. Django's bulk_update builds one CASE of N branches per column instead, which
# PostgreSQL evaluates per row: quadratic, 150 s a cycle at 10,000 waiting (bench/cycle_queue.py).
PENDING_INFO_SQL = """
UPDATE {table} AS job SET pending_reason_code = new.code, pending_reason = new.reason,
    estimated_start = new.eta, queue_position_team = new.team_position,
    queue_position_overall = new.overall_position
FROM (VALUES {rows}) AS new(id, code, reason, eta, team_position, overall_position)
WHERE job.id = new.id AND job.status = ANY(%s)
  AND (job.pending_reason_code, job.pending_reason, job.estimated_start, job.queue_position_team,
       job.queue_position_overall) IS DISTINCT FROM (new.code, new.reason, new.eta, new.team_position,
       new.overall_position)
RETURNING job.team_id"""
PENDING_ROW_SQL = "(%s::bigint, %s::varchar, %s::varchar, %s::timestamptz, %s::integer, %s::integer)"
PENDING_BATCH = 2000


def _write_pending_info(plan: engine.Plan, now) -> set[int]:
    """Write the plan's queue information onto jobs still waiting; the teams whose rows changed."""
    # The engine's waits are seconds of work; the demo's simulated cluster does a minute of work a
    # second, and people read the estimate against their own clock (settings.TESSERA_CLOCK_SPEED).
    speed = settings.TESSERA_CLOCK_SPEED
    rows = [(int(job_id), info.reason[:40], info.message[:500],
             now + timedelta(seconds=max(0.0, info.eta - now.timestamp()) / speed) if info.eta is not None else None,
             info.team_position, info.overall_position) for job_id, info in plan.pending.items()]
    if connection.vendor != "postgresql":
        return _write_pending_rows_portably(rows)
    teams: set[int] = set()
    with connection.cursor() as cursor:
        for start in range(0, len(rows), PENDING_BATCH):
            batch = rows[start:start + PENDING_BATCH]
            sql = PENDING_INFO_SQL.format(table=Job._meta.db_table, rows=", ".join([PENDING_ROW_SQL] * len(batch)))
            cursor.execute(sql, [value for row in batch for value in row] + [list(Job.WAITING_STATUSES)])
            teams.update(team_id for (team_id,) in cursor.fetchall())
    return teams


PENDING_FIELDS = ("pending_reason_code", "pending_reason", "estimated_start", "queue_position_team",
                  "queue_position_overall")


def _write_pending_rows_portably(rows: list[tuple]) -> set[int]:
    """The same writes for the embedded demo's SQLite (no UPDATE … FROM VALUES with casts): row by
    row, only the rows that changed; its queue is a handful of jobs."""
    current = {row[0]: row[1:] for row in Job.objects.filter(pk__in=[r[0] for r in rows],
                                                             status__in=Job.WAITING_STATUSES)
               .values_list("pk", "team_id", *PENDING_FIELDS)}
    teams: set[int] = set()
    for job_id, *values in rows:
        if job_id in current and tuple(current[job_id][1:]) != tuple(values):
            Job.objects.filter(pk=job_id).update(**dict(zip(PENDING_FIELDS, values, strict=True)))
            teams.add(current[job_id][0])
    return teams
