"""Closing a month freezes it: a rate edit never rewrites it; corrections are adjustment lines later."""

from datetime import UTC, date, datetime, timedelta
from decimal import Decimal

import pytest
from django.contrib.auth.models import Group, User
from django.core.management import call_command
from django.core.management.base import CommandError
from django.urls import reverse

from billing.chargeback import chargeback_report
from billing.closing import ClosingError, adjustment_create, corrections, corrections_book, month_close
from billing.exports import csv_lines
from billing.models import Adjustment, ClosedMonth, LineKind, Rate
from billing.periods import Month
from billing.services import rate_save, usage_interval_close, usage_interval_open
from portal.models import FINANCE_GROUP
from tests.billing.factories import make_world, place

pytestmark = pytest.mark.django_db
FEBRUARY, MARCH = Month(2026, 2), Month(2026, 3)
NOW = datetime(2026, 3, 10, tzinfo=UTC)


@pytest.fixture
def world():
    world = make_world(price="2.0000", tier="on-demand")  # no reserved capacity: no idle lines here
    start = datetime(2026, 2, 10, tzinfo=UTC)
    placement = place(world.jobs[0], world.whole, start)
    usage_interval_open(placement=placement, at=start)
    placement.ended_at = start + timedelta(hours=100)
    placement.save()
    usage_interval_close(placement=placement, at=placement.ended_at, reason="completed")
    return world


@pytest.fixture
def fiona():
    user = User.objects.create_user("fiona-test", password="pw-for-tests-only")
    user.groups.add(Group.objects.get(name=FINANCE_GROUP))
    return user


def raise_the_rate():
    rate = Rate.objects.get(gpu_model="H100-80GB", tier__name="on-demand")
    rate.price_per_gpu_hour = Decimal("3.0000")
    rate_save(rate=rate)


def test_editing_a_rate_never_rewrites_a_closed_month(world, fiona):
    assert chargeback_report(FEBRUARY, now=NOW).total.cost == Decimal("200.00")
    month_close(month=FEBRUARY, by=fiona, now=NOW)
    raise_the_rate()
    report = chargeback_report(FEBRUARY, now=NOW)
    assert report.total.cost == Decimal("200.00") and report.closed.closed_by == fiona
    csv_costs = [line.split(",")[11] for line in list(csv_lines([FEBRUARY], now=NOW))[1:]]
    assert csv_costs == ["200.00"]


def test_a_correction_is_an_adjustment_line_in_the_next_open_month_with_who_and_why(world, fiona):
    month_close(month=FEBRUARY, by=fiona, now=NOW)
    raise_the_rate()
    [correction] = corrections(FEBRUARY, now=NOW)
    assert (correction.billed, correction.now, correction.difference) == (Decimal("200.00"), Decimal("300.00"),
                                                                         Decimal("100.00"))
    [adjustment] = corrections_book(month=FEBRUARY, reason="on-demand H100 price corrected", by=fiona, now=NOW)
    assert (adjustment.month, adjustment.corrects) == (MARCH.first_day, FEBRUARY.first_day)
    assert corrections(FEBRUARY, now=NOW) == []  # booked once, not again
    march = chargeback_report(MARCH, now=NOW)
    [line] = [row for project in march.total.walk() for row in project.rows]
    assert line.kind == LineKind.ADJUSTMENT and line.cost == Decimal("100.00")
    assert "2026-02" in line.note and "fiona-test" in line.note and "on-demand H100 price corrected" in line.note
    assert march.total.cost == Decimal("100.00")
    assert chargeback_report(FEBRUARY, now=NOW).total.cost == Decimal("200.00")


def test_closing_a_month_with_an_adjustment_freezes_the_adjustment_too(world, fiona):
    month_close(month=FEBRUARY, by=fiona, now=NOW)
    adjustment_create(corrects=FEBRUARY, project=world.project, amount=Decimal("-12.50"), reason="credit", by=fiona)
    month_close(month=MARCH, by=fiona, now=datetime(2026, 4, 2, tzinfo=UTC))
    Adjustment.objects.all().delete()  # even if the row went away, the closed statement keeps it
    assert chargeback_report(MARCH, now=NOW).total.cost == Decimal("-12.50")


@pytest.mark.parametrize("month, message", [(MARCH, "has not ended"), (Month(2026, 1), "close in order"),
                                            (FEBRUARY, "already closed")])
def test_closing_refuses_an_unfinished_an_out_of_order_or_a_closed_month(world, month, message):
    month_close(month=FEBRUARY, now=NOW)
    with pytest.raises(ClosingError, match=message):
        month_close(month=month, now=NOW)
    assert ClosedMonth.objects.count() == 1


def test_adjustments_need_a_closed_month_a_reason_and_an_amount(world, fiona):
    with pytest.raises(ClosingError, match="not closed"):
        adjustment_create(corrects=FEBRUARY, project=world.project, amount=Decimal(1), reason="x", by=fiona)
    month_close(month=FEBRUARY, now=NOW)
    with pytest.raises(ClosingError, match="reason"):
        adjustment_create(corrects=FEBRUARY, project=world.project, amount=Decimal(1), reason=" ", by=fiona)
    with pytest.raises(ClosingError, match=r"\$0.00"):
        adjustment_create(corrects=FEBRUARY, project=world.project, amount=Decimal(0), reason="x", by=fiona)


def test_the_command_closes_a_month_and_names_who(world, fiona, capsys):
    call_command("close_month", "2026-02", "--by", "fiona-test")
    assert "$200.00" in capsys.readouterr().out
    assert ClosedMonth.objects.get(month=date(2026, 2, 1)).closed_by == fiona
    with pytest.raises(CommandError, match="already closed"):
        call_command("close_month", "2026-02")
    with pytest.raises(CommandError, match="not a month"):
        call_command("close_month", "Feb")


def test_finance_closes_and_corrects_on_the_page_and_others_may_not(world, fiona, client):
    bob = User.objects.create_user("bob-test", password="pw-for-tests-only")
    client.force_login(bob)
    assert client.post(reverse("billing:close"), {"month": "2026-02"}).status_code == 403
    client.force_login(fiona)
    assert client.get(reverse("billing:months")).status_code == 200
    assert client.post(reverse("billing:close"), {"month": "2026-02"}).status_code == 302
    assert client.post(reverse("billing:close"), {"month": "2026-02"}).status_code == 400
    raise_the_rate()
    page = client.get(reverse("billing:months")).content.decode()
    assert "Book corrections" in page and "$100.00" in page
    assert client.post(reverse("billing:corrections"), {"month": "2026-02", "reason": ""}).status_code == 400
    assert client.post(reverse("billing:corrections"), {"month": "2026-02", "reason": "rate fix"}).status_code == 302
    assert Adjustment.objects.get().created_by == fiona


def test_the_admin_warns_that_a_rate_edit_leaves_closed_months_as_billed(world, admin_client):
    month_close(month=FEBRUARY, now=NOW)
    rate = Rate.objects.get(gpu_model="H100-80GB", tier__name="on-demand")
    url = reverse("admin:billing_rate_change", args=[rate.pk])
    response = admin_client.post(url, {"gpu_model": rate.gpu_model, "tier": rate.tier_id, "price_per_gpu_hour": "3.0",
                                       "valid_from": rate.valid_from.isoformat(), "valid_to": "", "note": ""},
                                 follow=True)
    assert "closed months (2026-02)" in response.content.decode()
    assert chargeback_report(FEBRUARY, now=NOW).total.cost == Decimal("200.00")
