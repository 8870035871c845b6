"""Writes to the ledger and the rate card (HackSoft-style services: keyword-only, `<entity>_<action>`).

The scheduler's apply step and the Celery workers call these inside their own transactions. Each
one is idempotent: a retried task, or a worker re-run after it died half-way, changes nothing twice.
Placements are the source of truth; `usage_intervals_sync` rebuilds whatever a dead worker missed.
"""

from datetime import datetime
from decimal import Decimal

from django.db import transaction
from django.db.models import F, OuterRef, Q, Subquery, Value
from django.db.models.functions import Coalesce, Greatest

from billing.models import Rate, UsageInterval
from scheduling.models import CapacityTier, Gpu, Placement


class BillingError(Exception):
    """A write that would break a ledger invariant; the message says which."""


def placement_gpu_fraction(placement: Placement) -> Decimal:
    """GPU units a placement is billed for (see Placement.billed_fraction)."""
    return placement.billed_fraction()


def _check_room(placement: Placement, fraction: Decimal, at: datetime) -> None:
    """Refuse an interval that would bill a job twice for a GPU, or bill a GPU above 1.

    The new interval runs from `at` to the placement's end (open-ended while it runs); only the
    intervals on the same GPU that meet that window count, so a late, back-dated open still fits.
    """
    until = placement.ended_at
    meeting = UsageInterval.objects.filter(Q(ended_at__isnull=True) | Q(ended_at__gt=at), gpu_id=placement.gpu_id)
    if until is not None:
        meeting = meeting.filter(started_at__lt=until)
    meeting = list(meeting.only("job_id", "gpu_fraction", "started_at", "ended_at"))
    if any(other.job_id == placement.job_id for other in meeting):
        raise BillingError(f"Job {placement.job_id} is already billed on GPU {placement.gpu_id} "
                           f"at {at:%Y-%m-%d %H:%M:%S}.")
    # The billed fraction is highest at one of the moments something starts inside the window.
    for moment in {at, *(other.started_at for other in meeting if other.started_at > at)}:
        billed = sum((o.gpu_fraction for o in meeting if o.started_at <= moment and (
            o.ended_at is None or o.ended_at > moment)), Decimal(0))
        if billed + fraction > 1:
            raise BillingError(f"GPU {placement.gpu_id} would be billed {billed + fraction} GPUs at "
                               f"{moment:%Y-%m-%d %H:%M:%S}; at most 1.")


def _close_stale(gpu_id: int) -> None:
    """Close intervals on the GPU whose placement has ended but whose closing worker died."""
    stale = UsageInterval.objects.filter(gpu_id=gpu_id, ended_at__isnull=True, placement__ended_at__isnull=False)
    for interval in stale.select_related("placement").order_by("id"):
        usage_interval_close(placement=interval.placement, at=interval.placement.ended_at,
                             reason=interval.placement.end_reason or "ended")


@transaction.atomic
def usage_interval_open(*, placement: Placement, at: datetime) -> UsageInterval:
    """Open the interval of a placement that started at `at`; returns the existing one on a repeat."""
    # Locking the placement serialises open/close of one placement; locking the GPU serialises the
    # room check for everything that shares it.
    placement = Placement.objects.select_for_update().get(pk=placement.pk)
    existing = UsageInterval.objects.filter(placement=placement).first()
    if existing is not None:
        return existing
    if placement.ended_at is not None and placement.ended_at < at:
        raise BillingError(f"Placement {placement.pk} ended before {at:%Y-%m-%d %H:%M:%S}.")
    gpu = Gpu.objects.select_for_update().select_related("node").get(pk=placement.gpu_id)
    placement = Placement.objects.select_related("job__team", "job__project", "mig_instance").get(pk=placement.pk)
    fraction = placement_gpu_fraction(placement)
    _close_stale(gpu.pk)
    _check_room(placement, fraction, at)
    job = placement.job
    return UsageInterval.objects.create(
        job=job, team_id=job.team_id, project_id=job.project_id, business_unit_id=job.team.business_unit_id,
        node_id=gpu.node_id, gpu=gpu, gpu_model=gpu.model, tier_id=gpu.node.tier_id, gpu_fraction=fraction,
        started_at=at, placement=placement)


@transaction.atomic
def usage_interval_close(*, placement: Placement, at: datetime, reason: str) -> UsageInterval:
    """Close the interval of a placement that ended at `at`; the first close wins, repeats change nothing.

    If the interval was never opened (the worker died before it could), it is opened from the
    placement's start first, so the time is billed rather than lost.
    """
    interval = UsageInterval.objects.select_for_update().filter(placement_id=placement.pk).first()
    if interval is None:
        usage_interval_open(placement=placement, at=Placement.objects.get(pk=placement.pk).started_at)
        interval = UsageInterval.objects.select_for_update().get(placement_id=placement.pk)
    if interval.ended_at is not None:
        return interval
    # The placement's own end wins over a late retry's `at`; a close stamped before the start
    # (clock skew) bills nothing rather than negative time.
    ended = Placement.objects.values_list("ended_at", flat=True).get(pk=placement.pk) or at
    interval.ended_at = max(ended, interval.started_at)
    interval.end_reason = reason[:30]
    interval.save(update_fields=["ended_at", "end_reason"])
    return interval


@transaction.atomic
def usage_intervals_move_start(*, placement_ids, at: datetime) -> int:
    """Open intervals of placements whose pod was bound only at `at` start then: no second is billed
    before a pod held the GPU."""
    return UsageInterval.objects.filter(placement_id__in=placement_ids, ended_at__isnull=True,
                                        started_at__lt=at).update(started_at=at)


@transaction.atomic
def usage_intervals_close_for_job(*, job, at: datetime, reason: str) -> int:
    """Close every open interval of a job (completion, cancel, preemption, failure); returns how many."""
    for placement in Placement.objects.filter(job=job, usage_interval__isnull=True):
        usage_interval_open(placement=placement, at=placement.started_at)
    return _close_open(UsageInterval.objects.filter(job=job), at, reason)


@transaction.atomic
def usage_intervals_close_for_node(*, node, at: datetime, reason: str = "node-lost") -> int:
    """Close every open interval on a node (node lost, spot reclaim); returns how many."""
    return _close_open(UsageInterval.objects.filter(node=node), at, reason)


def _close_open(intervals, at: datetime, reason: str) -> int:
    # One UPDATE: row locks make a concurrent close wait, then skip the rows already closed. A
    # placement that already has an end is the truth (a late retry must not bill past it).
    placement_end = Subquery(Placement.objects.filter(pk=OuterRef("placement_id")).values("ended_at")[:1])
    return intervals.filter(ended_at__isnull=True).update(
        ended_at=Greatest(F("started_at"), Coalesce(placement_end, Value(at))), end_reason=reason[:30])


@transaction.atomic
def usage_intervals_sync(*, at: datetime) -> tuple[int, int]:
    """Bring the ledger in line with placements (a periodic safety net); returns (opened, closed)."""
    opened = closed = 0
    for placement in Placement.objects.filter(usage_interval__isnull=True, started_at__lte=at).order_by("id"):
        usage_interval_open(placement=placement, at=placement.started_at)
        opened += 1
    ended = UsageInterval.objects.filter(ended_at__isnull=True, placement__ended_at__isnull=False)
    for interval in ended.select_related("placement").order_by("id"):
        usage_interval_close(placement=interval.placement, at=interval.placement.ended_at,
                             reason=interval.placement.end_reason or "ended")
        closed += 1
    return opened, closed


@transaction.atomic
def rate_save(*, rate: Rate) -> Rate:
    """Validate and save a rate; overlapping validity for the same model × tier is refused."""
    # The tier row is the lock: two admins adding overlapping rates at once cannot both pass.
    CapacityTier.objects.select_for_update().get(pk=rate.tier_id)
    rate.full_clean()
    rate.save()
    return rate
