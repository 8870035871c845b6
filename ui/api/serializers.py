"""API representations; writes are validated for type here and for the cluster in services."""

from rest_framework import serializers

from portal.api_input import StrictSerializer
from portal.models import Team
from scheduling.engine.reasons import WaitingReason
from scheduling.models import Job, Node
from scheduling.services import MAX_JOB_SECONDS


def waiting_reason_field(**kwargs) -> serializers.ChoiceField:
    """A waiting-reason code (the catalogue in scheduling/engine/reasons.py); blank once a job runs."""
    return serializers.ChoiceField(choices=WaitingReason.choices(), allow_blank=True, read_only=True, **kwargs)


class JobSerializer(serializers.ModelSerializer):
    team = serializers.CharField(source="team.name")
    project = serializers.CharField(source="project.name")
    priority_class = serializers.CharField(source="priority_class.name")
    priority_value = serializers.IntegerField(source="priority_class.value")
    submitted_by = serializers.CharField(source="submitted_by.username", default=None, allow_null=True)
    pending_reason_code = waiting_reason_field()
    gpu_models = serializers.ListField(
        child=serializers.CharField(), source="allowed_gpu_models", read_only=True,
        help_text="The GPU models the job may run on, as submitted; empty: any.")

    class Meta:
        model = Job
        fields = ["id", "name", "team", "project", "kind", "priority_class", "priority_value", "status",
                  "gpus", "gpu_memory_gb", "gpu_models", "cpu_cores", "memory_gb", "gang",
                  "checkpoint_interval_s", "checkpoint_save_s", "expected_runtime_s", "preemptible", "image",
                  "command", "volume_claim", "volume_mount_path", "env_secret", "file_secret", "accepts_no_isolation",
                  "submitted_by", "submitted_at", "started_at", "finished_at", "borrowed", "queue_order",
                  "queue_position_team", "queue_position_overall", "estimated_start",
                  "pending_reason_code", "pending_reason"]
        read_only_fields = fields


# The hot list endpoints build plain dicts from values_list() with these {API name: ORM path}
# shapes (see ui.api.pagination) instead of running the serializers above row by row, several
# times faster on a 50-row page; tests/portal/test_cache.py checks both give the same JSON.
JOB_ROW = {name: name for name in JobSerializer.Meta.fields} | {
    "team": "team__name", "project": "project__name", "priority_class": "priority_class__name",
    "priority_value": "priority_class__value", "submitted_by": "submitted_by__username"}


def model_list(stored: str) -> list[str]:
    """A job's gpu_models column ('|'-separated) as the API shows it: a list."""
    return [model for model in stored.split("|") if model]


# Columns whose stored form differs from the API's, with the conversion the serializers make.
CONVERTED = {"gpu_models": model_list}


def as_dicts(rows, shape: dict[str, str]) -> list[dict]:
    names = list(shape)
    converted = [(name, CONVERTED[name]) for name in names if name in CONVERTED]
    made = [dict(zip(names, row, strict=True)) for row in rows]
    for row in made:
        for name, convert in converted:
            row[name] = convert(row[name])
    return made


class JobSubmitSerializer(StrictSerializer):
    team = serializers.SlugField()
    project = serializers.CharField(required=False, allow_blank=True, max_length=100)
    name = serializers.SlugField(max_length=100)
    kind = serializers.ChoiceField(choices=Job.Kind.choices)
    priority_class = serializers.CharField(max_length=40)
    gpus = serializers.IntegerField(min_value=0, max_value=4096, default=0)
    gpu_memory_gb = serializers.FloatField(min_value=0, default=0)
    mig_profile = serializers.CharField(required=False, allow_blank=True, max_length=30, default="")
    accepts_no_isolation = serializers.BooleanField(
        default=False, help_text="A sub-GPU job may run on a time-sliced GPU, where no memory limit keeps it "
                                 "and its neighbours apart (as the pod annotation tessera.io/accepts-no-isolation).")
    gpu_models = serializers.ListField(
        child=serializers.CharField(max_length=40), required=False, default=list, max_length=8,
        help_text="Pin the job to these GPU models (as jobs show them); empty: any.")
    gang = serializers.BooleanField(default=True)
    cpu_cores = serializers.FloatField(min_value=0.1, default=1)
    memory_gb = serializers.FloatField(min_value=0, default=8)
    checkpoint_interval_s = serializers.IntegerField(min_value=0, max_value=MAX_JOB_SECONDS, required=False,
                                                     allow_null=True, default=None)
    checkpoint_save_s = serializers.IntegerField(min_value=1, max_value=3600, required=False, allow_null=True,
                                                 default=None, help_text="Seconds a checkpoint takes to write.")
    expected_runtime_s = serializers.IntegerField(min_value=1, max_value=MAX_JOB_SECONDS, required=False,
                                                  allow_null=True, default=None)
    image = serializers.CharField(required=False, allow_blank=True, max_length=300, default="")
    command = serializers.CharField(required=False, allow_blank=True, max_length=1000, default="")
    volume_claim = serializers.CharField(
        required=False, allow_blank=True, max_length=253, default="",
        help_text="A PersistentVolumeClaim in the team's namespace (the name alone), mounted in every pod.")
    volume_mount_path = serializers.CharField(required=False, allow_blank=True, max_length=200,
                                              default="/checkpoints", help_text="Where the claim is mounted.")
    env_secret = serializers.CharField(
        required=False, allow_blank=True, max_length=253, default="",
        help_text="A Secret in the team's namespace whose keys become environment variables.")
    file_secret = serializers.CharField(
        required=False, allow_blank=True, max_length=253, default="",
        help_text="A Secret in the team's namespace, mounted read-only at /etc/secrets/<name>.")


class ReprioritiseSerializer(StrictSerializer):
    priority_class = serializers.CharField(max_length=40)


class NoFieldsSerializer(StrictSerializer):
    """A write that takes no fields (cancel): any field sent is a 400, not ignored."""


class ReorderSerializer(StrictSerializer):
    job_ids = serializers.ListField(child=serializers.IntegerField(min_value=1), max_length=100000)


class QueueEntrySerializer(serializers.ModelSerializer):
    priority_class = serializers.CharField(source="priority_class.name")
    submitted_by = serializers.CharField(source="submitted_by.username", default=None, allow_null=True)
    # Null until the first scheduling cycle after the job was submitted.
    position_team = serializers.IntegerField(source="queue_position_team", allow_null=True)
    position_overall = serializers.IntegerField(source="queue_position_overall", allow_null=True)
    reason_code = waiting_reason_field(source="pending_reason_code")
    reason = serializers.CharField(source="pending_reason")

    class Meta:
        model = Job
        fields = ["id", "name", "status", "kind", "priority_class", "gpus", "gpu_memory_gb", "submitted_by",
                  "submitted_at", "queue_order", "position_team", "position_overall", "estimated_start",
                  "reason_code", "reason"]
        read_only_fields = fields


QUEUE_ROW = {name: name for name in QueueEntrySerializer.Meta.fields} | {
    "priority_class": "priority_class__name", "submitted_by": "submitted_by__username",
    "position_team": "queue_position_team", "position_overall": "queue_position_overall",
    "reason_code": "pending_reason_code", "reason": "pending_reason"}


class UnitsField(serializers.FloatField):
    """GPU units as a JSON number (16, 0.5): DRF writes a DecimalField as a string ("16.000"), which a
    client must parse and which prints as 16.000. Quotas have 3 decimal places, so a float is exact enough."""

    def to_representation(self, value) -> int | float:
        number = float(value)
        return int(number) if number.is_integer() else number


class TeamSerializer(serializers.ModelSerializer):
    business_unit = serializers.CharField(source="business_unit.name")
    guaranteed_gpus = UnitsField(read_only=True, help_text=Team._meta.get_field("guaranteed_gpus").help_text)
    burst_limit_gpus = UnitsField(read_only=True, help_text=Team._meta.get_field("burst_limit_gpus").help_text)
    in_use_gpus = serializers.FloatField(source="in_use", read_only=True)
    borrowed_gpus = serializers.FloatField(source="borrowed_units", read_only=True)
    allowed_priority_classes = serializers.SlugRelatedField(many=True, read_only=True, slug_field="name")

    class Meta:
        model = Team
        fields = ["name", "business_unit", "guaranteed_gpus", "burst_limit_gpus", "weight", "in_use_gpus",
                  "borrowed_gpus", "allowed_priority_classes"]
        read_only_fields = fields


class SizingSerializer(serializers.Serializer):
    params_billion = serializers.FloatField(min_value=0.001, max_value=10000)
    precision = serializers.CharField(default="bf16")
    workload = serializers.CharField(default="inference")
    kv_cache_gb = serializers.FloatField(min_value=0, default=0)
    activations_gb = serializers.FloatField(min_value=0, default=0)


class ClusterNodeSerializer(serializers.Serializer):
    """Shape of one node in the cluster inventory (built by ui.cluster_view, per role)."""

    name = serializers.CharField()
    tier = serializers.CharField()
    leaf = serializers.CharField()
    state = serializers.CharField()
    interconnect = serializers.CharField()
    gpu_model = serializers.CharField()
    sharing = serializers.CharField(help_text="How its device plugin shares GPUs, in words (MPS × 4 ...).")
    sharing_mode = serializers.ChoiceField(choices=Node.GpuSharing.choices,
                                           help_text="GPU Feature Discovery's nvidia.com/gpu.sharing-strategy.")
    cells = serializers.ListField(child=serializers.DictField(), help_text="One per GPU; MIG instances in segments.")


class FreeCapacitySerializer(serializers.Serializer):
    """Free capacity of one GPU model (ui.selectors.free_by_model)."""

    model = serializers.CharField()
    gpus = serializers.IntegerField()
    free_gpus = serializers.IntegerField()
    free_slices = serializers.IntegerField()
    free_units = serializers.FloatField()


class ClusterPageSerializer(serializers.Serializer):
    """A page of the cluster inventory, with the free capacity of the nodes on it."""

    count = serializers.IntegerField()
    next = serializers.URLField(allow_null=True)
    previous = serializers.URLField(allow_null=True)
    results = ClusterNodeSerializer(many=True)
    free_by_model = FreeCapacitySerializer(many=True)
