"""Query-string forms of the billing pages and API: one place that turns input into clear errors."""

from decimal import Decimal

from django import forms
from django.core.validators import MaxValueValidator, MinValueValidator
from django.utils import timezone

from billing.breakeven import DEFAULTS
from billing.periods import Month, PeriodError, month_range
from portal.models import BusinessUnit

MAX_EXPORT_MONTHS = 60


def last_complete_month(now=None) -> Month:
    return Month.of(now or timezone.now()).previous()


def _month(value: str, *, now=None) -> Month:
    try:
        month = Month.parse(value)
    except PeriodError as error:
        raise forms.ValidationError(str(error)) from error
    current = Month.of(now or timezone.now())
    if month > current:
        raise forms.ValidationError(f"{month} has not started yet; pick {current} or earlier.")
    return month


class MonthForm(forms.Form):
    month = forms.CharField(required=False, help_text="YYYY-MM; the last complete month when empty.")

    def clean_month(self) -> Month:
        value = self.cleaned_data["month"]
        return _month(value) if value else last_complete_month()


class RangeForm(forms.Form):
    """A month, or a range of months (`from`, `to`), for the CSV export."""

    month = forms.CharField(required=False)
    start = forms.CharField(required=False)
    end = forms.CharField(required=False)

    def __init__(self, data=None, **kwargs):
        # `from` and `to` are the public names, but `from` cannot be a Python field name.
        if data is not None:
            data = {"month": data.get("month", ""), "start": data.get("from", ""), "end": data.get("to", "")}
        super().__init__(data, **kwargs)

    def clean(self):
        cleaned = super().clean()
        if self.errors:
            return cleaned
        try:
            single = _month(cleaned["month"]) if cleaned["month"] else None
            first = _month(cleaned["start"]) if cleaned["start"] else single or last_complete_month()
            last = _month(cleaned["end"]) if cleaned["end"] else single or first
        except forms.ValidationError as error:
            raise forms.ValidationError(error.messages) from error
        if last < first:
            raise forms.ValidationError(f"'to' ({last}) comes before 'from' ({first}).")
        months = month_range(first, last)
        if len(months) > MAX_EXPORT_MONTHS:
            raise forms.ValidationError(f"At most {MAX_EXPORT_MONTHS} months per export; asked for {len(months)}.")
        cleaned["months"] = months
        return cleaned


class StatementForm(MonthForm):
    business_unit = forms.ModelChoiceField(queryset=BusinessUnit.objects.all(), error_messages={
        "required": "Choose a business unit.", "invalid_choice": "There is no such business unit."})


def _money(label, default, *, minimum="0", maximum="100000000", places=2, **kwargs):
    return forms.DecimalField(label=label, initial=default, required=False, max_digits=14, decimal_places=places,
                              validators=[MinValueValidator(Decimal(minimum)), MaxValueValidator(Decimal(maximum))],
                              **kwargs)


class BreakEvenForm(forms.Form):
    """Owned hardware against cloud prices; every field defaults to docs/reference/performance-figures.md §4."""

    capital_cost = _money("Capital cost per server ($)", DEFAULTS.capital_cost)
    gpus_per_server = forms.IntegerField(label="GPUs per server", initial=DEFAULTS.gpus_per_server, required=False,
                                         min_value=1, max_value=64)
    power_kw = _money("Provisioned power (kW, billed by the colocation)", DEFAULTS.power_kw, minimum="0.1",
                      maximum="1000", places=3)
    average_draw_kw = _money("Average draw (kW, metered)", DEFAULTS.average_draw_kw, maximum="1000", places=3)
    colocation_per_kw_month = _money("Colocation ($ per kW-month)", DEFAULTS.colocation_per_kw_month)
    electricity_per_kwh = _money("Electricity ($ per kWh)", DEFAULTS.electricity_per_kwh, maximum="10", places=4)
    support_per_month = _money("Support and maintenance ($ per month)", DEFAULTS.support_per_month)
    utilization_percent = _money("Expected utilisation (%)", DEFAULTS.utilization_percent, minimum="1",
                                 maximum="100", places=1)
    cloud_per_server_hour = _money("Cloud price of the same server ($ per hour)", DEFAULTS.cloud_per_server_hour,
                                   minimum="0.01", maximum="10000", places=4)

    def clean(self):
        cleaned = super().clean()
        for name, value in list(cleaned.items()):
            if value is None:
                cleaned[name] = self.fields[name].initial
        return cleaned


class CloseMonthForm(forms.Form):
    month = forms.CharField()

    def clean_month(self) -> Month:
        return _month(self.cleaned_data["month"])


class CorrectionsForm(CloseMonthForm):
    reason = forms.CharField(max_length=200, error_messages={"required": "Say why the closed month is corrected."})
