"""The CSV export for finance systems: one row per (month, business unit, team, project, tier, model)."""

import csv
from collections.abc import Iterable, Iterator
from datetime import timedelta

from billing.ledger import Names
from billing.lines import closed_month, statement_policy, statement_rows
from billing.periods import Month

# Stable: finance systems import by these names. Add columns at the end, never rename.
CSV_COLUMNS = ["month", "period_start", "period_end", "business_unit", "cost_center", "team", "project",
               "cost_code", "tier", "gpu_model", "gpu_hours", "cost", "currency",
               "line_type", "note", "idle_cost_policy"]
CURRENCY = "USD"


class _Echo:
    """A file-like object whose write() hands the line back, so csv.writer feeds a stream."""

    def write(self, value: str) -> str:
        return value


def csv_lines(months: Iterable[Month], *, now=None) -> Iterator[str]:
    """Header, then the rows month by month; each month's rows come from the database in chunks.

    Call billing.ledger.check_months() first: once streaming has begun, an error can no longer
    become a 400.
    """
    writer = csv.writer(_Echo())
    yield writer.writerow(CSV_COLUMNS)
    names = Names()
    for month in months:
        last_day = month.next().first_day - timedelta(days=1)
        policy = statement_policy(month, closed_month(month))  # every line states it (line_type "idle")
        for row in statement_rows(month, now=now, check=False, names=names):
            yield writer.writerow([
                str(month), month.first_day.isoformat(), last_day.isoformat(), row.business_unit, row.cost_center,
                row.team, row.project, row.cost_code, row.tier, row.gpu_model,
                f"{row.gpu_hours:.6f}", f"{row.cost:.2f}", CURRENCY, row.kind, row.note, policy])
