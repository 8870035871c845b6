"""A job's cost so far, as its detail page shows it: GPU-hours × the rate in force."""

from datetime import timedelta
from decimal import Decimal

import pytest

from billing.ledger import job_cost
from billing.services import usage_interval_close, usage_interval_open
from tests.billing.factories import T0, make_world, place

pytestmark = pytest.mark.django_db


def test_a_job_costs_its_gpu_hours_at_the_rate_in_force():
    world = make_world(price="3.6400")
    job = world.jobs[0]
    whole = place(job, world.whole, T0)
    usage_interval_open(placement=whole, at=T0)
    usage_interval_close(placement=whole, at=T0 + timedelta(hours=2), reason="completed")
    slice_ = place(job, world.mig, T0, mig=world.instances[0])  # 3g: 3/7 of a GPU, still open
    usage_interval_open(placement=slice_, at=T0)
    cost = job_cost(job, now=T0 + timedelta(hours=7))
    assert cost == (Decimal("2") * Decimal("3.64") + Decimal(3) / 7 * 7 * Decimal("3.64")).quantize(Decimal("0.01"))


def test_a_job_that_never_ran_has_no_cost_yet():
    world = make_world()
    assert job_cost(world.jobs[0]) is None
