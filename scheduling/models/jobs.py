"""Work: priority classes, jobs, where they run (placements), the pods taken in for them, their
events and the actions the workers carry out."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from decimal import Decimal

from django.conf import settings
from django.core.validators import MaxValueValidator, MinValueValidator
from django.db import models
from django.db.models import F, Q
from django.db.models.functions import Cast

from scheduling.engine.reasons import WaitingReason

from .cluster import Gpu, MigInstance, Node


class PriorityClass(models.Model):
    name = models.CharField(max_length=40, unique=True)
    value = models.IntegerField(unique=True, help_text="Higher runs first and may preempt lower.")
    preemptible = models.BooleanField(default=True)
    lead_only = models.BooleanField(default=False, help_text="Only team leads may submit with it.")
    description = models.CharField(max_length=200, blank=True)

    class Meta:
        ordering = ["-value"]
        verbose_name_plural = "priority classes"

    def __str__(self) -> str:
        return self.name


def run_id(started_at: datetime) -> int:
    """The id of a job's run that started at `started_at`: its start in microseconds since the
    epoch. The keys of a run's actions, its pods' and Service's names end in it, and a run's binds
    are found by it. The start second did not tell runs apart: a native job evicted, rejoined and
    placed again within the second of its first bind had its new bind refused as a duplicate key."""
    return (started_at - _EPOCH) // timedelta(microseconds=1)


_EPOCH = datetime(1970, 1, 1, tzinfo=UTC)


JOB_STATUSES = ["pending", "running", "checkpointing", "preempted", "completed", "failed", "cancelled"]
JOB_KINDS = ["inference", "training", "interactive", "batch"]


class Job(models.Model):
    class Kind(models.TextChoices):
        INFERENCE = "inference", "Inference"
        TRAINING = "training", "Training"
        INTERACTIVE = "interactive", "Interactive"
        BATCH = "batch", "Batch"

    class Status(models.TextChoices):
        PENDING = "pending", "Pending"
        RUNNING = "running", "Running"
        CHECKPOINTING = "checkpointing", "Checkpointing"
        PREEMPTED = "preempted", "Preempted"
        COMPLETED = "completed", "Completed"
        FAILED = "failed", "Failed"
        CANCELLED = "cancelled", "Cancelled"

    WAITING_STATUSES = ("pending", "preempted")  # the scheduler may place these
    HOLDING_STATUSES = ("running", "checkpointing")  # these hold placements
    ACTIVE_STATUSES = WAITING_STATUSES + HOLDING_STATUSES
    FINISHED_STATUSES = ("completed", "failed", "cancelled")

    team = models.ForeignKey("portal.Team", on_delete=models.PROTECT, related_name="jobs")
    project = models.ForeignKey("portal.Project", on_delete=models.PROTECT, related_name="jobs")
    submitted_by = models.ForeignKey(settings.AUTH_USER_MODEL, null=True, on_delete=models.SET_NULL,
                                     related_name="jobs")
    name = models.CharField(max_length=100)
    kind = models.CharField(max_length=20, choices=Kind.choices)
    priority_class = models.ForeignKey(PriorityClass, on_delete=models.PROTECT, related_name="jobs")
    gpus = models.PositiveSmallIntegerField(default=0, help_text="Whole GPUs; 0 means a sub-GPU job.")
    gpu_memory_gb = models.FloatField(default=0, help_text="Memory need per GPU (decides the slice).")
    gpu_models = models.CharField(max_length=200, blank=True, help_text="Allowed models, '|'-separated.")
    cpu_cores = models.FloatField(default=1)
    memory_gb = models.FloatField(default=8)
    gang = models.BooleanField(default=True, help_text="All GPUs at once or none.")
    members = models.PositiveSmallIntegerField(
        null=True, blank=True, help_text="Pods of a gang submitted on the cluster (a pod group), each with "
                                         "gpus / members GPUs; empty: one per node, as many as its GPUs need.")
    checkpoint_interval_s = models.PositiveIntegerField(null=True, blank=True)
    checkpoint_save_s = models.PositiveIntegerField(
        null=True, blank=True, help_text="Seconds the job needs to write a checkpoint (its grace on SIGTERM); "
                                         "empty: the cluster's default.")
    max_runtime_s = models.PositiveIntegerField(null=True, blank=True)
    expected_runtime_s = models.PositiveIntegerField(null=True, blank=True)
    preemptible = models.BooleanField(default=True)
    accepts_no_isolation = models.BooleanField(default=False, help_text=(
        "A share of it may run on a time-sliced GPU, where no memory limit keeps it and its neighbours "
        "apart (pod annotation tessera.io/accepts-no-isolation)."))
    image = models.CharField(max_length=300, blank=True)
    command = models.CharField(max_length=1000, blank=True)
    # What the team attaches to the job's pods, by name, from its own namespace (checked at submit).
    volume_claim = models.CharField(max_length=253, blank=True,
                                    help_text="A PersistentVolumeClaim mounted in every pod (checkpoints).")
    volume_mount_path = models.CharField(max_length=200, default="/checkpoints",
                                         help_text="Where the claim is mounted.")
    env_secret = models.CharField(max_length=253, blank=True,
                                  help_text="A Secret whose keys become environment variables.")
    file_secret = models.CharField(max_length=253, blank=True,
                                   help_text="A Secret mounted read-only at /etc/secrets/<name>.")
    mig_profile = models.CharField(max_length=32, blank=True, help_text=(
        "The one MIG profile the job may run in (a native pod's nvidia.com/mig-<profile>, which the kubelet "
        "fills only from an instance of that profile); empty: the smallest that holds its memory need."))
    namespace = models.CharField(max_length=63, blank=True, help_text=(
        "A native job's namespace (its pods were created there by someone else); empty: a portal job, "
        "whose pods Tessera creates in its team's namespace."))
    status = models.CharField(max_length=20, choices=Status.choices, default=Status.PENDING)
    queue_order = models.IntegerField(default=0, help_text="Lead-set order within the team; lower first.")
    borrowed = models.BooleanField(default=False, help_text="Runs on capacity above the team's quota.")
    progress_s = models.FloatField(default=0, help_text="Work saved by the last checkpoint.")
    last_checkpoint_at = models.DateTimeField(null=True, blank=True)
    pending_reason_code = models.CharField(max_length=40, blank=True, choices=WaitingReason.choices(),
                                           help_text="Why it waits (empty once it runs).")
    pending_reason = models.CharField(max_length=500, blank=True)
    estimated_start = models.DateTimeField(null=True, blank=True)
    queue_position_team = models.PositiveIntegerField(null=True, blank=True)
    queue_position_overall = models.PositiveIntegerField(null=True, blank=True)
    submitted_at = models.DateTimeField(auto_now_add=True)
    started_at = models.DateTimeField(null=True, blank=True)
    finished_at = models.DateTimeField(null=True, blank=True)
    updated_at = models.DateTimeField(auto_now=True)

    class Meta:
        ordering = ["-submitted_at"]
        indexes = [
            models.Index(fields=["status", "team"]),
            models.Index(fields=["team", "status", "queue_order"]),  # the team queue
            models.Index(fields=["team", "submitted_at"]),  # job lists, newest first
        ]
        constraints = [
            models.CheckConstraint(condition=Q(status__in=JOB_STATUSES), name="job_status_valid"),
            models.CheckConstraint(condition=Q(kind__in=JOB_KINDS), name="job_kind_valid"),
            models.CheckConstraint(condition=Q(gpus__gt=0) | Q(gpu_memory_gb__gt=0),
                                   name="job_needs_gpus_or_memory"),
            models.CheckConstraint(condition=Q(gpu_memory_gb__gte=0) & Q(cpu_cores__gt=0) & Q(memory_gb__gte=0),
                                   name="job_resources_non_negative"),
            models.CheckConstraint(
                condition=Q(finished_at__isnull=True) | Q(finished_at__gte=F("submitted_at")),
                name="job_finished_after_submitted"),
        ]

    def __str__(self) -> str:
        return f"#{self.pk} {self.name}"

    @property
    def is_active(self) -> bool:
        return self.status in self.ACTIVE_STATUSES

    @property
    def is_waiting(self) -> bool:
        return self.status in self.WAITING_STATUSES

    @property
    def allowed_gpu_models(self) -> tuple[str, ...]:
        return tuple(m for m in self.gpu_models.split("|") if m)

    @property
    def native(self) -> bool:
        """Its pods are someone else's, taken in by the intake (docs/reference/native-submission.md)."""
        return bool(self.namespace)

    @property
    def pod_namespace(self) -> str:
        return self.namespace or self.team.name

    @property
    def run(self) -> int:
        """Its current run's id (run_id); only for a job that has started."""
        assert self.started_at is not None, "a job that never started has no run"
        return run_id(self.started_at)


class Placement(models.Model):
    """One GPU (or MIG instance, or share of a GPU) held by a job from start until end."""

    job = models.ForeignKey(Job, on_delete=models.CASCADE, related_name="placements")
    gpu = models.ForeignKey(Gpu, on_delete=models.PROTECT, related_name="placements")
    # SET_NULL: a repartition deletes instances; finished placements keep what they held in
    # mig_profile, and an open placement's instance is never repartitioned away (engine rule).
    mig_instance = models.ForeignKey(MigInstance, null=True, blank=True, on_delete=models.SET_NULL,
                                     related_name="placements")
    mig_profile = models.CharField(max_length=30, blank=True, help_text="The MIG profile held, if any.")
    share_milli = models.PositiveSmallIntegerField(
        default=1000, validators=[MinValueValidator(1), MaxValueValidator(1000)],
        help_text="Share of the GPU in thousandths (1000 = whole GPU).")
    memory_gb = models.FloatField(default=0)
    started_at = models.DateTimeField()
    ended_at = models.DateTimeField(null=True, blank=True)
    end_reason = models.CharField(max_length=30, blank=True)

    class Meta:
        ordering = ["-started_at"]
        indexes = [models.Index(fields=["gpu", "ended_at"])]
        constraints = [
            models.UniqueConstraint(fields=["mig_instance"], condition=Q(ended_at__isnull=True),
                                    name="one_open_placement_per_mig_instance"),
            models.UniqueConstraint(fields=["gpu"], condition=Q(ended_at__isnull=True, share_milli=1000,
                                                                 mig_instance__isnull=True),
                                    name="one_open_whole_gpu_placement"),
            models.CheckConstraint(condition=Q(share_milli__gte=1) & Q(share_milli__lte=1000),
                                   name="placement_share_range"),
            models.CheckConstraint(condition=Q(ended_at__isnull=True) | Q(ended_at__gte=F("started_at")),
                                   name="placement_ends_after_start"),
        ]

    def __str__(self) -> str:
        target = self.mig_instance or self.gpu
        return f"{self.job} on {target}"

    def billed_fraction(self) -> Decimal:
        """GPU units held, as the ledger bills them and the quota gauge counts them
        (PLACEMENT_UNITS): a MIG
        instance its `gpu_fraction`, anything else its share."""
        if self.mig_instance_id:
            return self.mig_instance.gpu_fraction
        return Decimal(self.share_milli) / 1000

    @property
    def gpu_fraction(self) -> float:
        return float(self.billed_fraction())


# Placement.billed_fraction in SQL, for sums over many placements (quota gauge, usage series).
PLACEMENT_UNITS = models.Case(
    models.When(mig_instance__isnull=False, then=Cast("mig_instance__gpu_fraction", models.FloatField())),
    default=F("share_milli") / 1000.0, output_field=models.FloatField())


class NativePod(models.Model):
    """A pod someone else created for Tessera (spec.schedulerName), taken in as (a member of) a
    job. Its uid is the pod's identity: the intake never writes a second row, or job, for it."""

    job = models.ForeignKey(Job, on_delete=models.CASCADE, related_name="native_pods")
    uid = models.CharField(max_length=64, unique=True)
    namespace = models.CharField(max_length=63)
    name = models.CharField(max_length=253)
    owner_api_version = models.CharField(max_length=100, blank=True)
    owner_kind = models.CharField(max_length=100, blank=True, help_text="Its controller's (or first owner's) kind.")
    owner_name = models.CharField(max_length=253, blank=True)
    owner_uid = models.CharField(max_length=64, blank=True)
    group = models.CharField(max_length=253, blank=True, help_text="Its pod-group label (a gang); empty: none.")
    min_member = models.PositiveSmallIntegerField(
        null=True,
        blank=True,
        help_text="Its tessera.io/min-member annotation: its gang's size, where no PodGroup says.",
    )
    taken_at = models.DateTimeField()
    vacant = models.BooleanField(default=False, help_text=(
        "Its pod was stopped (a preemption, an eviction, a lost node) and the job waits, requeued, for the "
        "pod its controller makes again (same owner, group or name), which takes this place: same job, "
        "same saved progress."))

    class Meta:
        ordering = ["job", "name"]
        indexes = [models.Index(fields=["namespace", "name"])]

    def __str__(self) -> str:
        return f"{self.namespace}/{self.name}"

    @property
    def owner(self) -> str:
        return f"{self.owner_kind} {self.owner_name}" if self.owner_kind else ""


class JobEvent(models.Model):
    """The timeline of a job: submitted, placed, checkpointed, preempted, finished."""

    job = models.ForeignKey(Job, on_delete=models.CASCADE, related_name="events")
    at = models.DateTimeField()
    kind = models.CharField(max_length=30)
    message = models.CharField(max_length=500, blank=True)

    class Meta:
        ordering = ["at", "id"]

    def __str__(self) -> str:
        return f"{self.job_id} {self.kind} @ {self.at:%Y-%m-%d %H:%M}"


class ActionRequest(models.Model):
    """An intent the scheduler wrote and a backend must carry out (bind, preempt, checkpoint,
    repartition). It stays `requested` until the backend confirms; the next snapshot counts it
    as done so a cycle never asks twice. `key` makes a repeated or retried request a no-op."""

    class Kind(models.TextChoices):
        BIND = "bind", "Bind"
        PREEMPT = "preempt", "Preempt"
        CHECKPOINT = "checkpoint", "Checkpoint"
        REPARTITION = "repartition", "Repartition"

    class State(models.TextChoices):
        REQUESTED = "requested", "Requested"
        CONFIRMED = "confirmed", "Confirmed"
        FAILED = "failed", "Failed"

    key = models.CharField(max_length=120, unique=True)
    kind = models.CharField(max_length=20, choices=Kind.choices)
    state = models.CharField(max_length=20, choices=State.choices, default=State.REQUESTED)
    job = models.ForeignKey(Job, null=True, blank=True, on_delete=models.CASCADE, related_name="actions")
    node = models.ForeignKey(Node, null=True, blank=True, on_delete=models.CASCADE, related_name="actions")
    payload = models.JSONField(default=dict, blank=True)
    attempts = models.PositiveSmallIntegerField(default=0)
    last_error = models.CharField(max_length=500, blank=True)
    created_at = models.DateTimeField(auto_now_add=True)
    updated_at = models.DateTimeField(auto_now=True)

    class Meta:
        ordering = ["created_at", "id"]
        indexes = [models.Index(fields=["state", "kind"])]
        constraints = [
            models.CheckConstraint(condition=Q(kind__in=["bind", "preempt", "checkpoint", "repartition"]),
                                   name="action_kind_valid"),
            models.CheckConstraint(condition=Q(state__in=["requested", "confirmed", "failed"]),
                                   name="action_state_valid"),
        ]

    def __str__(self) -> str:
        return f"{self.kind} {self.key} ({self.state})"
