"""The cluster as Tessera knows it: tiers, switches, nodes, GPUs and their MIG instances."""

from __future__ import annotations

from decimal import ROUND_HALF_UP, Decimal

from django.core.exceptions import ValidationError
from django.core.validators import MaxValueValidator, MinValueValidator
from django.db import models
from django.db.models import Q

from scheduling.engine import mig


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
