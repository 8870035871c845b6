"""Idle reserved capacity is in every total, placed as the policy in settings says, and stated."""

import base64
import re
import zlib
from datetime import UTC, datetime, timedelta
from decimal import Decimal

import pytest

from billing.chargeback import chargeback_report
from billing.exports import csv_lines
from billing.idle import split
from billing.models import LineKind
from billing.periods import Month
from billing.services import usage_interval_close, usage_interval_open
from billing.statement import statement_pdf
from tests.billing.factories import make_world, place
from tests.test_settings import start_django

FEBRUARY = Month(2026, 2)
NOW = datetime(2026, 3, 10, tzinfo=UTC)
CAPACITY = Decimal(6 * 28 * 24 * 2)  # 6 reserved GPUs × 672 h × $2.00
USED = Decimal("200.00")  # 100 GPU-hours × $2.00


@pytest.mark.parametrize("amount, weights", [("100.00", {"a": 1, "b": 1, "c": 1}), ("0.05", {"a": 3, "b": 1}),
                                             ("3832.01", {"a": Decimal("2.5"), "b": Decimal("0.5")})])
def test_a_split_adds_up_to_the_cent(amount, weights):
    parts = split(Decimal(amount), weights)
    assert sum(parts.values()) == Decimal(amount) and all(part > 0 for part in parts.values())


@pytest.fixture
def worlds(db):
    """Two teams on two reserved nodes (3 H100 each, $2/GPU-h); only the first one uses a GPU, 100 h from 1 February."""
    first, second = make_world(price="2.0000"), make_world(name="u")
    start = datetime(2026, 2, 1, tzinfo=UTC)  # the ledger starts with the month: its whole capacity counts
    placement = place(first.jobs[0], first.whole, start)
    usage_interval_open(placement=placement, at=start)
    placement.ended_at = start + timedelta(hours=100)
    placement.save()
    usage_interval_close(placement=placement, at=placement.ended_at, reason="completed")
    return first, second


def pdf_text(pdf: bytes) -> bytes:
    """The page content streams of a reportlab PDF (ASCII85, then Flate), decoded."""
    streams = re.findall(rb"/ASCII85Decode /FlateDecode \] /Length \d+\s*>>\s*stream\r?\n(.*?)~>endstream", pdf, re.S)
    return b"".join(zlib.decompress(base64.a85decode(stream)) for stream in streams)


def team_costs(report):
    return {team.name: team.cost for unit in report.units for team in unit.children.values()}


def test_showback_shows_idle_capacity_separately_and_in_the_total(worlds):
    report = chargeback_report(FEBRUARY, now=NOW)
    assert report.total.cost == CAPACITY
    assert team_costs(report) == {"t-team": USED, "idle reserved capacity": CAPACITY - USED}
    assert report.idle_total == CAPACITY - USED and "charged to no team (showback)" in report.idle_statement
    [reserved] = report.reserved
    assert (reserved.amortised, reserved.used, reserved.idle) == (CAPACITY, USED, CAPACITY - USED)


def test_chargeback_by_use_puts_it_on_the_projects_that_used_the_model(worlds, settings):
    settings.TESSERA_IDLE_COST_POLICY = "chargeback-by-use"
    report = chargeback_report(FEBRUARY, now=NOW)
    assert team_costs(report) == {"t-team": CAPACITY} and report.total.cost == CAPACITY
    assert "in proportion to their GPU-hours" in report.idle_statement


def test_chargeback_by_guarantee_splits_by_guaranteed_gpus(worlds, settings):
    settings.TESSERA_IDLE_COST_POLICY = "chargeback-by-guarantee"
    report = chargeback_report(FEBRUARY, now=NOW)
    half = (CAPACITY - USED) / 2
    assert team_costs(report) == {"t-team": USED + half, "u-team": half}
    idle = [row for node in report.total.walk() for row in node.rows if row.kind == LineKind.IDLE]
    assert {row.cost_code for row in idle} == {"PX-1"} and all("guaranteed" in row.note for row in idle)


@pytest.mark.parametrize("chosen", ["showback", "chargeback-by-use", "chargeback-by-guarantee"])
def test_page_csv_and_pdf_agree_to_the_cent_and_state_the_policy(worlds, settings, chosen):
    settings.TESSERA_IDLE_COST_POLICY = chosen
    report = chargeback_report(FEBRUARY, now=NOW)
    lines = list(csv_lines([FEBRUARY], now=NOW))
    rows = [line.rstrip("\r\n").split(",") for line in lines[1:]]
    assert sum(Decimal(row[11]) for row in rows) == report.total.cost == CAPACITY
    assert {row[-1] for row in rows} == {chosen}
    assert f"Idle-cost policy: {chosen}".encode() in pdf_text(statement_pdf(report, "t-unit", generated=NOW))


def test_a_closed_month_keeps_the_policy_it_was_closed_under(worlds, settings):
    from billing.closing import month_close

    month_close(month=FEBRUARY, now=NOW)
    settings.TESSERA_IDLE_COST_POLICY = "chargeback-by-use"
    report = chargeback_report(FEBRUARY, now=NOW)
    assert report.idle_policy == "showback" and "idle reserved capacity" in team_costs(report)


def test_a_misspelt_policy_stops_start_up_naming_the_variable():
    result = start_django(TESSERA_IDLE_COST_POLICY="chargeback")
    assert result.returncode != 0 and "TESSERA_IDLE_COST_POLICY" in result.stderr


def test_capacity_counts_from_the_ledgers_first_interval(worlds):
    march = chargeback_report(Month(2026, 3), now=NOW)  # nothing ran in March: idle from 1 March to now
    assert march.idle_total == Decimal(6 * 9 * 24 * 2)
    january = chargeback_report(Month(2026, 1), now=NOW)  # before the ledger began
    assert january.idle_total == 0 and january.total.cost == 0
