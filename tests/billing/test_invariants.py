"""Property tests: random histories of starts, preemptions, requeues, node loss and dying workers.

A worker step is (1) the scheduler's write to placements, then (2) the billing call. A worker may
die between the two (then the step is re-run, or left for the periodic sync) or inside one
transaction (then it rolls back and is re-run). Whatever happens, the ledger must match the
placements exactly, and the report must add up to the intervals to the second.
"""

from datetime import timedelta
from decimal import Decimal

import pytest
from django.db import transaction
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from billing.ledger import usage_rows
from billing.models import UsageInterval
from billing.periods import Month, month_range
from billing.services import (
    usage_interval_close,
    usage_interval_open,
    usage_intervals_close_for_job,
    usage_intervals_close_for_node,
)
from billing.services import usage_intervals_sync as sync
from scheduling.models import Placement
from tests.billing.factories import T0, make_world, place

pytestmark = pytest.mark.django_db
CRASHES = ["none", "between", "between-left-for-sync", "inside"]


class WorkerDied(Exception):
    pass


operation = st.one_of(
    st.tuples(st.just("start"), st.integers(0, 3), st.integers(0, 5), st.sampled_from([250, 500, 750])),
    st.tuples(st.just("end"), st.integers(0, 3), st.sampled_from(["completed", "preempted", "failed"])),
    st.tuples(st.just("node-lost")),
)
history = st.lists(st.tuples(operation, st.integers(1, 900), st.sampled_from(CRASHES)), min_size=1, max_size=12)


def _targets(world):
    """0: the whole GPU, 1-3: the MIG instances, 4-5: shares of the shared GPU."""
    return [("whole", world.whole, None)] + [("mig", world.mig, m) for m in world.instances] + [
        ("share", world.shared, None)] * 2


def _free(world, kind, gpu, mig, share) -> bool:
    open_here = Placement.objects.filter(gpu=gpu, ended_at__isnull=True)
    if kind == "mig":
        return not open_here.filter(mig_instance=mig).exists()
    if kind == "share":
        return sum(p.share_milli for p in open_here) + share <= 1000
    return not open_here.exists()


def _run(step_one, step_two, crash):
    """Run a worker's two steps with the chosen way of dying, then re-run as a retry would."""
    if crash == "inside":
        try:
            with transaction.atomic():
                step_one()
                raise WorkerDied
        except WorkerDied:
            pass
    elif crash.startswith("between"):
        with transaction.atomic():
            step_one()
        if crash == "between-left-for-sync":
            return
    with transaction.atomic():
        step_one()
        step_two()


def _apply(world, op, at, crash):
    kind = op[0]
    if kind == "start":
        job = world.jobs[op[1]]
        target_kind, gpu, mig = _targets(world)[op[2]]
        if job.placements.filter(ended_at__isnull=True).exists() or not _free(world, target_kind, gpu, mig, op[3]):
            return

        def schedule():
            if not job.placements.filter(ended_at__isnull=True).exists():
                place(job, gpu, at, mig=mig, share=op[3] if target_kind == "share" else 1000)

        def bill():
            usage_interval_open(placement=job.placements.get(ended_at__isnull=True), at=at)

        _run(schedule, bill, crash)
    elif kind == "end":
        job, reason = world.jobs[op[1]], op[2]
        _run(lambda: job.placements.filter(ended_at__isnull=True).update(ended_at=at, end_reason=reason),
             lambda: usage_intervals_close_for_job(job=job, at=at, reason=reason), crash)
    else:
        _run(lambda: Placement.objects.filter(gpu__node=world.node, ended_at__isnull=True).update(
            ended_at=at, end_reason="node-lost"),
             lambda: usage_intervals_close_for_node(node=world.node, at=at, reason="node-lost"), crash)


def _check_ledger_matches_placements():
    placements = list(Placement.objects.all())
    intervals = {i.placement_id: i for i in UsageInterval.objects.all()}
    assert len(intervals) == UsageInterval.objects.count() == len(placements), "billed twice or lost"
    for placement in placements:
        interval = intervals[placement.pk]
        assert (interval.started_at, interval.ended_at) == (placement.started_at, placement.ended_at)


def _check_no_overlaps(intervals, end_of_time):
    by_job_gpu = {}
    for interval in intervals:
        by_job_gpu.setdefault((interval.job_id, interval.gpu_id), []).append(interval)
    for group in by_job_gpu.values():
        group.sort(key=lambda i: i.started_at)
        for earlier, later in zip(group, group[1:], strict=False):
            assert earlier.ended_at is not None and earlier.ended_at <= later.started_at
    for moment in {i.started_at for i in intervals}:
        for gpu in {i.gpu_id for i in intervals}:
            billed = sum(i.gpu_fraction for i in intervals if i.gpu_id == gpu and i.started_at <= moment
                         < (i.ended_at or end_of_time))
            assert billed <= 1


def _check_report_equals_intervals(intervals, now):
    expected = sum(i.gpu_fraction * Decimal(((i.ended_at or now) - i.started_at).total_seconds())
                   for i in intervals)
    first = Month.of(min((i.started_at for i in intervals), default=T0))
    reported = sum(row.gpu_seconds for month in month_range(first, Month.of(now))
                   for row in usage_rows(month, now=now))
    assert abs(reported - expected) < 1, (reported, expected)


@settings(max_examples=30, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(steps=history)
def test_random_histories_keep_every_ledger_invariant(steps):
    with transaction.atomic():
        world = make_world(name="h")
        at = T0
        for op, minutes, crash in steps:
            at += timedelta(minutes=minutes)
            _apply(world, op, at, crash)
        now = at + timedelta(minutes=30)
        sync(at=now)
        snapshot = list(UsageInterval.objects.order_by("id").values())
        sync(at=now)  # a second sweep, and repeated closes, change nothing
        for placement in Placement.objects.filter(ended_at__isnull=False):
            usage_interval_close(placement=placement, at=now, reason="late-retry")
        assert list(UsageInterval.objects.order_by("id").values()) == snapshot
        _check_ledger_matches_placements()
        intervals = list(UsageInterval.objects.all())
        _check_no_overlaps(intervals, now + timedelta(days=1))
        _check_report_equals_intervals(intervals, now)
        transaction.set_rollback(True)
