"""A month still running is compared with last month up to the same moment, never the whole month."""

from datetime import UTC, datetime, timedelta
from decimal import Decimal

import pytest

from billing.chargeback import chargeback_report
from billing.periods import Month
from billing.services import usage_interval_close, usage_interval_open
from tests.billing.factories import make_world, place

pytestmark = pytest.mark.django_db
NOW = datetime(2026, 3, 10, 12, tzinfo=UTC)


def run(job, gpu, start, hours):
    placement = place(job, gpu, start)
    usage_interval_open(placement=placement, at=start)
    placement.ended_at = start + timedelta(hours=hours)
    placement.save()
    usage_interval_close(placement=placement, at=placement.ended_at, reason="completed")


def test_month_to_date_is_compared_with_the_same_days_of_last_month():
    world = make_world(price="1.0000")
    run(world.jobs[0], world.whole, datetime(2026, 2, 2, tzinfo=UTC), 10)  # inside Feb 1–10 12:00
    run(world.jobs[1], world.whole, datetime(2026, 2, 20, tzinfo=UTC), 200)  # after: not comparable yet
    run(world.jobs[2], world.whole, datetime(2026, 3, 2, tzinfo=UTC), 20)
    report = chargeback_report(Month(2026, 3), now=NOW)
    [team] = [t for unit in report.units for t in unit.children.values() if t.name == "t-team"]
    assert team.cost == Decimal("20.00") and team.previous_cost == Decimal("10.00") and team.change == Decimal("100.0")
    assert report.compared_until == datetime(2026, 2, 10, 12, tzinfo=UTC)
    assert any("same point" in note for note in report.notes)
    whole = chargeback_report(Month(2026, 2), now=NOW)
    assert whole.compared_until is None
