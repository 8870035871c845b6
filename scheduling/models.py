"""Cluster state and work: the rows the scheduling engine's snapshot is built from."""

from __future__ import annotations

from decimal import ROUND_HALF_UP, Decimal

from django.conf import settings
from django.core.exceptions import ValidationError
from django.core.validators import MaxValueValidator, MinValueValidator
from django.db import models
from django.db.models import F, Q
from django.db.models.functions import Cast

from scheduling.engine import mig
from scheduling.engine.reasons import WaitingReason


def decimal_fraction(value: float) -> Decimal:
    """A GPU fraction as the six-place decimal quota and billing store."""
    return Decimal(value).quantize(Decimal("0.000001"), rounding=ROUND_HALF_UP)


class CapacityTier(models.Model):
    class Name(models.TextChoices):
        RESERVED = "reserved", "Reserved"
        ON_DEMAND = "on-demand", "On-demand"
        SPOT = "spot", "Spot"

    name = models.CharField(max_length=20, choices=Name.choices, unique=True)
    reclaimable = models.BooleanField(default=False, help_text="The provider may take nodes back (spot).")
    reclaim_notice_s = models.PositiveIntegerField(default=0, help_text="Notice before a reclaim.")

    class Meta:
        ordering = ["name"]
        constraints = [models.CheckConstraint(condition=Q(name__in=["reserved", "on-demand", "spot"]),
                                              name="tier_name_valid")]

    def __str__(self) -> str:
        return self.name


class NetworkSwitch(models.Model):
    class Kind(models.TextChoices):
        LEAF = "leaf", "Leaf"
        SPINE = "spine", "Spine"

    name = models.CharField(max_length=63, unique=True)
    kind = models.CharField(max_length=10, choices=Kind.choices)
    parent = models.ForeignKey("self", null=True, blank=True, on_delete=models.PROTECT,
                               related_name="children", help_text="The spine a leaf hangs off.")
    oversubscription = models.FloatField(default=1.0, validators=[MinValueValidator(1.0)])

    class Meta:
        ordering = ["kind", "name"]
        verbose_name_plural = "network switches"
        constraints = [
            models.CheckConstraint(condition=Q(kind__in=["leaf", "spine"]), name="switch_kind_valid"),
            models.CheckConstraint(condition=Q(oversubscription__gte=1.0), name="switch_oversub_min_one"),
        ]

    def __str__(self) -> str:
        return f"{self.name} ({self.kind})"


class Node(models.Model):
    class Interconnect(models.TextChoices):
        NVSWITCH = "nvswitch", "NVSwitch (all-to-all)"
        NVLINK_PAIRS = "nvlink-pairs", "NVLink pairs"
        PCIE = "pcie", "PCIe only"

    class GpuSharing(models.TextChoices):  # the engine's SHARING_MODES
        NONE = "none", "None (whole GPUs)"
        MPS = "mps", "MPS (memory-limited replicas)"
        TIME_SLICING = "time-slicing", "Time-slicing (no memory isolation)"

    class State(models.TextChoices):
        JOINING = "joining", "Joining (waiting for its agent's first report)"
        READY = "ready", "Ready"
        DRAINING = "draining", "Draining"
        LOST = "lost", "Lost"

    name = models.CharField(max_length=253, unique=True)
    tier = models.ForeignKey(CapacityTier, on_delete=models.PROTECT, related_name="nodes")
    leaf_switch = models.ForeignKey(NetworkSwitch, on_delete=models.PROTECT, related_name="nodes",
                                    limit_choices_to={"kind": "leaf"})
    gpu_model = models.CharField(max_length=40)
    interconnect = models.CharField(max_length=20, choices=Interconnect.choices)
    cpu_cores = models.PositiveIntegerField(validators=[MinValueValidator(1)])
    memory_gb = models.PositiveIntegerField(validators=[MinValueValidator(1)])
    nics = models.PositiveSmallIntegerField(default=1)
    nic_gbps = models.PositiveIntegerField(default=100)
    state = models.CharField(max_length=10, choices=State.choices, default=State.READY)
    last_heartbeat = models.DateTimeField(null=True, blank=True)
    agent_url = models.URLField(blank=True, help_text="The node agent's address, polled by workers.")
    # The cluster's word, kept in step by the poll (agents/inventory.py); typed nodes keep the defaults.
    schedulable = models.BooleanField(default=True, help_text=(
        "False while the cluster says no new pods here: not Ready, cordoned, or tainted NoSchedule/NoExecute."))
    allocatable_gpus = models.PositiveSmallIntegerField(null=True, blank=True, help_text=(
        "Whole GPUs the device plugin offers (status.allocatable); empty: every GPU row counts."))
    gpus_used_outside = models.PositiveSmallIntegerField(default=0, help_text=(
        "Whole GPUs pods Tessera did not place hold (other schedulers, DaemonSets): counted as used."))
    mig_used_outside = models.JSONField(default=dict, blank=True, help_text=(
        "MIG devices those pods hold, by profile ({\"1g.10gb\": 2}): as many idle instances count as used."))
    cluster_refusal = models.CharField(max_length=400, blank=True, help_text=(
        "Why Tessera places nothing new here although the cluster might (a MIG setup it cannot drive); "
        "empty: nothing."))
    telemetry_at = models.DateTimeField(null=True, blank=True, help_text=(
        "When its GPU readings last arrived (node agent or dcgm-exporter scrape); a heartbeat from the "
        "cluster alone does not move it."))
    gpu_sharing = models.CharField(max_length=12, choices=GpuSharing.choices, default=GpuSharing.NONE, help_text=(
        "How its device plugin shares GPUs (GPU Feature Discovery's nvidia.com/gpu.sharing-strategy): "
        "a sharing node offers only replicas, no whole GPU."))
    gpu_replicas = models.PositiveSmallIntegerField(default=1, validators=[MinValueValidator(1)], help_text=(
        "Replicas per GPU the device plugin offers (nvidia.com/gpu.replicas); 1 when it does not share."))

    class Meta:
        ordering = ["name"]
        constraints = [
            models.CheckConstraint(condition=Q(state__in=["joining", "ready", "draining", "lost"]),
                                   name="node_state_valid"),
            models.CheckConstraint(condition=Q(interconnect__in=["nvswitch", "nvlink-pairs", "pcie"]),
                                   name="node_interconnect_valid"),
            models.CheckConstraint(condition=Q(cpu_cores__gte=1) & Q(memory_gb__gte=1),
                                   name="node_capacity_positive"),
            models.CheckConstraint(condition=Q(gpu_sharing__in=["none", "mps", "time-slicing"])
                                   & Q(gpu_replicas__gte=1),
                                   name="node_gpu_sharing_valid"),
        ]

    def __str__(self) -> str:
        return self.name


class Gpu(models.Model):
    node = models.ForeignKey(Node, on_delete=models.CASCADE, related_name="gpus")
    index = models.PositiveSmallIntegerField()
    uuid = models.CharField(max_length=64, unique=True)
    model = models.CharField(max_length=40)
    memory_gb = models.FloatField(validators=[MinValueValidator(1)])
    mig_capable = models.BooleanField(default=False)
    mig_enabled = models.BooleanField(default=False)
    utilization = models.FloatField(default=0.0, help_text="Last measured SM utilisation, 0–1.")
    memory_used_gb = models.FloatField(default=0.0)
    healthy = models.BooleanField(default=True, help_text="False while its node's agent does not report it "
                                                          "(failed, fallen off the bus): it takes no new work.")
    layout_changed_at = models.DateTimeField(null=True, blank=True, help_text=(
        "When its MIG mode or layout last changed (a confirmed repartition): the engine leaves a "
        "younger layout alone (hysteresis)."))

    class Meta:
        ordering = ["node__name", "index"]
        verbose_name = "GPU"
        constraints = [
            models.UniqueConstraint(fields=["node", "index"], name="gpu_unique_index_per_node"),
            models.CheckConstraint(condition=Q(memory_gb__gt=0), name="gpu_memory_positive"),
            models.CheckConstraint(condition=Q(mig_enabled=False) | Q(mig_capable=True),
                                   name="gpu_mig_needs_capable"),
            models.CheckConstraint(condition=Q(utilization__gte=0) & Q(utilization__lte=1),
                                   name="gpu_utilization_fraction"),
        ]

    def __str__(self) -> str:
        return f"{self.node.name}/gpu{self.index}"


class MigInstance(models.Model):
    """One MIG GPU instance. `gpu_fraction` is the one definition of what it counts for: its compute
    slices over its GPU's (from the MIG geometry: 1g on an A100 or H100 is 1/7, on an A30 1/4).
    The quota gauge, free capacity, placements and the bill all read it; the engine computes the
    same number from the same geometry (`MigGeometry.gpu_fraction`)."""

    gpu = models.ForeignKey(Gpu, on_delete=models.CASCADE, related_name="mig_instances")
    profile = models.CharField(max_length=30, help_text="As the driver names it, e.g. 3g.40gb.")
    start_slot = models.PositiveSmallIntegerField(validators=[MaxValueValidator(7)])
    size_slots = models.PositiveSmallIntegerField(validators=[MinValueValidator(1), MaxValueValidator(8)])
    compute_slices = models.PositiveSmallIntegerField(validators=[MinValueValidator(1), MaxValueValidator(7)])
    memory_gb = models.FloatField()
    # Six places hold k/7 closely enough that a fully sliced GPU sums to 1 within 0.000001.
    gpu_fraction = models.DecimalField(
        max_digits=7, decimal_places=6, validators=[MinValueValidator(Decimal("0.000001")),
                                                    MaxValueValidator(Decimal("1"))],
        help_text="GPU units it counts for: compute slices / the GPU's compute slices (7; 4 on an A30).")
    # The last reading of this slice. utilization None with measured_at set: the source reported the
    # slice but cannot measure its activity (NVML on a MIG GPU): "not measured", never 0.
    utilization = models.FloatField(null=True, blank=True, help_text="Last measured activity, 0–1 (dcgm-exporter's "
                                    "DCGM_FI_PROF_GR_ENGINE_ACTIVE); empty: not measured.")
    memory_used_gb = models.FloatField(null=True, blank=True)
    measured_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        ordering = ["gpu", "start_slot"]
        verbose_name = "MIG instance"
        constraints = [
            models.UniqueConstraint(fields=["gpu", "start_slot"], name="mig_unique_start_per_gpu"),
            models.CheckConstraint(condition=Q(start_slot__lte=7) & Q(size_slots__gte=1) & Q(size_slots__lte=8),
                                   name="mig_slot_range"),
        ]

    def __str__(self) -> str:
        return f"{self.gpu} {self.profile}@{self.start_slot}"

    def clean(self) -> None:
        """Checked against the GPU model's MIG geometry (a made-up profile or an overlap used to stop
        every cycle); the derived fields are filled from the geometry, never typed."""
        super().clean()
        if self.gpu_id is None or self.start_slot is None:
            return
        try:
            derived = MigInstance.for_profile(self.gpu, self.profile, self.start_slot)
        except ValueError as exc:
            raise ValidationError({"profile": str(exc)}) from exc
        except KeyError:
            geometry = mig.geometry_for(self.gpu.model)
            names = ", ".join(p.name for p in geometry.profiles) if geometry else ""
            raise ValidationError({"profile": f"{self.profile!r} is not a MIG profile of {self.gpu.model}; "
                                              f"it offers {names}."}) from None
        others = self.gpu.mig_instances.exclude(pk=self.pk).values_list("profile", "start_slot")
        errors = mig.layout_errors(mig.geometry_for(self.gpu.model), [*others, (derived.profile, self.start_slot)])
        if errors:
            raise ValidationError({"start_slot": [f"{error}." for error in errors]})
        for name in ("profile", "size_slots", "compute_slices", "memory_gb", "gpu_fraction"):
            setattr(self, name, getattr(derived, name))

    @classmethod
    def for_profile(cls, gpu: Gpu, profile: str, start_slot: int) -> MigInstance:
        """An unsaved instance of `profile` (a driver name such as 3g.39gb resolves to its shape) at
        `start_slot` of `gpu`, every derived field taken from the GPU model's MIG geometry."""
        geometry = mig.geometry_for(gpu.model)
        if geometry is None:
            raise ValueError(f"{gpu.model} has no MIG geometry; {gpu} cannot hold MIG instances")
        shape = geometry.resolve(profile)
        return cls(gpu=gpu, profile=shape.name, start_slot=start_slot, size_slots=shape.memory_slices,
                   compute_slices=shape.compute_slices, memory_gb=shape.memory_gb,
                   gpu_fraction=decimal_fraction(geometry.gpu_fraction(shape)))

    @property
    def share_milli(self) -> int:
        """The instance as a placement's share in thousandths (rounded: what billing reads is
        `gpu_fraction`)."""
        return round(1000 * self.gpu_fraction)


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


class GpuSample(models.Model):
    """A measured utilisation sample from a node agent, for the utilisation charts."""

    gpu = models.ForeignKey(Gpu, on_delete=models.CASCADE, related_name="samples")
    at = models.DateTimeField()
    utilization = models.FloatField()
    memory_used_gb = models.FloatField()

    class Meta:
        ordering = ["-at"]
        indexes = [models.Index(fields=["gpu", "at"])]
        constraints = [models.UniqueConstraint(fields=["gpu", "at"], name="gpu_sample_unique_time")]

    def __str__(self) -> str:
        return f"{self.gpu_id} @ {self.at:%Y-%m-%d %H:%M}: {self.utilization:.0%}"


class MigSample(models.Model):
    """One reading of one MIG instance, for a MIG job's charts. utilization is null where the
    source cannot measure a slice (NVML in MIG mode): not measured, which is not idle."""

    mig_instance = models.ForeignKey(MigInstance, on_delete=models.CASCADE, related_name="samples")
    at = models.DateTimeField()
    utilization = models.FloatField(null=True, blank=True)
    memory_used_gb = models.FloatField(null=True, blank=True)

    class Meta:
        ordering = ["-at"]
        verbose_name = "MIG instance sample"
        indexes = [models.Index(fields=["mig_instance", "at"])]
        constraints = [models.UniqueConstraint(fields=["mig_instance", "at"], name="mig_sample_unique_time")]

    def __str__(self) -> str:
        return f"{self.mig_instance_id} @ {self.at:%Y-%m-%d %H:%M}"


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
