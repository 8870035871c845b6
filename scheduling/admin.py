from django import forms
from django.contrib import admin, messages
from django.core.exceptions import ValidationError
from django.db.models import Count
from django.forms.models import BaseInlineFormSet

from scheduling.engine import mig
from scheduling.gpu_catalogue import MAX_GPUS_PER_NODE, known_gpu_models, node_gpus_add, resolve_gpu_model
from scheduling.models import (
    ActionRequest,
    CapacityTier,
    Gpu,
    GpuSample,
    Job,
    JobEvent,
    MigInstance,
    MigSample,
    NativePod,
    NetworkSwitch,
    Node,
    Placement,
    PriorityClass,
)


@admin.register(CapacityTier)
class CapacityTierAdmin(admin.ModelAdmin):
    list_display = ["name", "reclaimable", "reclaim_notice_s"]


@admin.register(NetworkSwitch)
class NetworkSwitchAdmin(admin.ModelAdmin):
    list_display = ["name", "kind", "parent", "oversubscription"]
    list_filter = ["kind"]
    search_fields = ["name"]


class GpuInline(admin.TabularInline):
    model = Gpu
    extra = 0
    fields = ["index", "uuid", "model", "memory_gb", "mig_capable", "mig_enabled", "utilization"]
    readonly_fields = ["utilization"]


class NodeForm(forms.ModelForm):
    """A node and its GPUs in one step: the model is checked against the known ones, and a new
    node gets `gpu_count` GPU rows of it (they used to be typed one by one, uuid included)."""

    gpu_count = forms.IntegerField(
        label="GPUs", min_value=1, max_value=MAX_GPUS_PER_NODE, required=False,
        help_text=f"How many GPUs of the model the node has (1-{MAX_GPUS_PER_NODE}); their rows are made for you.")

    class Meta:
        model = Node
        fields = ["name", "tier", "leaf_switch", "gpu_model", "interconnect", "cpu_cores", "memory_gb", "nics",
                  "nic_gbps", "state", "last_heartbeat", "agent_url"]

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        adding = self.instance.pk is None
        self.fields["gpu_count"].required = adding
        if not adding:  # an existing node's GPUs are edited below, row by row
            del self.fields["gpu_count"]
        self.fields["gpu_model"].help_text = "Known: " + ", ".join(sorted(known_gpu_models())) + "."

    def clean_gpu_model(self) -> str:
        typed = self.cleaned_data["gpu_model"]
        if self.instance.pk is not None and typed == self.instance.gpu_model:
            return typed  # what the agent or inventory wrote stays, known or not
        model = resolve_gpu_model(typed)
        if model is None:
            raise ValidationError(
                f"{typed!r} is not a GPU model Tessera knows; known: {', '.join(sorted(known_gpu_models()))}. "
                "A model new to the cluster arrives with its node's agent or Kubernetes inventory.")
        return model


@admin.register(Node)
class NodeAdmin(admin.ModelAdmin):
    form = NodeForm
    list_display = ["name", "state", "tier", "leaf_switch", "gpu_model", "interconnect", "gpu_count",
                    "cpu_cores", "memory_gb", "last_heartbeat"]
    list_filter = ["state", "tier", "gpu_model", "interconnect", "leaf_switch"]
    search_fields = ["name", "gpu_model"]
    list_select_related = ["tier", "leaf_switch"]
    inlines = [GpuInline]
    actions = ["drain", "mark_ready"]
    # The cluster's word (the poll)
    readonly_fields = ["schedulable", "cluster_refusal", "allocatable_gpus", "gpus_used_outside", "mig_used_outside",
                       "gpu_sharing", "gpu_replicas"]

    def get_queryset(self, request):
        return super().get_queryset(request).annotate(_gpu_count=Count("gpus"))

    def get_inlines(self, request, obj):
        return self.inlines if obj is not None else []  # a new node's GPUs come from its GPU count

    def get_fieldsets(self, request, obj=None):
        fields = [name for name in super().get_fieldsets(request, obj)[0][1]["fields"] if name != "gpu_count"]
        if obj is None:  # the count right after the model it multiplies; a node's later GPUs are rows
            fields.insert(fields.index("gpu_model") + 1, "gpu_count")
        return [(None, {"fields": fields})]

    def save_model(self, request, obj, form, change):
        super().save_model(request, obj, form, change)
        if not change:
            node_gpus_add(node=obj, count=form.cleaned_data["gpu_count"])

    def get_changeform_initial_data(self, request):
        # A node typed in here takes no work until its agent reports (or someone marks it ready):
        # one added as ready used to collect placements its missing agent could never run.
        return {"state": Node.State.JOINING, **super().get_changeform_initial_data(request)}

    @admin.display(ordering="_gpu_count", description="GPUs")
    def gpu_count(self, obj):
        return obj._gpu_count

    @admin.action(description="Drain: place no new work on the selected nodes")
    def drain(self, request, queryset):
        changed = queryset.exclude(state=Node.State.LOST).update(state=Node.State.DRAINING)
        self.message_user(request, f"{changed} node(s) draining.", messages.SUCCESS)

    @admin.action(description="Mark ready")
    def mark_ready(self, request, queryset):
        changed = queryset.update(state=Node.State.READY)
        self.message_user(request, f"{changed} node(s) ready.", messages.SUCCESS)


MIG_DERIVED = ["size_slots", "compute_slices", "memory_gb", "gpu_fraction"]  # from the geometry (clean())


class MigLayoutFormSet(BaseInlineFormSet):
    """Each row is checked alone by MigInstance.clean(); this checks the rows of one save together
    (two new slices may overlap each other)."""

    def clean(self) -> None:
        super().clean()
        geometry = mig.geometry_for(self.instance.model) if self.instance.pk else None
        if geometry is None:
            return
        layout = [(form.cleaned_data["profile"], form.cleaned_data["start_slot"]) for form in self.forms
                  if form.cleaned_data and not form.cleaned_data.get("DELETE")]
        errors = mig.layout_errors(geometry, layout)
        if errors:
            raise ValidationError([f"{error}." for error in errors])


class MigInstanceInline(admin.TabularInline):
    model = MigInstance
    formset = MigLayoutFormSet
    extra = 0
    readonly_fields = MIG_DERIVED


@admin.register(Gpu)
class GpuAdmin(admin.ModelAdmin):
    list_display = ["__str__", "model", "memory_gb", "mig_capable", "mig_enabled", "utilization",
                    "memory_used_gb"]
    list_filter = ["model", "mig_enabled", "node__tier"]
    search_fields = ["uuid", "node__name", "model"]
    list_select_related = ["node"]
    inlines = [MigInstanceInline]


@admin.register(MigInstance)
class MigInstanceAdmin(admin.ModelAdmin):
    list_display = ["gpu", "profile", "start_slot", "size_slots", "compute_slices", "memory_gb"]
    readonly_fields = MIG_DERIVED
    list_filter = ["profile", "gpu__model"]
    search_fields = ["gpu__node__name", "gpu__uuid", "profile"]
    list_select_related = ["gpu__node"]


@admin.register(PriorityClass)
class PriorityClassAdmin(admin.ModelAdmin):
    list_display = ["name", "value", "preemptible", "lead_only", "description"]


class PlacementInline(admin.TabularInline):
    model = Placement
    extra = 0
    raw_id_fields = ["gpu", "mig_instance"]


class JobEventInline(admin.TabularInline):
    model = JobEvent
    extra = 0


@admin.register(Job)
class JobAdmin(admin.ModelAdmin):
    list_display = ["id", "name", "team", "project", "kind", "priority_class", "status", "gpus",
                    "gpu_memory_gb", "borrowed", "queue_order", "pending_reason_code", "submitted_at"]
    list_filter = ["status", "kind", "priority_class", "borrowed", "team__business_unit", "team"]
    search_fields = ["name", "team__name", "project__name", "submitted_by__username", "id"]
    list_select_related = ["team", "project", "priority_class"]
    raw_id_fields = ["submitted_by"]
    date_hierarchy = "submitted_at"
    readonly_fields = ["submitted_at", "updated_at"]
    inlines = [PlacementInline, JobEventInline]


@admin.register(Placement)
class PlacementAdmin(admin.ModelAdmin):
    list_display = ["job", "gpu", "mig_instance", "share_milli", "memory_gb", "started_at", "ended_at",
                    "end_reason"]
    list_filter = [("ended_at", admin.EmptyFieldListFilter), "end_reason", "gpu__node__tier"]
    search_fields = ["job__name", "gpu__node__name", "gpu__uuid"]
    list_select_related = ["job", "gpu__node", "mig_instance"]
    raw_id_fields = ["job", "gpu", "mig_instance"]


@admin.register(NativePod)
class NativePodAdmin(admin.ModelAdmin):
    """Pods taken in as jobs: written by the intake from what the cluster says, so read-only here."""

    list_display = ["__str__", "job", "owner", "group", "taken_at"]
    search_fields = ["namespace", "name", "uid", "owner_name", "job__name"]
    list_select_related = ["job"]
    readonly_fields = [f.name for f in NativePod._meta.fields]

    def has_add_permission(self, request):
        return False


@admin.register(JobEvent)
class JobEventAdmin(admin.ModelAdmin):
    list_display = ["job", "at", "kind", "message"]
    list_filter = ["kind"]
    search_fields = ["job__name", "message"]
    raw_id_fields = ["job"]


@admin.register(GpuSample)
class GpuSampleAdmin(admin.ModelAdmin):
    list_display = ["gpu", "at", "utilization", "memory_used_gb"]
    list_filter = ["gpu__node"]
    raw_id_fields = ["gpu"]
    date_hierarchy = "at"


@admin.register(MigSample)
class MigSampleAdmin(admin.ModelAdmin):
    list_display = ["mig_instance", "at", "utilization", "memory_used_gb"]
    list_filter = ["mig_instance__gpu__node"]
    raw_id_fields = ["mig_instance"]
    date_hierarchy = "at"


@admin.register(ActionRequest)
class ActionRequestAdmin(admin.ModelAdmin):
    list_display = ["key", "kind", "state", "job", "node", "attempts", "created_at", "updated_at"]
    list_filter = ["kind", "state"]
    search_fields = ["key", "job__name", "node__name"]
    raw_id_fields = ["job", "node"]
    readonly_fields = ["created_at", "updated_at"]
