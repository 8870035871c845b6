"""The statement as a FOCUS dataset: FinOps Open Cost and Usage Specification 1.3 column names.

One FOCUS row per statement line (the same lines as the CSV, so the totals agree to the cent).
Tessera is the provider and the team the sub-account; the rate card is the list, contracted,
billed and effective price at once (an internal chargeback has no other), and reserved capacity is
a commitment: used reserved GPU-hours have CommitmentDiscountStatus "Used", idle capacity "Unused".
Adjustments correcting a closed month are ChargeCategory "Adjustment", ChargeClass "Correction".
Columns are from https://focus.finops.org/focus-specification/v1-3/ (FOCUS_Spec, specification/
columns); Tessera's own columns start with x_ as the specification asks of custom columns.
"""

import csv
import json
from collections.abc import Iterable, Iterator

from billing.exports import CURRENCY, _Echo
from billing.ledger import Names, Row
from billing.lines import closed_month, statement_policy, statement_rows
from billing.models import LineKind
from billing.periods import Month

FOCUS_VERSION = "1.3"
FOCUS_COLUMNS = [
    "BillingAccountId", "BillingAccountName", "BillingPeriodStart", "BillingPeriodEnd", "ChargePeriodStart",
    "ChargePeriodEnd", "BillingCurrency", "BilledCost", "EffectiveCost", "ListCost", "ContractedCost",
    "ChargeCategory", "ChargeClass", "ChargeDescription", "ChargeFrequency", "CommitmentDiscountCategory",
    "CommitmentDiscountId", "CommitmentDiscountStatus", "CommitmentDiscountType", "ConsumedQuantity",
    "ConsumedUnit", "PricingQuantity", "PricingUnit", "PricingCategory", "ProviderName", "PublisherName",
    "InvoiceIssuerName", "ServiceCategory", "ServiceName", "SkuId", "SubAccountId", "SubAccountName",
    "SubAccountType", "Tags", "AllocatedMethodId", "AllocatedResourceId", "AllocatedResourceName",
    "AllocatedTags", "x_BusinessUnit", "x_CostCenter", "x_Project", "x_CostCode", "x_Note",
]
PROVIDER = "Tessera"
UNIT = "GPU-Hours"
PRICING_CATEGORY = {"on-demand": "Standard", "reserved": "Committed", "spot": "Dynamic"}
FREQUENCY = {LineKind.USAGE: "Usage-Based", LineKind.IDLE: "Recurring", LineKind.ADJUSTMENT: "One-Time"}


def _moment(month: Month) -> str:
    return month.start.strftime("%Y-%m-%dT%H:%M:%SZ")


def focus_row(row: Row, policy: str) -> list[str]:
    month, cost = row.month, f"{row.cost:.2f}"
    adjustment, idle = row.kind == LineKind.ADJUSTMENT, row.kind == LineKind.IDLE
    committed = row.tier == "reserved" and not adjustment
    hours = "" if adjustment or idle else f"{row.gpu_hours:.6f}"
    description = row.note or f"{row.gpu_model} GPU-hours on the {row.tier} tier"
    resource = f"{row.team}/{row.project}"
    values = {
        "BillingAccountId": "tessera", "BillingAccountName": "Tessera GPU cluster",
        "BillingPeriodStart": _moment(month), "BillingPeriodEnd": _moment(month.next()),
        "ChargePeriodStart": _moment(month), "ChargePeriodEnd": _moment(month.next()),
        "BillingCurrency": CURRENCY, "BilledCost": cost, "EffectiveCost": cost, "ListCost": cost,
        "ContractedCost": cost, "ChargeCategory": "Adjustment" if adjustment else "Usage",
        "ChargeClass": "Correction" if adjustment else "", "ChargeDescription": description,
        "ChargeFrequency": FREQUENCY[LineKind(row.kind)],
        "CommitmentDiscountCategory": "Usage" if committed else "",
        "CommitmentDiscountId": f"reserved/{row.gpu_model}" if committed else "",
        "CommitmentDiscountStatus": ("Unused" if idle else "Used") if committed else "",
        "CommitmentDiscountType": "Reserved GPU capacity" if committed else "",
        "ConsumedQuantity": hours, "ConsumedUnit": UNIT if hours else "",
        "PricingQuantity": hours, "PricingUnit": UNIT if hours else "",
        "PricingCategory": PRICING_CATEGORY.get(row.tier, "") if hours else "",
        "ProviderName": PROVIDER, "PublisherName": PROVIDER, "InvoiceIssuerName": PROVIDER,
        "ServiceCategory": "AI and Machine Learning", "ServiceName": "GPU compute",
        "SkuId": f"{row.gpu_model}/{row.tier}" if row.gpu_model else "",
        "SubAccountId": row.team, "SubAccountName": row.team, "SubAccountType": "Team",
        "Tags": json.dumps({"business_unit": row.business_unit, "cost_center": row.cost_center,
                            "project": row.project, "cost_code": row.cost_code}, sort_keys=True),
        "AllocatedMethodId": policy if idle else ("gpu-seconds" if not adjustment else ""),
        "AllocatedResourceId": resource, "AllocatedResourceName": row.project,
        "AllocatedTags": json.dumps({"cost_code": row.cost_code}),
        "x_BusinessUnit": row.business_unit, "x_CostCenter": row.cost_center, "x_Project": row.project,
        "x_CostCode": row.cost_code, "x_Note": row.note,
    }
    return [values[column] for column in FOCUS_COLUMNS]


def focus_lines(months: Iterable[Month], *, now=None) -> Iterator[str]:
    """Header, then one FOCUS row per statement line, month by month (check the months first, as for the CSV)."""
    writer = csv.writer(_Echo())
    yield writer.writerow(FOCUS_COLUMNS)
    names = Names()
    for month in months:
        policy = statement_policy(month, closed_month(month))
        for row in statement_rows(month, now=now, check=False, names=names):
            yield writer.writerow(focus_row(row, policy))
