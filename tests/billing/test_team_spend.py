"""Team leads see their own team's spend and budget, never another team's; budgets alert once per threshold."""

import csv
import io
from datetime import UTC, datetime, timedelta
from decimal import Decimal

import pytest
from django.contrib.auth.models import User
from django.core import mail
from django.urls import reverse

from billing.budgets import budget_alerts_send, budget_statuses
from billing.chargeback import chargeback_report
from billing.focus import FOCUS_COLUMNS
from billing.models import Budget, BudgetAlert
from billing.periods import Month
from billing.services import usage_interval_close, usage_interval_open
from portal.models import BusinessUnit, Membership, Project, Team
from tests.billing.factories import make_world, place

pytestmark = pytest.mark.django_db
LAST_MONTH = Month.of(datetime.now(UTC)).previous()


def team_page(client, team, **params):
    return client.get(reverse("billing:team", kwargs={"team": team}), params)


@pytest.mark.parametrize("username, own, other", [
    ("alice", 200, 403),   # lead of search: her team, not vision
    ("bob", 403, 403),     # member of search
    ("carol", 403, 403),   # viewer
    ("fiona", 200, 200),   # finance sees every team
])
def test_a_lead_sees_her_own_teams_spend_and_never_another_teams(signed_in, username, own, other):
    client = signed_in(username)
    mine = team_page(client, "search", month=str(LAST_MONTH))
    assert (mine.status_code, team_page(client, "vision").status_code) == (own, other)
    if own == 200:
        page = mine.content.decode()
        assert "Spend of search" in page and "Idle-cost policy" in page
        assert "llm-platform" not in page and "recsys" not in page  # other teams never appear


def test_the_team_page_matches_the_chargeback_and_refuses_bad_input(signed_in):
    client = signed_in("alice")
    report = chargeback_report(LAST_MONTH)
    [search] = [team for unit in report.units for team in unit.children.values() if team.name == "search"]
    assert f"${search.cost:,.2f}" in team_page(client, "search", month=str(LAST_MONTH)).content.decode()
    assert team_page(client, "search", month="2026-13").status_code == 400
    assert team_page(client, "no-such-team").status_code == 404


def test_anonymous_visitors_sign_in_first(client, demo):
    response = team_page(client, "search")
    assert response.status_code == 302 and reverse("login") in response["Location"]


@pytest.fixture
def spent():
    """t-team used 100 GPU-hours on demand at $2 (= $200) from 10 February; it is now 20 February."""
    world = make_world(price="2.0000", tier="on-demand")
    start = datetime(2026, 2, 10, tzinfo=UTC)
    placement = place(world.jobs[0], world.whole, start)
    usage_interval_open(placement=placement, at=start)
    placement.ended_at = start + timedelta(hours=100)
    placement.save()
    usage_interval_close(placement=placement, at=placement.ended_at, reason="completed")
    lead = User.objects.create_user("lead-test", email="lead@example.org")
    Membership.objects.create(user=lead, team=world.team, role=Membership.Role.LEAD)
    return world


NOW = datetime(2026, 2, 20, tzinfo=UTC)


@pytest.fixture
def alerts_sent(django_capture_on_commit_callbacks):
    """budget_alerts_send, its notices delivered as a worker would after the commit (tasks in-process)."""
    from celery import current_app

    def send(**kwargs):
        before = current_app.conf.task_always_eager
        current_app.conf.task_always_eager = True
        try:
            with django_capture_on_commit_callbacks(execute=True):
                return budget_alerts_send(**kwargs)
        finally:
            current_app.conf.task_always_eager = before

    return send


def test_budget_status_and_alerts_once_per_threshold(spent, alerts_sent):
    budget = Budget.objects.create(team=spent.team, monthly_amount=Decimal("250"), thresholds="50,80,100")
    [status] = budget_statuses(Month(2026, 2), now=NOW)
    assert (status.spent, status.percent, status.crossed, status.state) == (Decimal("200.00"), Decimal("80.0"),
                                                                         [50, 80], "warning")
    assert status.projected == (Decimal(200) / Decimal(str(round(19 / 28, 6)))).quantize(Decimal("0.01"))  # pace
    alerts = alerts_sent(now=NOW)
    assert sorted(a.threshold for a in alerts) == [50, 80]
    assert [m.to for m in mail.outbox] == [["lead@example.org"]] * 2 and "80%" in mail.outbox[1].subject
    assert alerts_sent(now=NOW) == [] and len(mail.outbox) == 2  # never twice
    budget.monthly_amount = Decimal("150")
    budget.save()
    assert [a.threshold for a in alerts_sent(now=NOW)] == [100]
    assert BudgetAlert.objects.count() == 3


def test_a_business_unit_budget_alerts_finance(spent, alerts_sent):
    from django.contrib.auth.models import Group

    from portal.models import FINANCE_GROUP

    fiona = User.objects.create_user("fiona-test", email="finance@example.org")
    fiona.groups.add(Group.objects.get(name=FINANCE_GROUP))
    Budget.objects.create(business_unit=spent.team.business_unit, monthly_amount=Decimal("100"), thresholds="90")
    [alert] = alerts_sent(now=NOW)
    assert alert.recipients == "finance@example.org" and mail.outbox[0].to == ["finance@example.org"]


def test_a_team_budget_alert_is_also_posted_to_the_teams_webhook(spent, alerts_sent, settings):
    from notifications.models import TeamWebhook
    from tests.notifications.conftest import Receiver

    settings.TESSERA_WEBHOOKS_TO_PRIVATE = True  # the receiver listens on loopback
    receiver = Receiver()
    try:
        TeamWebhook.objects.create(team=spent.team, name="chat", url=receiver.url, events=["budget"])
        Budget.objects.create(team=spent.team, monthly_amount=Decimal("250"), thresholds="50")
        alerts_sent(now=NOW)
    finally:
        receiver.server.shutdown()
        receiver.server.server_close()
    assert len(receiver.posts) == 1 and "passed 50% of its GPU budget" in receiver.posts[0]["json"]["text"]
    assert len(mail.outbox) == 1


def test_a_budget_belongs_to_exactly_one_team_or_unit(spent):
    from django.core.exceptions import ValidationError

    unit = BusinessUnit.objects.get(pk=spent.team.business_unit_id)
    with pytest.raises(ValidationError, match="exactly one"):
        Budget(team=spent.team, business_unit=unit, monthly_amount=Decimal(1)).full_clean()
    with pytest.raises(ValidationError, match="whole percentages"):
        Budget(team=spent.team, monthly_amount=Decimal(1), thresholds="50,lots").full_clean()


def test_every_project_has_a_cost_code():
    team = Team.objects.create(name="newteam", business_unit=BusinessUnit.objects.create(name="U"))
    assert Project.objects.create(team=team, name="speech lab").cost_code == "NEWTEAM-SPEECH-LAB"
    assert Project.objects.create(team=team, name="asr", cost_code="CC-77").cost_code == "CC-77"


def test_the_focus_export_has_the_spec_columns_and_the_report_total(signed_in):
    client = signed_in("fiona")
    response = client.get(reverse("billing:focus"), {"month": str(LAST_MONTH)})
    rows = list(csv.DictReader(io.StringIO(b"".join(response.streaming_content).decode())))
    assert list(rows[0]) == FOCUS_COLUMNS
    assert sum(Decimal(r["BilledCost"]) for r in rows) == chargeback_report(LAST_MONTH).total.cost
    assert {r["ChargeCategory"] for r in rows} <= {"Usage", "Adjustment"}
    assert {r["CommitmentDiscountStatus"] for r in rows if r["x_CostCode"] != "SHOWBACK"} >= {"Used", ""}
    assert {r["CommitmentDiscountStatus"] for r in rows if r["x_CostCode"] == "SHOWBACK"} == {"Unused"}
    assert all(r["x_CostCode"] and r["SubAccountId"] for r in rows)
    assert signed_in("alice").get(reverse("billing:focus")).status_code == 403
