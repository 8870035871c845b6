"""Buy-vs-cloud break-even for an owned GPU server (plain Python, no Django).

months = capital cost / (cloud $/hour × 730 × utilisation − owned running cost per month),
as in docs/reference/performance-figures.md §4. The defaults are that page's assumptions:
a DGX-class 8×H100 server at $275k (the $250–300k range), 10.2 kW provisioned at $175/kW-month,
7.5 kW drawn at $0.10/kWh, $3.3k/month support, against p5.48xlarge on-demand after the June 2025
cut (98.32 × 0.56 ≈ $55.06/hour).
"""

from dataclasses import dataclass, replace
from decimal import ROUND_HALF_UP, Decimal

HOURS_PER_MONTH = Decimal(730)

# name, $/server-hour, paid whatever the utilisation (a reservation is)
CLOUD_REFERENCES = [
    ("AWS p5.48xlarge on-demand, before June 2025", Decimal("98.32"), False),
    ("AWS p5.48xlarge on-demand, after the cut", Decimal("55.06"), False),
    ("AWS p5.48xlarge Capacity Block", Decimal("39.33"), False),
    ("AWS p5 1-year reservation", Decimal("52.00"), True),
]


@dataclass(frozen=True)
class BreakEvenInputs:
    capital_cost: Decimal = Decimal("275000")
    gpus_per_server: int = 8
    power_kw: Decimal = Decimal("10.2")
    average_draw_kw: Decimal = Decimal("7.5")
    colocation_per_kw_month: Decimal = Decimal("175")
    electricity_per_kwh: Decimal = Decimal("0.10")
    support_per_month: Decimal = Decimal("3300")
    utilization_percent: Decimal = Decimal("50")
    cloud_per_server_hour: Decimal = Decimal("55.06")


DEFAULTS = BreakEvenInputs()


@dataclass(frozen=True)
class BreakEven:
    owned_per_month: Decimal
    cloud_per_month: Decimal
    saving_per_month: Decimal
    months: Decimal | None  # None: owning never pays back at this utilisation


def owned_running_cost(inputs: BreakEvenInputs) -> Decimal:
    """Colocation for the provisioned kW, metered electricity for the average draw, and support."""
    colocation = inputs.power_kw * inputs.colocation_per_kw_month
    electricity = inputs.average_draw_kw * HOURS_PER_MONTH * inputs.electricity_per_kwh
    return colocation + electricity + inputs.support_per_month


def break_even(inputs: BreakEvenInputs, *, committed: bool = False) -> BreakEven:
    """Months until the server has paid for itself against renting the same server in the cloud.

    Only the hours the work needs are rented on demand; a committed (reserved) price is paid for
    every hour, so utilisation does not scale it.
    """
    share = Decimal(1) if committed else inputs.utilization_percent / 100
    cloud = inputs.cloud_per_server_hour * HOURS_PER_MONTH * share
    owned = owned_running_cost(inputs)
    saving = cloud - owned
    months = (inputs.capital_cost / saving).quantize(Decimal("0.1"), rounding=ROUND_HALF_UP) if saving > 0 else None
    cents = Decimal("0.01")
    return BreakEven(owned_per_month=owned.quantize(cents), cloud_per_month=cloud.quantize(cents),
                     saving_per_month=saving.quantize(cents), months=months)


def against_references(inputs: BreakEvenInputs) -> list[tuple[str, Decimal, BreakEven]]:
    """The same server against each published cloud price."""
    return [(name, price, break_even(replace(inputs, cloud_per_server_hour=price), committed=committed))
            for name, price, committed in CLOUD_REFERENCES]
