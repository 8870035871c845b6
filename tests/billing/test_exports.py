"""CSV (streamed, stable columns, ISO dates) and the PDF statement."""

import csv
import io
import re
from datetime import UTC, datetime
from decimal import Decimal

import pytest
from django.urls import reverse

from billing.chargeback import chargeback_report
from billing.exports import CSV_COLUMNS
from billing.periods import Month
from portal.models import BusinessUnit

pytestmark = pytest.mark.django_db
LAST_MONTH = Month.of(datetime.now(UTC)).previous()


def read_csv(response):
    assert response.streaming and response["Content-Type"].startswith("text/csv")
    return list(csv.DictReader(io.StringIO(b"".join(response.streaming_content).decode())))


def test_the_csv_has_a_header_one_row_per_group_and_totals_that_match_the_report(signed_in):
    client = signed_in("fiona")
    rows = read_csv(client.get(reverse("billing:csv"), {"month": str(LAST_MONTH)}))
    assert list(rows[0]) == CSV_COLUMNS
    keys = [(r["month"], r["business_unit"], r["team"], r["project"], r["tier"], r["gpu_model"]) for r in rows]
    assert len(keys) == len(set(keys))
    report = chargeback_report(LAST_MONTH)
    assert sum(Decimal(r["cost"]) for r in rows) == report.total.cost
    assert abs(sum(Decimal(r["gpu_hours"]) for r in rows) - report.total.gpu_hours) < Decimal("0.001")


def test_the_csv_uses_iso_dates_and_plain_numbers(signed_in):
    rows = read_csv(signed_in("fiona").get(reverse("billing:csv"), {"month": str(LAST_MONTH)}))
    for row in rows:
        assert re.fullmatch(r"\d{4}-\d{2}", row["month"])
        assert row["period_start"] == LAST_MONTH.first_day.isoformat()
        assert re.fullmatch(r"\d{4}-\d{2}-\d{2}", row["period_end"])
        assert re.fullmatch(r"\d+\.\d{2}", row["cost"]) and re.fullmatch(r"\d+\.\d{6}", row["gpu_hours"])
        assert row["currency"] == "USD"


def test_a_range_export_covers_every_month(signed_in):
    first = LAST_MONTH.previous()
    response = signed_in("fiona").get(reverse("billing:csv"), {"from": str(first), "to": str(LAST_MONTH)})
    assert "chargeback-" in response["Content-Disposition"]
    assert {row["month"] for row in read_csv(response)} == {str(first), str(LAST_MONTH)}


def test_the_pdf_statement_renders_with_pages(signed_in):
    unit = BusinessUnit.objects.get(name="Consumer")
    response = signed_in("fiona").get(reverse("billing:statement"),
                                      {"month": str(LAST_MONTH), "business_unit": unit.pk})
    assert response.status_code == 200 and response["Content-Type"] == "application/pdf"
    assert response.content.startswith(b"%PDF")
    assert len(re.findall(rb"/Type\s*/Page[^s]", response.content)) >= 1


def test_a_statement_for_a_unit_without_usage_still_renders(signed_in):
    unit = BusinessUnit.objects.create(name="Idle unit")
    response = signed_in("fiona").get(reverse("billing:statement"),
                                      {"month": str(LAST_MONTH), "business_unit": unit.pk})
    assert response.status_code == 200 and response.content.startswith(b"%PDF")
