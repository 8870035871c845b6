"""The monthly chargeback report: business unit → team → project → tier × model, with totals.

Built from the grouped rows of `billing.ledger` (a few hundred at most), so the totals at every
level are sums of the same cent-rounded rows and always add up.
"""

from dataclasses import dataclass, field
from datetime import datetime
from decimal import ROUND_HALF_UP, Decimal

from django.utils import timezone

from billing.idle import RESERVED, policy_statement
from billing.ledger import Names, NoRateError, Row
from billing.lines import closed_month, cost_by_business_unit, live_rows, statement_policy, statement_rows
from billing.models import ClosedMonth, LineKind
from billing.periods import Month, PeriodError, month_range

CHART_MONTHS = 6


@dataclass
class Node:
    """One level of the tree (the whole report, a business unit, a team or a project)."""

    name: str
    code: str = ""
    gpu_seconds: Decimal = Decimal(0)
    cost: Decimal = Decimal(0)
    previous_cost: Decimal | None = None
    share: Decimal = Decimal(0)
    children: dict[str, "Node"] = field(default_factory=dict)
    rows: list[Row] = field(default_factory=list)

    @property
    def gpu_hours(self) -> Decimal:
        return self.gpu_seconds / 3600

    @property
    def change(self) -> Decimal | None:
        """Month-over-month change in percent; None when last month had nothing to compare."""
        if not self.previous_cost:
            return None
        return ((self.cost - self.previous_cost) / self.previous_cost * 100).quantize(
            Decimal("0.1"), rounding=ROUND_HALF_UP)

    def add(self, row: Row) -> None:
        self.gpu_seconds += row.gpu_seconds
        self.cost += row.cost

    def child(self, name: str, code: str = "") -> "Node":
        if name not in self.children:
            self.children[name] = Node(name=name, code=code)
        return self.children[name]

    def walk(self):
        yield self
        for child in self.children.values():
            yield from child.walk()


@dataclass
class Reserved:
    """A reserved GPU model's amortised cost in the month: what usage paid plus the idle remainder."""

    gpu_model: str
    used: Decimal = Decimal(0)
    idle: Decimal = Decimal(0)

    @property
    def amortised(self) -> Decimal:
        return self.used + self.idle

    @property
    def utilization(self) -> Decimal | None:
        return (self.used / self.amortised * 100).quantize(Decimal("0.1")) if self.amortised else None


def reserved_summary(rows: list[Row]) -> list[Reserved]:
    models: dict[str, Reserved] = {}
    for row in rows:
        if row.tier == RESERVED and row.kind in (LineKind.USAGE, LineKind.IDLE):
            line = models.setdefault(row.gpu_model, Reserved(row.gpu_model))
            if row.kind == LineKind.IDLE:
                line.idle += row.cost
            else:
                line.used += row.cost
    return sorted(models.values(), key=lambda line: line.gpu_model)


@dataclass
class Report:
    month: Month
    total: Node
    by_tier: list[Node]
    by_model: list[Node]
    previous_available: bool
    chart: dict  # {"months": [...], "series": {business unit: [cost or None, ...]}}
    notes: list[str]
    closed: ClosedMonth | None = None  # None: the month is open and computed live
    idle_policy: str = ""
    compared_until: datetime | None = None  # month to date: last month is counted up to this moment only
    reserved: list[Reserved] = field(default_factory=list)

    @property
    def units(self) -> list[Node]:
        return list(self.total.children.values())

    @property
    def idle_total(self) -> Decimal:
        return sum((line.idle for line in self.reserved), Decimal(0))

    @property
    def idle_statement(self) -> str:
        return policy_statement(self.idle_policy, self.idle_total)


def build_tree(rows: list[Row]) -> Node:
    total = Node(name="Total")
    for row in rows:
        unit = total.child(row.business_unit, row.cost_center)
        team = unit.child(row.team)
        project = team.child(row.project, row.cost_code)
        for node in (total, unit, team, project):
            node.add(row)
        project.rows.append(row)
    for node in total.walk():
        node.share = (node.cost / total.cost * 100).quantize(Decimal("0.1")) if total.cost else Decimal(0)
    return total


def _summary(rows: list[Row], key) -> list[Node]:
    nodes: dict[str, Node] = {}
    for row in rows:
        nodes.setdefault(key(row), Node(name=key(row))).add(row)
    return sorted(nodes.values(), key=lambda n: n.name)


def _attach_previous(current: Node, previous: Node) -> None:
    """Give every node of this month the cost of the same node last month (zero if it had none)."""
    current.previous_cost = previous.cost
    for name, child in current.children.items():
        _attach_previous(child, previous.children.get(name, Node(name=name)))


def _chart(month: Month, known: dict[Month, dict[str, Decimal]], now, notes: list[str], names: Names) -> dict:
    first = month
    for _ in range(CHART_MONTHS - 1):
        first = first.previous()
    months = month_range(first, month)
    costs = {}
    for earlier in months:
        if earlier in known:
            costs[earlier] = known[earlier]
            continue
        try:
            costs[earlier] = cost_by_business_unit(earlier, now=now, names=names)
        except NoRateError:
            notes.append(f"{earlier} is left out of the chart: part of its usage has no rate.")
    # Months before the ledger's first usage would only be empty bars; the report month always stays.
    while len(months) > 1 and not any(costs.get(months[0], {}).values()):
        months.pop(0)
    units = sorted({unit for per_month in costs.values() for unit in per_month})
    series = {unit: [str(costs[m].get(unit, Decimal(0))) if m in costs else None for m in months] for unit in units}
    return {"months": [str(m) for m in months], "series": series}


def comparison_cutoff(month: Month, now):
    """For a month still running, the same moment last month (clipped to its end); else None."""
    if now >= month.end:
        return None
    return min(month.previous().start + (now - month.start), month.previous().end)


def chargeback_report(month: Month, *, now=None) -> Report:
    """The report for one month; raises PeriodError for a future month, NoRateError when unpriceable."""
    now = now or timezone.now()
    if month.start > now:
        raise PeriodError(f"{month} has not started yet; pick {Month.of(now)} or earlier.")
    names = Names()
    closed = closed_month(month)
    rows = statement_rows(month, now=now, names=names)
    total = build_tree(rows)
    notes: list[str] = []
    known = {month: {unit.name: unit.cost for unit in total.children.values()}}
    cutoff = comparison_cutoff(month, now)
    try:
        if cutoff is None:
            previous = build_tree(statement_rows(month.previous(), now=now, names=names))
            known[month.previous()] = {unit.name: unit.cost for unit in previous.children.values()}
        else:  # month to date: last month up to the same moment, computed live, never the whole month
            previous = build_tree(live_rows(month.previous(), now=cutoff, names=names))
            notes.append(f"Month to date: compared with {month.previous()} up to the same point "
                         f"({cutoff:%Y-%m-%d %H:%M} UTC), not with the whole month.")
        _attach_previous(total, previous)
    except NoRateError as error:
        notes.append(f"No month-over-month change: {error}")
    chart = _chart(month, known, now, notes, names)
    return Report(month=month, total=total, by_tier=_summary(rows, lambda r: r.tier),
                  by_model=_summary(rows, lambda r: r.gpu_model),
                  previous_available=month.previous() in known or cutoff is not None, chart=chart, notes=notes,
                  closed=closed, compared_until=cutoff, idle_policy=statement_policy(month, closed),
                  reserved=reserved_summary(rows))
