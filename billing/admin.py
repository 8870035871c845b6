from django.contrib import admin

from billing.models import Rate, UsageInterval
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


@admin.register(UsageInterval)
class UsageIntervalAdmin(admin.ModelAdmin):
    """The ledger is written by the scheduler and workers only; the admin reads it."""

    list_display = ["id", "job", "team", "project", "business_unit", "gpu", "gpu_model", "tier", "gpu_fraction",
                    "started_at", "ended_at", "end_reason"]
    list_filter = ["business_unit", "tier", "gpu_model", "end_reason", ("ended_at", admin.EmptyFieldListFilter)]
    search_fields = ["job__name", "team__name", "project__name", "business_unit__name", "node__name", "gpu__uuid"]
    list_select_related = ["job", "team", "project__team", "business_unit", "gpu__node", "tier"]
    raw_id_fields = ["job", "placement", "gpu", "node", "project", "team"]
    date_hierarchy = "started_at"
    show_full_result_count = False

    def has_add_permission(self, request):
        return False

    def has_change_permission(self, request, obj=None):
        return False

    def has_delete_permission(self, request, obj=None):
        return False
