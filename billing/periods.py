"""Calendar months in UTC, and the SQL that measures how much of an interval falls inside a window."""

import re
from dataclasses import dataclass
from datetime import UTC, date, datetime

from django.db.models import DateTimeField, DecimalField, F, Func, Value
from django.db.models.functions import Coalesce, Greatest, Least

MONTH_PATTERN = re.compile(r"^(\d{4})-(\d{2})$")


class PeriodError(ValueError):
    """A month or range the user typed that cannot be reported."""


@dataclass(frozen=True, order=True)
class Month:
    year: int
    month: int

    @classmethod
    def parse(cls, text: str) -> "Month":
        match = MONTH_PATTERN.match((text or "").strip())
        if not match:
            raise PeriodError(f"'{text}' is not a month; use YYYY-MM, e.g. 2026-11.")
        year, month = int(match[1]), int(match[2])
        if not (1 <= month <= 12 and 2000 <= year <= 2100):
            raise PeriodError(f"'{text}' is not a month between 2000-01 and 2100-12.")
        return cls(year, month)

    @classmethod
    def of(cls, moment: date) -> "Month":
        return cls(moment.year, moment.month)

    def __str__(self) -> str:
        return f"{self.year:04d}-{self.month:02d}"

    @property
    def first_day(self) -> date:
        return date(self.year, self.month, 1)

    @property
    def start(self) -> datetime:
        return datetime(self.year, self.month, 1, tzinfo=UTC)

    @property
    def end(self) -> datetime:
        return self.next().start

    @property
    def label(self) -> str:
        return self.first_day.strftime("%B %Y")

    def next(self) -> "Month":
        return Month(self.year + self.month // 12, self.month % 12 + 1)

    def previous(self) -> "Month":
        return Month(self.year - (self.month == 1), (self.month - 2) % 12 + 1)

    def hours(self, until: datetime | None = None) -> float:
        end = min(self.end, until) if until else self.end
        return max((end - self.start).total_seconds(), 0) / 3600


def month_range(first: Month, last: Month) -> list[Month]:
    months = [first]
    while months[-1] < last:
        months.append(months[-1].next())
    return months


def day_start(day: date) -> datetime:
    return datetime(day.year, day.month, day.day, tzinfo=UTC)


class Seconds(Func):
    """Seconds from the second expression to the first (end, start), computed by the database."""

    arg_joiner = " - "
    template = "EXTRACT(EPOCH FROM (%(expressions)s))"
    output_field = DecimalField()

    def as_sqlite(self, compiler, connection, **extra):
        # The embedded demo: julianday() is in days, exact to well under a millisecond.
        end, start = self.source_expressions
        end_sql, end_params = compiler.compile(end)
        start_sql, start_params = compiler.compile(start)
        return f"((julianday({end_sql}) - julianday({start_sql})) * 86400.0)", (*end_params, *start_params)


def sql_moment(value: datetime) -> Value:
    return Value(value, output_field=DateTimeField())


def overlap_seconds(low: datetime, high: datetime, as_of: datetime):
    """SQL: seconds of the interval (open ones counted until `as_of`) that fall within [low, high)."""
    start = Greatest(F("started_at"), sql_moment(low))
    end = Least(Coalesce(F("ended_at"), sql_moment(as_of)), sql_moment(high))
    return Greatest(Seconds(end, start), Value(0, output_field=DecimalField()))
