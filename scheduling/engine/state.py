"""Mutable per-cycle state of one GPU, one node and one job member (the session's copy)."""

from __future__ import annotations

from collections.abc import Iterable
from collections.abc import Set as AbstractSet
from operator import attrgetter
from typing import Any

from .mig import MigGeometry, MigProfile, geometry_for, layout_errors
from .types import NODE_READY, SHARING_NONE, Allocation, Gpu, Job, Node

GpuKey = tuple[str, int]  # (node name, GPU index)
Outer = tuple[str, str]  # (canonical GPU model, tier): the outer bucket of every free-capacity index
Shape = tuple[int, int]  # a MIG profile's (compute slices, memory slices)
_NO_SHAPES: frozenset[Shape] = frozenset()


class GpuState:
    """A GPU as the cycle sees it. MIG instances are {start: [profile, job_id, created]}, where
    `created` marks an instance made by a tentative bind of this cycle (undone with it)."""

    __slots__ = ("node", "gpu", "index", "key", "geometry", "memory_gb", "mig_enabled",
                 "instances", "used_mask", "compute_used", "whole_job", "shares", "milli_used",
                 "mem_used", "settling", "changed_at", "healthy", "mig_key", "share_key", "idle_shapes",
                 "busy", "outer", "reserved", "layout_errors")

    def __init__(self, node: NodeState, gpu: Gpu, geometry: MigGeometry | None):
        # Every cycle builds one per GPU (32,000 at 4,000 nodes): attributes read once, the
        # layout's instances added inline (add_instance and set_user, in the same order).
        self.node = node
        self.gpu = gpu
        self.index = index = gpu.index
        self.key = (node.name, index)
        self.outer = node.outer  # the index bucket of its node's model and tier
        if not gpu.mig_capable:
            geometry = None
        self.geometry = geometry
        self.memory_gb = gpu.memory_gb
        self.mig_enabled = mig_enabled = gpu.mig_enabled and geometry is not None
        self.instances: dict[int, list[Any]] = {}  # start -> [MigProfile, job id or None, created]
        self.used_mask = 0
        self.compute_used = 0
        self.whole_job: str | None = None
        self.shares: dict[tuple[str, int], tuple[int, float]] = {}
        self.milli_used = 0
        self.mem_used = 0.0
        self.settling = False
        self.changed_at = gpu.layout_changed_at
        self.healthy = gpu.healthy
        # where the session's indexes file it (session.reindex_gpu): (outer, bucket) or None, shapes
        self.mig_key: tuple[Outer, int] | None = None
        self.share_key: tuple[Outer, int] | None = None
        self.idle_shapes: AbstractSet[Shape] = _NO_SHAPES
        self.busy = 0  # MIG instances in use
        self.reserved: str | None = None  # holder of a reservation masking it (reservations.py)
        self.layout_errors: tuple[str, ...] = ()
        if mig_enabled and geometry is not None:  # (mig_enabled says it has one)
            instances = gpu.mig_instances
            errors, profiles, self.used_mask, self.compute_used = _layout(geometry,
                                                                          tuple(map(_NAME_START, instances)))
            if errors:
                # One bad row (a typo in the admin, an overlap) must not stop the cycle for every
                # GPU: this one takes no work and is reported in the plan until its layout is fixed.
                self.layout_errors = errors
                self.healthy = False
            else:
                # add_instance and set_user for each, in the layout's order (the masks and slices
                # come with the layout)
                mine = self.instances
                busy = 0
                for inst, profile in zip(instances, profiles, strict=True):
                    job_id = inst.job_id
                    mine[inst.start] = [profile, job_id, False]  # held even if no running member says so
                    busy += job_id is not None
                self.busy = busy

    def add_instance(self, profile: MigProfile, start: int, created: bool = False) -> None:
        self.instances[start] = [profile, None, created]
        self.used_mask |= profile.mask_at(start)
        self.compute_used += profile.compute_slices

    def drop_instance(self, start: int) -> None:
        profile, job_id, _ = self.instances.pop(start)
        self.busy -= job_id is not None
        self.used_mask &= ~profile.mask_at(start)
        self.compute_used -= profile.compute_slices

    @property
    def mig_geometry(self) -> MigGeometry:
        """The MIG geometry of a GPU that has one (every GPU in MIG mode does)."""
        if self.geometry is None:
            raise ValueError(f"GPU {self.key} cannot do MIG")
        return self.geometry

    def set_layout(self, mig_enabled: bool, layout: tuple[tuple[str, int], ...]) -> None:
        self.instances.clear()
        self.used_mask = self.compute_used = self.busy = 0
        self.mig_enabled = mig_enabled and self.geometry is not None
        if self.mig_enabled:
            for name, start in layout:
                self.add_instance(self.mig_geometry.resolve(name), start)

    def set_user(self, start: int, job_id: str | None) -> None:
        inst = self.instances[start]
        self.busy += (job_id is not None) - (inst[1] is not None)
        inst[1] = job_id

    @property
    def idle(self) -> bool:
        return self.whole_job is None and not self.shares and not self.busy

    @property
    def busy_compute(self) -> int:
        """Compute slices of the MIG instances in use: all it has made (compute_used) when every
        instance is in use, as on most MIG GPUs of a busy cluster, else a pass over them."""
        if self.busy == len(self.instances):
            return self.compute_used
        return sum(inst[0].compute_slices for inst in self.instances.values() if inst[1] is not None)

    @property
    def free_units(self) -> float:
        """The part of the GPU no job holds, usable or not: in MIG mode its idle share of compute
        slices, else 1 less a whole job or its shares' milli-GPUs."""
        if self.mig_enabled:
            geometry = self.mig_geometry
            return (geometry.compute_slices - self.busy_compute) / geometry.compute_slices
        return 0.0 if self.whole_job else 1 - self.milli_used / 1000

    @property
    def usable(self) -> bool:
        return self.healthy and not self.settling and self.node.ready and self.reserved is None

    @property
    def whole_free(self) -> bool:
        return self.usable and not self.mig_enabled and self.idle and self.node.offers_whole

    def count_profile(self, profile: MigProfile) -> int:
        return sum(1 for inst in self.instances.values() if inst[0] is profile)

    def can_create(self, profile: MigProfile) -> bool:
        geometry = self.mig_geometry
        return (len(self.instances) < geometry.max_instances
                and self.compute_used + profile.compute_slices <= geometry.compute_slices
                and self.count_profile(profile) < profile.max_instances)

    def units(self, allocation: Allocation) -> float:
        """GPU units an allocation counts for in quotas (MIG: compute slices / 7 or / 4)."""
        if allocation.mig_profile is not None:
            if self.layout_errors:  # its profile may not resolve: count the whole faulty GPU
                return 1.0
            return _mig_units(self.mig_geometry, allocation.mig_profile)
        milli = allocation.milli
        return 1.0 if milli >= 1000 else milli / 1000


_UNITS: dict[tuple[str, str], float] = {}
# Per (model, profile name) and (model, layout) below: every MIG GPU of every cycle asks, and the
# answers are fixed (a cluster has a handful of layouts; the bound only guards against a stream of typos).
_PROFILES: dict[tuple[str, str], MigProfile] = {}
_CACHE_BOUND = 4096


_NAME_START = attrgetter("profile", "start")
# (errors, each instance's profile, memory-slice mask, compute slices) per (model, layout): what
# loading a MIG GPU works out from its layout alone
_LAYOUTS: dict[tuple[str, tuple[tuple[str, int], ...]], tuple[tuple[str, ...], tuple[MigProfile, ...], int, int]] = {}


def _layout(geometry: MigGeometry,
            layout: tuple[tuple[str, int], ...]) -> tuple[tuple[str, ...], tuple[MigProfile, ...], int, int]:
    key = (geometry.model, layout)
    known = _LAYOUTS.get(key)
    if known is None:
        if len(_LAYOUTS) >= _CACHE_BOUND:
            _LAYOUTS.clear()
        errors = tuple(layout_errors(geometry, layout))
        profiles = () if errors else tuple(_profile(geometry, name) for name, _ in layout)
        mask = compute = 0
        for profile, (_, start) in zip(profiles, layout, strict=False):  # add_instance's sums (none if errors)
            mask |= profile.mask_at(start)
            compute += profile.compute_slices
        known = _LAYOUTS[key] = (errors, profiles, mask, compute)
    return known


def _profile(geometry: MigGeometry, name: str) -> MigProfile:
    """geometry.resolve, cached (a valid layout's names all resolve)."""
    key = (geometry.model, name)
    profile = _PROFILES.get(key)
    if profile is None:
        if len(_PROFILES) >= _CACHE_BOUND:
            _PROFILES.clear()
        profile = _PROFILES[key] = geometry.resolve(name)
    return profile


def _mig_units(geometry: MigGeometry, name: str) -> float:
    """Cached: resolving a profile name is a scan, and every loaded allocation asks."""
    key = (geometry.model, name)
    units = _UNITS.get(key)
    if units is None:
        units = _UNITS[key] = geometry.gpu_fraction(geometry.resolve(name))
    return units


class NodeState:
    __slots__ = ("node", "name", "tier", "model", "outer", "free_cpu", "free_mem", "gpus", "ready",
                 "whole_key", "offers_whole", "offers_shares", "version", "_free")

    def __init__(self, node: Node, model: str):
        self.node = node
        self.name = node.name
        self.tier = node.tier
        self.model = model
        self.outer = (model, node.tier)
        self.free_cpu = float(node.cpu_cores)
        self.free_mem = float(node.memory_gb)
        self.ready = node.state == NODE_READY
        # A sharing device plugin offers replicas only, a plain one whole GPUs only (engine/sharing.py),
        # whatever the policy: the node's plugin is a fact of the cluster, not a scheduler's choice.
        self.offers_whole = node.sharing == SHARING_NONE
        self.offers_shares = node.sharing != SHARING_NONE
        geometry = geometry_for(model)
        self.gpus = [GpuState(self, gpu, geometry) for gpu in node.gpus]
        self.whole_key: tuple[Outer, int] | None = None  # its bucket in the session's whole index
        self.version = 0  # bumped whenever the session reindexes it: what is cached per node is stale
        self._free: tuple[int, list[int]] | None = None  # (version, free_whole())

    def fits_host(self, job: Job, members: int = 1) -> bool:
        return (self.free_cpu >= job.cpu_cores * members - 1e-9
                and self.free_mem >= job.memory_gb * members - 1e-9)

    def free_whole(self) -> list[int]:
        """Indexes of its free whole GPUs, kept until the session reindexes the node (which it
        does after every change to its GPUs): every candidate node of every whole-GPU job and
        gang asks, often several times. Callers must not change the list."""
        cached = self._free
        if cached is not None and cached[0] == self.version:
            return cached[1]
        free = [] if not self.ready or not self.offers_whole else [
            # whole_free inlined
            g.index for g in self.gpus if not g.mig_enabled and g.whole_job is None
            and not g.shares and g.healthy and not g.settling and g.reserved is None]
        if self.version:  # 0: still loading, GPUs change without a reindex
            self._free = (self.version, free)
        return free


class Member:
    """One job member holding resources in this cycle's view (running, in flight or placed)."""

    __slots__ = ("job_id", "team", "job", "node", "allocations", "borrowed", "started_at",
                 "member", "new", "units")

    def __init__(self, job_id: str, team: str, job: Job | None, node: str, allocations: Iterable[Allocation],
                 borrowed: bool, started_at: float, member: int, new: bool = False):
        self.job_id = job_id
        self.team = team
        self.job: Job | None = job
        self.node: str = node
        self.allocations: tuple[Allocation, ...] = tuple(allocations)
        self.borrowed = borrowed
        self.started_at = started_at
        self.member = member
        self.new = new
        self.units = 0.0

    @property
    def known_job(self) -> Job:
        """The job, for a member the snapshot describes (running, or placed this cycle); only an
        in-flight bind of a job no longer pending has none, and nothing may stop or move it."""
        if self.job is None:
            raise ValueError(f"job {self.job_id} is bound in flight but not in the snapshot")
        return self.job
