"""Demo chargeback: a rate card and about two months of usage history (demo only).

History is laid out in lanes (a fixed group of GPUs, or one MIG instance) that run one job after
another, so by construction no GPU is billed above 1 and no job twice; the placements that are
running now get their open intervals through the real service.
"""

import random
from datetime import date, timedelta
from decimal import Decimal

from django.contrib.auth.models import User
from django.db import transaction
from django.utils import timezone

from billing.models import Budget, Rate, UsageInterval
from billing.periods import Month
from billing.services import placement_gpu_fraction, usage_interval_open
from portal.models import Team
from scheduling.models import CapacityTier, Gpu, Job, MigInstance, Node, Placement, PriorityClass

# model, tier, $/GPU-hour, where it comes from (docs/reference/performance-figures.md §4)
RATES = [
    ("H100-80GB", "on-demand", "6.8800", "AWS p5.48xlarge after the June 2025 cut, ≈$55/h ÷ 8"),
    ("H100-80GB", "reserved", "3.6400", "1-year commitment, ≈47% below on-demand"),
    ("H100-80GB", "spot", "2.7500", "≈60% below on-demand"),
    ("A100-80GB", "on-demand", "5.1200", "p4d $32.77/h ÷ 8, +25% for 80 GB (derived)"),
    ("A100-80GB", "reserved", "2.7100", "1-year commitment, ≈47% below on-demand"),
    ("A100-80GB", "spot", "2.0500", "≈60% below on-demand"),
    ("A100-40GB", "on-demand", "4.1000", "AWS p4d.24xlarge $32.77/h ÷ 8"),
    ("A100-40GB", "reserved", "2.1700", "1-year commitment, ≈47% below on-demand"),
    ("A100-40GB", "spot", "1.6400", "≈60% below on-demand"),
]
# Spot prices moved mid-month last month, so the demo shows an interval split at a rate change.
SPOT_REVISION = {"H100-80GB": "3.1000", "A100-80GB": "2.3000", "A100-40GB": "1.8500"}
# team, share of a lane's jobs, per GPU model
TEAM_MIX = {
    "H100-80GB": [("llm-platform", 6), ("vision", 2), ("search", 2)],
    "A100-80GB": [("recsys", 4), ("vision", 3), ("search", 2), ("llm-platform", 1)],
    "A100-40GB": [("fraud", 5), ("search", 3), ("recsys", 2)],
    "MIG": [("search", 5), ("fraud", 3), ("recsys", 2)],
}
LEADS = {"search": "alice", "llm-platform": "dave", "vision": "erin"}


@transaction.atomic
def billing_demo_load(now=None) -> None:
    now = now or timezone.now()
    _create_rates(Month.of(now))
    rng = random.Random(7)
    cast = {
        "teams": {team.name: team for team in Team.objects.prefetch_related("projects")},
        "users": {user.username: user for user in User.objects.filter(username__in=LEADS.values())},
        "classes": {c.name: c for c in PriorityClass.objects.all()},
        "nodes": {node.id: node for node in Node.objects.all()},
    }
    history_start = Month.of(now).previous().previous().start
    runs = [run for targets, free_by, mix in _lanes(now)
            for run in _lane_runs(rng, cast, targets, history_start, free_by, mix)]
    _save_runs(rng, cast, runs)
    for placement in Placement.objects.filter(ended_at__isnull=True).order_by("id"):
        usage_interval_open(placement=placement, at=placement.started_at)
    # Budgets a lead and finance can look at, close to what these teams spend in a month.
    Budget.objects.create(team=cast["teams"]["search"], monthly_amount=Decimal("20000"), thresholds="50,80,100")
    Budget.objects.create(team=cast["teams"]["llm-platform"], monthly_amount=Decimal("60000"))


def _create_rates(this_month: Month) -> None:
    tiers = {tier.name: tier for tier in CapacityTier.objects.all()}
    since = this_month.previous().previous().previous().first_day
    revision = date(this_month.previous().year, this_month.previous().month, 16)
    for model, tier, price, note in RATES:
        spot = tier == "spot"
        Rate.objects.create(gpu_model=model, tier=tiers[tier], price_per_gpu_hour=Decimal(price), note=note,
                            valid_from=since, valid_to=revision if spot else None)
        if spot:
            Rate.objects.create(gpu_model=model, tier=tiers[tier], price_per_gpu_hour=Decimal(SPOT_REVISION[model]),
                                valid_from=revision, note="spot price revision")


def _lanes(now):
    """(targets, time the lane must be free by, mix key): GPU groups of 4 (2 on PCIe) and MIG instances."""
    busy = dict(Placement.objects.filter(ended_at__isnull=True).values_list("gpu_id", "started_at"))
    busy_mig = dict(Placement.objects.filter(ended_at__isnull=True, mig_instance__isnull=False)
                    .values_list("mig_instance_id", "started_at"))
    lanes = []
    for node in Node.objects.order_by("name"):
        gpus = [gpu for gpu in Gpu.objects.filter(node=node).order_by("index") if not gpu.mig_enabled]
        size = 2 if node.interconnect == "pcie" else 4
        for first in range(0, len(gpus), size):
            group = gpus[first:first + size]
            free_by = min([busy.get(gpu.id, now) for gpu in group])
            lanes.append((group, free_by, node.gpu_model))
    for instance in MigInstance.objects.select_related("gpu").order_by("id"):
        lanes.append(([instance], busy_mig.get(instance.id, now), "MIG"))
    return lanes


def _lane_runs(rng, cast, targets, start, free_by, mix) -> list:
    """Jobs one after another on a lane until it must be free; each job holds 1..all of its GPUs."""
    at = start + timedelta(hours=rng.uniform(0, 24))
    runs = []
    while True:
        hours = rng.uniform(48, 168) if mix == "MIG" else rng.uniform(10, 72)
        end = at + timedelta(hours=hours)
        if end > free_by - timedelta(minutes=30):
            return runs
        team_name = rng.choices(*zip(*TEAM_MIX[mix], strict=True))[0]
        width = len(targets) if mix == "MIG" else rng.choice([w for w in (1, 2, 4) if w <= len(targets)])
        outcome = rng.choices(["completed", "failed", "cancelled"], [90, 6, 4])[0]
        runs.append((cast["teams"][team_name], targets[:width], at, end, outcome, mix == "MIG"))
        at = end + timedelta(hours=rng.uniform(1, 18))


def _save_runs(rng, cast, runs) -> None:
    jobs = []
    for team, targets, started, _, outcome, inference in runs:
        project = rng.choice(list(team.projects.all()))
        jobs.append(Job(
            team=team, project=project, submitted_by=cast["users"].get(LEADS.get(team.name, "")),
            name=f"{project.name}-{'serve' if inference else 'train'}-{started:%m%d%H}",
            kind="inference" if inference else "training",
            priority_class=cast["classes"]["production" if inference else "training"],
            gpus=0 if inference else len(targets), gpu_memory_gb=8 if inference else 60,
            preemptible=not inference, status=outcome, started_at=started))
    Job.objects.bulk_create(jobs)
    # auto_now_add stamps submitted_at with today; history needs it before the start.
    for job, (_, _, started, ended, _, _) in zip(jobs, runs, strict=True):
        job.submitted_at, job.finished_at = started - timedelta(minutes=rng.randint(2, 90)), ended
    Job.objects.bulk_update(jobs, ["submitted_at", "finished_at"], batch_size=200)
    placements = [p for job, run in zip(jobs, runs, strict=True) for p in _placements(rng, job, run)]
    Placement.objects.bulk_create(placements)
    UsageInterval.objects.bulk_create([_interval(p, cast["nodes"][p.gpu.node_id]) for p in placements])


def _segments(rng, started, ended, outcome):
    """One run, or (one time in ten) a preemption, a requeue two hours later and the rest of the run."""
    if ended - started > timedelta(hours=20) and rng.random() < 0.1:
        cut = started + (ended - started) * 0.4
        return [(started, cut, "preempted"), (cut + timedelta(hours=2), ended, outcome)]
    return [(started, ended, outcome)]


def _placements(rng, job, run):
    _, targets, started, ended, outcome, _ = run
    for low, high, reason in _segments(rng, started, ended, outcome):
        for target in targets:
            mig = target if isinstance(target, MigInstance) else None
            gpu = mig.gpu if mig else target
            yield Placement(
                job=job, gpu=gpu, mig_instance=mig, mig_profile=mig.profile if mig else "",
                share_milli=mig.share_milli if mig else 1000,
                memory_gb=mig.memory_gb if mig else gpu.memory_gb, started_at=low, ended_at=high, end_reason=reason)


def _interval(placement: Placement, node: Node) -> UsageInterval:
    job = placement.job
    return UsageInterval(
        job=job, team_id=job.team_id, project_id=job.project_id, business_unit_id=job.team.business_unit_id,
        node=node, gpu=placement.gpu, gpu_model=placement.gpu.model, tier_id=node.tier_id,
        gpu_fraction=placement_gpu_fraction(placement), started_at=placement.started_at,
        ended_at=placement.ended_at, end_reason=placement.end_reason, placement=placement)
