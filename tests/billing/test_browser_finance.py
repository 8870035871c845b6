"""Finance's month in a real browser: read the statement, close the month, correct it after a rate
edit, export FOCUS; then a team lead reads their own team's spend and budget and nobody else's.

Debian's Chromium through Playwright, as tests/ui/test_browser.py; screenshots go to artifacts/.
"""

from datetime import UTC, datetime
from decimal import Decimal

import pytest

from billing.models import Adjustment, Budget, ClosedMonth, Rate
from billing.periods import Month
from billing.services import rate_save
from portal.models import Team
from tests.browser import shoot, sign_in
from ui.demo import demo_load

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]  # demo_load() seeds what it needs


def test_finance_closes_corrects_and_exports_and_a_lead_sees_only_their_team(page):
    demo_load()
    last = Month.of(datetime.now(UTC)).previous()
    sign_in(page, "fiona")

    page.goto(f"/billing/?month={last}")
    assert "Idle-cost policy: showback." in page.locator("#idle-policy").inner_text()
    assert "Reserved capacity (amortised)" in page.locator("#reserved").inner_text()
    shoot(page, "chargeback.png")

    page.click("text=Closing months")
    page.click(f"button:has-text('Close {last}')")
    page.wait_for_selector(f"text={last} is closed")
    billed = ClosedMonth.objects.get(month=last.first_day).total_cost

    rate = Rate.objects.get(gpu_model="H100-80GB", tier__name="reserved")  # a platform admin edits a rate
    rate.price_per_gpu_hour += Decimal("0.5000")
    rate_save(rate=rate)
    page.goto(f"/billing/?month={last}")
    assert f"${billed:,.2f}" in page.locator(".totals").first.inner_text()  # the closed month did not move

    page.goto("/billing/months/")
    row = page.locator(f"tr[data-month='{last}']")
    row.locator("input[name=reason]").fill("H100 reserved rate corrected after the vendor invoice")
    row.locator("button:has-text('Book corrections')").click()
    page.wait_for_selector("text=adjustment lines")
    assert Adjustment.objects.filter(corrects=last.first_day).exists()
    shoot(page, "closing-months.png")

    page.goto(f"/billing/?month={last.next()}")
    assert "H100 reserved rate corrected after the vendor invoice" in page.content()
    focus = page.request.get(f"/billing/export.focus.csv?month={last}")
    assert focus.status == 200 and focus.text().startswith("BillingAccountId,")

    Budget.objects.filter(team=Team.objects.get(name="search")).update(monthly_amount=Decimal("5000"))
    page.click("text=Sign out")
    sign_in(page, "alice")
    page.click("text=Team spend")
    page.wait_for_selector("#budget")
    assert "of $5,000.00" in page.locator("#budget").inner_text()
    shoot(page, "team-spend.png")
    assert page.goto("/billing/teams/vision/").status == 403
    assert page.goto("/billing/").status == 403
