"""The chargeback report: splits at month boundaries and rate changes, totals that add up."""

from datetime import UTC, date, datetime, timedelta
from decimal import Decimal

import pytest

from billing.chargeback import chargeback_report
from billing.ledger import NoRateError, usage_rows
from billing.models import Rate
from billing.periods import Month, PeriodError
from billing.services import usage_interval_close, usage_interval_open
from tests.billing.factories import make_world, place

pytestmark = pytest.mark.django_db
NOW = datetime(2026, 3, 10, tzinfo=UTC)


def interval(job, gpu, start, hours, **kwargs):
    placement = place(job, gpu, start, **kwargs)
    usage_interval_open(placement=placement, at=start)
    if hours is not None:
        placement.ended_at = start + timedelta(hours=hours)
        placement.save()
        usage_interval_close(placement=placement, at=placement.ended_at, reason="completed")


def test_an_interval_across_a_month_boundary_is_split_exactly():
    world = make_world(price="2.0000")
    interval(world.jobs[0], world.whole, datetime(2026, 1, 31, 22, tzinfo=UTC), 5)
    january, february = (list(usage_rows(Month(2026, m), now=NOW)) for m in (1, 2))
    assert january[0].gpu_seconds == 2 * 3600 and january[0].cost == Decimal("4.00")
    assert february[0].gpu_seconds == 3 * 3600 and february[0].cost == Decimal("6.00")


def test_an_interval_across_a_rate_change_is_priced_at_each_rate():
    world = make_world(price="2.0000")
    Rate.objects.update(valid_to=date(2026, 2, 15))
    Rate.objects.create(gpu_model="H100-80GB", tier=world.node.tier, price_per_gpu_hour=Decimal("3.0000"),
                        valid_from=date(2026, 2, 15))
    interval(world.jobs[0], world.mig, datetime(2026, 2, 14, 20, tzinfo=UTC), 10, mig=world.instances[0])
    [row] = usage_rows(Month(2026, 2), now=NOW)
    fraction = Decimal("0.428571")
    assert row.gpu_seconds == fraction * 10 * 3600
    assert row.cost == (fraction * (4 * 2 + 6 * 3)).quantize(Decimal("0.01"))


def test_an_open_interval_counts_until_now():
    world = make_world(price="1.0000")
    interval(world.jobs[0], world.shared, datetime(2026, 3, 9, tzinfo=UTC), None, share=500)
    [row] = usage_rows(Month(2026, 3), now=NOW)
    assert row.gpu_seconds == Decimal("0.5") * 24 * 3600


def test_totals_add_up_at_every_level(demo):
    report = chargeback_report(Month.of(datetime.now(UTC)).previous())
    assert report.total.cost > 0
    for node in report.total.walk():
        if node.children:
            assert node.cost == sum(child.cost for child in node.children.values())
            assert node.gpu_seconds == sum(child.gpu_seconds for child in node.children.values())
        else:
            assert node.cost == sum(row.cost for row in node.rows)
    assert sum(n.cost for n in report.by_tier) == sum(n.cost for n in report.by_model) == report.total.cost
    assert abs(sum(unit.share for unit in report.units) - 100) <= Decimal("0.2")


def test_month_over_month_change_and_the_chart_agree_with_the_tables(demo):
    month = Month.of(datetime.now(UTC)).previous()
    report = chargeback_report(month)
    previous = chargeback_report(month.previous())
    for unit in report.units:
        assert unit.previous_cost == previous.total.children[unit.name].cost
        assert report.chart["series"][unit.name][-1] == str(unit.cost)
        assert report.chart["series"][unit.name][-2] == str(unit.previous_cost)


def test_a_month_with_usage_but_no_rate_in_force_is_a_clear_error():
    world = make_world()
    Rate.objects.update(valid_from=date(2026, 2, 10))
    interval(world.jobs[0], world.whole, datetime(2026, 2, 3, tzinfo=UTC), 2)
    with pytest.raises(NoRateError, match=r"No rate is in force for H100-80GB × reserved from 2026-02-03"):
        list(usage_rows(Month(2026, 2), now=NOW))


def test_a_future_month_is_refused():
    with pytest.raises(PeriodError, match="has not started"):
        chargeback_report(Month(2099, 1), now=NOW)
