from django import forms
from django.contrib import admin
from django.db import models
from django.db.models import Count
from django.utils import timezone

from portal.models import ApiToken, BusinessUnit, Membership, Project, Team, TeamNamespace, units


class UnitsInput(forms.NumberInput):
    """A GPU-unit field shows 16, not the column's 16.000."""

    def format_value(self, value):
        return units(value) if value not in (None, "") and not isinstance(value, str) else super().format_value(value)


class MembershipInline(admin.TabularInline):
    model = Membership
    extra = 0
    autocomplete_fields = ["user"]


class ProjectInline(admin.TabularInline):
    model = Project
    extra = 0


class TeamNamespaceInline(admin.TabularInline):
    model = TeamNamespace
    extra = 0
    verbose_name = "Kubernetes namespace"
    verbose_name_plural = "Kubernetes namespaces (native pods there are this team's jobs; its own name is always)"


@admin.register(BusinessUnit)
class BusinessUnitAdmin(admin.ModelAdmin):
    list_display = ["name", "cost_center", "team_count"]
    search_fields = ["name", "cost_center"]

    def get_queryset(self, request):
        return super().get_queryset(request).annotate(_team_count=Count("teams"))

    @admin.display(ordering="_team_count", description="teams")
    def team_count(self, obj):
        return obj._team_count


@admin.register(TeamNamespace)
class TeamNamespaceAdmin(admin.ModelAdmin):
    """Which team a namespace's native pods (spec.schedulerName: tessera) belong to."""

    list_display = ["namespace", "team"]
    search_fields = ["namespace", "team__name"]
    list_select_related = ["team"]
    autocomplete_fields = ["team"]


@admin.register(Team)
class TeamAdmin(admin.ModelAdmin):
    list_display = ["name", "business_unit", "guaranteed", "burst_limit", "weight", "max_waiting_jobs",
                    "max_submits_per_minute"]
    formfield_overrides = {models.DecimalField: {"widget": UnitsInput}}
    list_filter = ["business_unit"]
    search_fields = ["name", "business_unit__name"]
    list_select_related = ["business_unit"]
    filter_horizontal = ["allowed_priority_classes"]
    inlines = [ProjectInline, TeamNamespaceInline, MembershipInline]

    @admin.display(description="guaranteed GPUs", ordering="guaranteed_gpus")
    def guaranteed(self, team):
        return units(team.guaranteed_gpus)

    @admin.display(description="burst limit GPUs", ordering="burst_limit_gpus")
    def burst_limit(self, team):
        return units(team.burst_limit_gpus)


@admin.register(Project)
class ProjectAdmin(admin.ModelAdmin):
    list_display = ["name", "team", "cost_code"]
    list_filter = ["team__business_unit", "team"]
    search_fields = ["name", "team__name", "cost_code"]
    list_select_related = ["team"]


@admin.register(Membership)
class MembershipAdmin(admin.ModelAdmin):
    list_display = ["user", "team", "role"]
    list_filter = ["role", "team"]
    search_fields = ["user__username", "user__email", "team__name"]
    list_select_related = ["user", "team"]
    autocomplete_fields = ["user", "team"]


@admin.register(ApiToken)
class ApiTokenAdmin(admin.ModelAdmin):
    """Users make their tokens in the portal (the secret is shown to them only); staff can revoke."""

    list_display = ["name", "user", "prefix", "created_at", "expires_at", "last_used_at", "revoked_at"]
    list_filter = ["revoked_at"]
    search_fields = ["name", "prefix", "user__username"]
    readonly_fields = ["user", "name", "prefix", "digest", "created_at", "expires_at", "last_used_at", "revoked_at"]
    actions = ["revoke"]

    def has_add_permission(self, request):
        return False

    @admin.action(description="Revoke the selected tokens")
    def revoke(self, request, queryset):
        queryset.filter(revoked_at__isnull=True).update(revoked_at=timezone.now())
