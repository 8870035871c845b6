"""The ledger services: fractions, idempotency, refusals, and repair after a dead worker."""

import threading
from datetime import timedelta
from decimal import Decimal

import pytest
from django.db import connection

from billing.models import UsageInterval
from billing.services import (
    BillingError,
    usage_interval_close,
    usage_interval_open,
    usage_intervals_close_for_job,
    usage_intervals_close_for_node,
    usage_intervals_sync,
)
from scheduling.defaults import defaults_ensure
from scheduling.models import CapacityTier, PriorityClass
from tests.billing.factories import T0, make_world, place

pytestmark = pytest.mark.django_db
HOUR = timedelta(hours=1)


@pytest.fixture
def world():
    return make_world()


def test_it_copies_the_tenancy_and_cluster_facts_into_the_interval(world):
    interval = usage_interval_open(placement=place(world.jobs[0], world.whole, T0), at=T0)
    assert (interval.team, interval.project, interval.business_unit) == (world.team, world.project,
                                                                         world.team.business_unit)
    assert (interval.node, interval.gpu, interval.gpu_model, interval.tier.name) == (
        world.node, world.whole, "H100-80GB", "reserved")
    assert interval.gpu_fraction == Decimal(1) and interval.is_open


def test_a_mig_instance_bills_compute_slices_over_seven_and_a_full_gpu_sums_to_one(world):
    fractions = [usage_interval_open(placement=place(job, world.mig, T0, mig=mig), at=T0).gpu_fraction
                 for job, mig in zip(world.jobs, world.instances, strict=False)]
    assert fractions == [Decimal("0.428571"), Decimal("0.285714"), Decimal("0.142857")]
    assert sum(fractions) <= 1


def test_a_shared_gpu_bills_its_share(world):
    assert usage_interval_open(placement=place(world.jobs[0], world.shared, T0, share=250),
                               at=T0).gpu_fraction == Decimal("0.25")


def test_open_and_close_are_idempotent(world):
    placement = place(world.jobs[0], world.whole, T0)
    first = usage_interval_open(placement=placement, at=T0)
    assert usage_interval_open(placement=placement, at=T0 + HOUR).pk == first.pk
    closed = usage_interval_close(placement=placement, at=T0 + HOUR, reason="completed")
    again = usage_interval_close(placement=placement, at=T0 + 5 * HOUR, reason="failed")
    assert (again.ended_at, again.end_reason) == (closed.ended_at, "completed") == (T0 + HOUR, "completed")
    assert UsageInterval.objects.count() == 1


def test_closing_a_job_twice_closes_once(world):
    for gpu in (world.whole, world.shared):
        usage_interval_open(placement=place(world.jobs[0], gpu, T0, share=1000 if gpu == world.whole else 500),
                            at=T0)
    assert usage_intervals_close_for_job(job=world.jobs[0], at=T0 + HOUR, reason="preempted") == 2
    assert usage_intervals_close_for_job(job=world.jobs[0], at=T0 + 2 * HOUR, reason="preempted") == 0
    assert set(UsageInterval.objects.values_list("ended_at", flat=True)) == {T0 + HOUR}


def test_a_gpu_is_never_billed_above_one(world):
    usage_interval_open(placement=place(world.jobs[0], world.shared, T0, share=700), at=T0)
    with pytest.raises(BillingError, match="at most 1"):
        usage_interval_open(placement=place(world.jobs[1], world.shared, T0 + HOUR, share=400), at=T0 + HOUR)


def test_a_job_is_never_billed_twice_for_one_gpu(world):
    usage_interval_open(placement=place(world.jobs[0], world.shared, T0, share=300), at=T0)
    with pytest.raises(BillingError, match="already billed"):
        usage_interval_open(placement=place(world.jobs[0], world.shared, T0 + HOUR, share=300), at=T0 + HOUR)


def test_a_requeued_job_opens_a_new_interval_after_the_old_one_closed(world):
    job = world.jobs[0]
    first = place(job, world.whole, T0)
    usage_interval_open(placement=first, at=T0)
    first.ended_at, first.end_reason = T0 + HOUR, "preempted"
    first.save()
    usage_intervals_close_for_job(job=job, at=T0 + HOUR, reason="preempted")
    usage_interval_open(placement=place(job, world.whole, T0 + HOUR), at=T0 + HOUR)
    assert list(UsageInterval.objects.order_by("started_at").values_list("end_reason", flat=True)) == ["preempted", ""]


def test_a_close_for_a_placement_never_opened_bills_it_from_its_start(world):
    placement = place(world.jobs[0], world.whole, T0)  # the opening worker died
    interval = usage_interval_close(placement=placement, at=T0 + 2 * HOUR, reason="completed")
    assert (interval.started_at, interval.ended_at) == (T0, T0 + 2 * HOUR)


def test_node_loss_closes_everything_on_the_node(world):
    usage_interval_open(placement=place(world.jobs[0], world.whole, T0), at=T0)
    usage_interval_open(placement=place(world.jobs[1], world.mig, T0, mig=world.instances[0]), at=T0)
    assert usage_intervals_close_for_node(node=world.node, at=T0 + HOUR) == 2
    assert set(UsageInterval.objects.values_list("end_reason", flat=True)) == {"node-lost"}


def test_sync_repairs_what_dead_workers_left(world):
    never_opened = place(world.jobs[0], world.whole, T0)
    ended = place(world.jobs[1], world.shared, T0, share=500)
    usage_interval_open(placement=ended, at=T0)
    ended.ended_at, ended.end_reason = T0 + HOUR, "completed"
    ended.save()  # the placement ended but the closing worker died
    assert usage_intervals_sync(at=T0 + 2 * HOUR) == (1, 1)
    assert usage_intervals_sync(at=T0 + 3 * HOUR) == (0, 0)
    assert UsageInterval.objects.get(placement=never_opened).started_at == T0
    assert UsageInterval.objects.get(placement=ended).ended_at == T0 + HOUR


@pytest.fixture
def seeded(transactional_db):
    """The tiers and priority classes a migration made, which an earlier transactional test's flush
    removed. (Not serialized_rollback: after any other transactional test's flush re-created the
    content types, restoring them failed on their unique key, as under xdist's test order.)"""
    defaults_ensure(CapacityTier, PriorityClass)


@pytest.mark.django_db(transaction=True)
def test_concurrent_opens_of_one_placement_make_one_interval(seeded):
    world = make_world(name="race")
    placement = place(world.jobs[0], world.whole, T0)
    errors = []

    def open_it():
        try:
            usage_interval_open(placement=placement, at=T0)
        except Exception as error:  # noqa: BLE001 - reported below
            errors.append(error)
        finally:
            connection.close()

    threads = [threading.Thread(target=open_it) for _ in range(4)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert errors == [] and UsageInterval.objects.filter(placement=placement).count() == 1


@pytest.mark.django_db(transaction=True)
def test_concurrent_opens_on_one_gpu_never_bill_it_above_one(seeded):
    world = make_world(name="share")
    placements = [place(job, world.shared, T0, share=600) for job in world.jobs[:3]]
    outcomes = []

    def open_it(placement):
        try:
            usage_interval_open(placement=placement, at=T0)
            outcomes.append("opened")
        except BillingError:
            outcomes.append("refused")
        finally:
            connection.close()

    threads = [threading.Thread(target=open_it, args=(p,)) for p in placements]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert sorted(outcomes) == ["opened", "refused", "refused"]
