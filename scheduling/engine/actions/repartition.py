"""repartition: move GPUs between whole and MIG use as the waiting demand asks.

Only GPUs whose removed instances are all idle are touched, never one whose layout changed
less than `layout_min_age_s` ago (hysteresis, so layouts do not flap), and never on a node where
the change would cost work: mig-manager applies a layout node-wide and stops every GPU pod of
the node, so a node is reshaped only while that loses at most `repartition_max_lost_s` (default
none: services and freshly checkpointed jobs lose nothing). Reshaping a GPU that still runs
work counts against `max_repartitions_per_cycle`; a fully idle GPU is not capped (the waiting
demand bounds it), else a big backlog would dribble out over many cycles. A sub-GPU job that found
no slice gets an instance carved from an idle whole GPU (on the fullest node, to keep empty
nodes for gangs) or from the idle instances of a MIG GPU; a whole-GPU job that found no GPU
gets fully idle MIG GPUs turned back into whole GPUs. The jobs start in a later cycle, once the
new layout is confirmed.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING

from ..memory import smallest_profile
from ..mig import geometry_for, start_choices
from ..placement import allowed_models, as_whole, search_order
from ..plan import Repartition
from .common import min_units, ordered, refused, request_shape
from .evict import lost_work

if TYPE_CHECKING:
    from ..mig import MigProfile
    from ..session import RequestShape, Session
    from ..state import GpuKey, GpuState, NodeState, Outer, Shape
    from ..types import Job

Layout = list[tuple[str, int]]  # (profile name, start slot) of each MIG instance


@dataclass
class _Planned:
    """The layout planned for one GPU this cycle, and the memory slices it occupies."""

    gpu: GpuState
    mig_enabled: bool
    layout: Layout
    mask: int


class _Planner:
    def __init__(self, session: Session):
        self.session = session
        self.min_age = session.features.layout_min_age_s
        self.budget = session.features.max_repartitions_per_cycle
        self.planned: dict[GpuKey, _Planned] = {}
        self.open: dict[Outer, list[_Planned]] = {}  # planned MIG layouts per (model, tier), in plan order
        self.full: dict[Shape, set[GpuKey]] = {}  # profile shape -> planned GPUs it no longer fits
        self.spent: set[str] = set()  # nodes whose whole-free GPUs are all planned already
        self.awaited = _awaited_slots(session)  # (model, tier) -> idle slots of in-flight layouts
        self.stop_cost: dict[str, tuple[float, int]] = {}  # node -> (work lost, highest class stopped)
        self.carving_for: int | None = None  # the class of the sub-GPU job planned for
        self.mig_nodes: dict[tuple[str, str, float | None], list[tuple[NodeState, int, list[GpuState]]]] = {}

    def aged(self, gpu: GpuState) -> bool:
        return (gpu.geometry is not None and gpu.key not in self.planned and gpu.usable and
                (gpu.changed_at is None or self.session.now - gpu.changed_at >= self.min_age)
                and self.stops_little(gpu.node))

    def stops_little(self, node: NodeState) -> bool:
        """mig-manager applies a layout node-wide: every GPU pod on the node stops, not just the
        reshaped GPU's. Services lose nothing, training what it did since its last checkpoint
        (lost_work); a GPU user the session knows no job of is not counted. Without this rule
        the 20 tuning scenarios lost 232 GPU-hours to such stops (simulate sweep). Carving a slice
        serves one job, so like a preemption it stops no class above that job's: slices for two
        notebooks and an evaluation stopped six production replicas (serving-heavy, tuning seed
        103). Turning idle MIG GPUs back to whole ones is not bound so: no reshape stopping
        production at all kept MIG GPUs idle (tuning split: net utilisation 0.612 -> 0.579)."""
        cost = self.stop_cost.get(node.name)
        if cost is None:
            jobs = set()
            for gpu in node.gpus:
                if gpu.whole_job:
                    jobs.add(gpu.whole_job)
                jobs.update(job_id for job_id, _ in gpu.shares)
                jobs.update(inst[1] for inst in gpu.instances.values() if inst[1] is not None)
            members = self.session.members
            firsts = [members[j][0] for j in sorted(jobs) if members.get(j) and members[j][0].job is not None]
            cost = self.stop_cost[node.name] = (sum(lost_work(self.session, m) for m in firsts),
                                                max((m.known_job.priority for m in firsts), default=0))
        lost, top_class = cost
        return (lost <= self.session.features.repartition_max_lost_s
                and (self.carving_for is None or top_class <= self.carving_for))

    def for_slice(self, job: Job) -> bool:
        for tier, model in search_order(self.session, job, allowed_models(self.session, job)):
            geometry = geometry_for(model)
            profile = smallest_profile(geometry, job.gpu_memory_gb, job.mig_profile) if geometry is not None else None
            if profile and (self._awaits_settling(model, tier, job)
                            or self._into_planned(model, tier, profile)
                            or self._reshape(model, tier, profile, job)
                            or self._whole_to_mig(model, tier, profile, job)):
                return True
        return False

    def _awaits_settling(self, model: str, tier: str, job: Job) -> bool:
        """An earlier cycle's repartition, not confirmed yet, already made a slice that holds the
        job: it waits for that one instead of asking for another (which would repartition a GPU
        per cycle for as long as the first one settles)."""
        slots = self.awaited.get((model, tier), [])
        for i, memory_gb in enumerate(slots):
            if memory_gb >= job.gpu_memory_gb:
                del slots[i]
                return True
        return False

    def _into_planned(self, model: str, tier: str, profile: MigProfile) -> bool:
        # A planned layout only grows within a cycle, so a GPU a shape did not fit stays full.
        full = self.full.setdefault(profile.shape, set())
        for entry in self.open.get((model, tier), ()):
            gpu, layout, mask = entry.gpu, entry.layout, entry.mask
            if gpu.key in full:
                continue
            if self._fits_layout(gpu, layout, mask, profile):
                starts = start_choices(gpu.mig_geometry, mask, profile)
                self._plan(gpu, True, layout + [(profile.name, starts[0])])
                return True
            full.add(gpu.key)
        return False

    @staticmethod
    def _fits_layout(gpu: GpuState, layout: Layout, mask: int, profile: MigProfile) -> bool:
        geometry = gpu.mig_geometry
        names = [geometry.resolve(n) for n, _ in layout]
        return (bool(start_choices(geometry, mask, profile))
                and len(layout) < geometry.max_instances
                and names.count(profile) < profile.max_instances
                and sum(p.compute_slices for p in names) + profile.compute_slices
                <= geometry.compute_slices)

    def _reshape(self, model: str, tier: str, profile: MigProfile, job: Job) -> bool:
        """Drop idle instances of a MIG GPU that block the profile; keep the busy ones."""
        for buckets in self.session.mig.get((model, tier), {}).values():
            for gpu in buckets.values():
                if self.budget <= 0:
                    return False
                if not self.aged(gpu) or not gpu.node.fits_host(job):
                    continue
                busy = [(inst[0], s) for s, inst in gpu.instances.items() if inst[1] is not None]
                busy_mask = 0
                for p, s in busy:
                    busy_mask |= p.mask_at(s)
                starts = start_choices(gpu.mig_geometry, busy_mask, profile)
                if starts and len(busy) < len(gpu.instances):
                    layout = [(p.name, s) for p, s in busy] + [(profile.name, starts[0])]
                    self._plan(gpu, True, layout, capped=bool(busy))
                    return True
        return False

    def _whole_to_mig(self, model: str, tier: str, profile: MigProfile, job: Job) -> bool:
        buckets: Mapping[int, dict[str, NodeState]] = self.session.whole.get((model, tier), {})
        for level in sorted(buckets):  # fullest node first: keep empty nodes for gangs
            for node in buckets[level].values():
                if node.name in self.spent or not node.fits_host(job):
                    continue
                for gpu in node.gpus:
                    if gpu.whole_free and self.aged(gpu):
                        start = start_choices(gpu.mig_geometry, 0, profile)[0]
                        self._plan(gpu, True, [(profile.name, start)])
                        return True
                self.spent.add(node.name)
        return False

    def for_whole(self, job: Job) -> bool:
        """Turn fully idle MIG GPUs of one node back to whole GPUs for a one-node job."""
        count = (job.gpus or 1) * job.gang_size
        if count > self.session.max_gpus_per_node:
            return False
        for tier, model in search_order(self.session, job, allowed_models(self.session, job)):
            if geometry_for(model) is None:
                continue
            for node, free, idle in self._nodes(model, tier):
                if not free < count <= free + len(idle):
                    continue
                idle_mig = [g for g in idle if self.aged(g)]
                if count <= free + len(idle_mig) and node.fits_host(job, job.gang_size):
                    for gpu in idle_mig[:count - free]:
                        self._plan(gpu, False, [])
                    return True
        return False

    def _nodes(self, model: str, tier: str) -> list[tuple[NodeState, int, list[GpuState]]]:
        """Nodes with MIG GPUs of this model and tier, by name: (node, whole GPUs free, idle MIG
        GPUs). Kept while the reservations masked stay the same: nothing is placed or freed
        while it plans."""
        key = (model, tier, self.session.book.level_at)
        found = self.mig_nodes.get(key)
        if found is None:
            seen: dict[str, NodeState] = {}
            for buckets in self.session.mig.get((model, tier), {}).values():
                for gpu in buckets.values():
                    seen.setdefault(gpu.node.name, gpu.node)
            found = self.mig_nodes[key] = [_free_and_idle_mig(seen[name]) for name in sorted(seen)]
        return found

    def _plan(self, gpu: GpuState, enabled: bool, layout: Layout, capped: bool = False) -> None:
        """`capped`: the GPU still runs work, so this counts against the per-cycle budget."""
        mask = 0
        for name, start in layout:
            mask |= gpu.mig_geometry.resolve(name).mask_at(start)
        entry = self.planned.get(gpu.key)
        if entry is None:
            self.budget -= capped
            entry = self.planned[gpu.key] = _Planned(gpu, enabled, layout, mask)
            if enabled:
                self.open.setdefault((gpu.node.model, gpu.node.tier), []).append(entry)
        entry.mig_enabled, entry.layout, entry.mask = enabled, layout, mask

    def emit(self) -> None:
        for entry in self.planned.values():
            gpu = entry.gpu
            self.session.repartitions.append(Repartition(
                node=gpu.node.name, gpu_index=gpu.index, mig_enabled=entry.mig_enabled,
                layout=tuple(entry.layout)))
            gpu.settling = True
            self.session.reindex_gpu(gpu)
            self.session.reindex_node(gpu.node)


def _free_and_idle_mig(node: NodeState) -> tuple[NodeState, int, list[GpuState]]:
    """(node, its whole GPUs free, its idle MIG GPUs): whole_free and idle inlined in one pass,
    as every job this planner tries asks per node of its model and tier, once per class level
    (75 times a cycle over the 4,000-node bench's MIG nodes)."""
    free, idle = 0, []
    whole_ok = node.offers_whole and node.ready
    for g in node.gpus:
        if g.whole_job is not None or g.shares or g.busy:
            continue  # not idle
        if g.mig_enabled:
            idle.append(g)
        elif whole_ok and g.healthy and not g.settling and g.reserved is None:  # whole_free
            free += 1
    return node, free, idle


def repartition(session: Session) -> None:
    if not session.features.mig:
        return
    planner = _Planner(session)
    # Attempts bound the work spent on jobs no repartition helps; a request shape that found
    # nothing finds nothing again this cycle (planning only takes capacity).
    attempts = session.features.repartition_attempts
    failed: set[RequestShape] = set()
    planned_units: dict[str, float] = {}
    waiting = [j for j in session.waiting() if j.id not in session.nominated
               and j.id not in session.reasons]
    for job in ordered(session, waiting):
        if attempts <= 0:
            break
        shape = request_shape(session, job)
        if shape in failed or not _admitted(session, job, planned_units):
            continue
        if session.features.reserve:
            session.book.level(job.priority)  # never carve GPUs held for a job above it
        whole = as_whole(session, job)
        planner.carving_for = None if whole else job.priority
        helped = planner.for_whole(job) if whole else planner.for_slice(job)
        if helped:
            planned_units[job.team] = planned_units.get(job.team, 0.0) + min_units(session, job)
        else:
            attempts -= 1
            failed.add(shape)
    planner.emit()


def _awaited_slots(session: Session) -> dict[Outer, list[float]]:
    """Memory of each idle MIG instance on GPUs whose in-flight layout is still settling."""
    slots: dict[Outer, list[float]] = {}
    for node in session.nodes.values():
        for gpu in node.gpus:
            if gpu.settling and gpu.mig_enabled:
                free = [inst[0].memory_gb for inst in gpu.instances.values() if inst[1] is None]
                slots.setdefault(gpu.outer, []).extend(sorted(free))
    return slots


def _admitted(session: Session, job: Job, planned_units: dict[str, float]) -> bool:
    """Would the job be let in once its layout is ready, counting what was planned for its
    team this cycle? A repartition for a job the quota refuses only idles GPUs."""
    if not session.features.quota:
        return True
    units = min_units(session, job)
    used = session.usage.get(job.team, 0.0) + planned_units.get(job.team, 0.0)
    if used + units <= session.queue(job.team).guaranteed_gpus + 1e-9:
        return True
    return refused(session, job, units, used) is None
