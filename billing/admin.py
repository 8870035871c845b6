from django import forms
from django.contrib import admin, messages
from django.core.exceptions import ValidationError

from billing.closing import adjustment_create
from billing.models import Adjustment, Budget, BudgetAlert, ClosedMonth, FrozenLine, Rate, UsageInterval
from billing.periods import Month
from billing.services import rate_save


@admin.register(Rate)
class RateAdmin(admin.ModelAdmin):
    list_display = ["gpu_model", "tier", "price_per_gpu_hour", "valid_from", "valid_to", "note"]
    list_filter = ["tier", "gpu_model"]
    search_fields = ["gpu_model", "note"]
    list_select_related = ["tier"]
    date_hierarchy = "valid_from"

    def save_model(self, request, obj, form, change):
        # The form already ran clean(); the service re-checks under a lock so two admins cannot race.
        rate_save(rate=obj)
        closed = ClosedMonth.objects.filter(month__gte=obj.valid_from.replace(day=1))
        if obj.valid_to is not None:
            closed = closed.filter(month__lt=obj.valid_to)
        months = [f"{month:%Y-%m}" for month in closed.order_by("month").values_list("month", flat=True)]
        if months:
            messages.warning(request, f"This rate is in force in closed months ({', '.join(months)}): their "
                                      "statements stay as billed. To charge the difference, book corrections on "
                                      "Billing › Closing months.")


class ReadOnlyAdmin(admin.ModelAdmin):
    """Rows only the system writes: listed and searchable, never added, edited or deleted here."""

    def has_add_permission(self, request):
        return False

    def has_change_permission(self, request, obj=None):
        return False

    def has_delete_permission(self, request, obj=None):
        return False


@admin.register(UsageInterval)
class UsageIntervalAdmin(ReadOnlyAdmin):
    """The ledger is written by the scheduler and workers only; the admin reads it."""

    list_display = ["id", "job", "team", "project", "business_unit", "gpu", "gpu_model", "tier", "gpu_fraction",
                    "started_at", "ended_at", "end_reason"]
    list_filter = ["business_unit", "tier", "gpu_model", "end_reason", ("ended_at", admin.EmptyFieldListFilter)]
    search_fields = ["job__name", "team__name", "project__name", "business_unit__name", "node__name", "gpu__uuid"]
    list_select_related = ["job", "team", "project__team", "business_unit", "gpu__node", "tier"]
    raw_id_fields = ["job", "placement", "gpu", "node", "project", "team"]
    date_hierarchy = "started_at"
    show_full_result_count = False


class FrozenLineInline(admin.TabularInline):
    model = FrozenLine
    fields = ["kind", "business_unit_name", "team_name", "project_name", "cost_code", "tier", "gpu_model", "cost",
              "note"]
    readonly_fields = fields
    can_delete = False
    extra = 0

    def has_add_permission(self, request, obj=None):
        return False


@admin.register(FrozenLine)
class FrozenLineAdmin(ReadOnlyAdmin):
    """Every closed month's lines in one searchable list (a statement line finance is asked about)."""

    list_display = ["closed_month", "kind", "team_name", "project_name", "cost_code", "tier", "gpu_model", "cost"]
    list_filter = ["closed_month", "kind", "tier"]
    search_fields = ["team_name", "project_name", "cost_code", "business_unit_name"]


@admin.register(ClosedMonth)
class ClosedMonthAdmin(ReadOnlyAdmin):
    """Closing happens on the finance page (Billing › Closing months) or with `manage.py close_month`."""

    list_display = ["month", "closed_at", "closed_by", "total_cost"]
    inlines = [FrozenLineInline]


class AdjustmentForm(forms.ModelForm):
    class Meta:
        model = Adjustment
        fields = ["corrects", "project", "amount", "reason"]
        help_texts = {"corrects": "Any day of the closed month it corrects.",
                      "reason": "Why: it is printed on the statement with your name."}

    def clean_corrects(self):
        day = self.cleaned_data["corrects"].replace(day=1)
        if not ClosedMonth.objects.filter(month=day).exists():
            raise ValidationError(f"{day:%Y-%m} is not closed; an open month is computed live and needs no adjustment.")
        return day

    def clean_amount(self):
        if not self.cleaned_data["amount"]:
            raise ValidationError("An adjustment of $0.00 changes nothing.")
        return self.cleaned_data["amount"]


@admin.register(Adjustment)
class AdjustmentAdmin(admin.ModelAdmin):
    """Adjustments are added, never edited: a wrong one is corrected by another, so the trail stays."""

    form = AdjustmentForm
    list_display = ["month", "corrects", "project", "amount", "reason", "created_by", "created_at"]
    list_filter = ["month", "corrects"]
    list_select_related = ["project__team", "created_by"]
    autocomplete_fields = ["project"]

    def has_change_permission(self, request, obj=None):
        return obj is None

    def has_delete_permission(self, request, obj=None):
        return False

    def save_model(self, request, obj, form, change):
        # The service books it in the next open month and records who did it.
        saved = adjustment_create(corrects=Month.of(obj.corrects), project=obj.project, amount=obj.amount,
                                  reason=obj.reason, by=request.user)
        obj.pk, obj.month, obj.created_by = saved.pk, saved.month, saved.created_by


@admin.register(Budget)
class BudgetAdmin(admin.ModelAdmin):
    list_display = ["__str__", "team", "business_unit", "monthly_amount", "thresholds"]
    list_select_related = ["team", "business_unit"]
    autocomplete_fields = ["team", "business_unit"]


@admin.register(BudgetAlert)
class BudgetAlertAdmin(ReadOnlyAdmin):
    list_display = ["budget", "month", "threshold", "spent", "recipients", "created_at"]
    list_select_related = ["budget__team", "budget__business_unit"]
