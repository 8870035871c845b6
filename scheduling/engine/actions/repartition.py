"""repartition: move GPUs between whole and MIG use as the waiting demand asks.

Only GPUs whose removed instances are all idle are touched, and never one whose layout changed
less than `layout_min_age_s` ago (hysteresis, so layouts do not flap). A sub-GPU job that found
no slice gets an instance carved from an idle whole GPU (on the fullest node, to keep empty
nodes for gangs) or from the idle instances of a MIG GPU; a whole-GPU job that found no GPU
gets fully idle MIG GPUs turned back into whole GPUs. The jobs start in a later cycle, once the
new layout is confirmed.
"""

from __future__ import annotations

from ..memory import smallest_profile
from ..mig import geometry_for, start_choices
from ..placement import allowed_models, as_whole, search_order
from ..plan import Repartition
from .common import ordered

MAX_PER_CYCLE = 32
ATTEMPTS = 64
LAYOUT_MIN_AGE_S = 600.0


class _Planner:
    def __init__(self, session):
        self.session = session
        self.min_age = session.features.option("layout_min_age_s", LAYOUT_MIN_AGE_S)
        self.budget = session.features.option("max_repartitions_per_cycle", MAX_PER_CYCLE)
        self.planned: dict[tuple, list] = {}  # gpu key -> [gpu, mig_enabled, layout, mask]

    def aged(self, gpu) -> bool:
        return (gpu.key not in self.planned and gpu.usable and
                (gpu.changed_at is None or self.session.now - gpu.changed_at >= self.min_age))

    def for_slice(self, job) -> None:
        for tier, model in search_order(self.session, job, allowed_models(self.session, job)):
            geometry = geometry_for(model)
            profile = geometry and smallest_profile(geometry, job.gpu_memory_gb)
            if profile and (self._into_planned(model, tier, profile)
                            or self._reshape(model, tier, profile, job)
                            or self._whole_to_mig(model, tier, profile, job)):
                return

    def _into_planned(self, model, tier, profile) -> bool:
        for gpu, enabled, layout, mask in self.planned.values():
            if enabled and gpu.node.model == model and gpu.node.tier == tier:
                starts = start_choices(gpu.geometry, mask, profile)
                names = [gpu.geometry.resolve(n) for n, _ in layout]
                if starts and len(layout) < gpu.geometry.max_instances and \
                        names.count(profile) < profile.max_instances and \
                        sum(p.compute_slices for p in names) + profile.compute_slices <= \
                        gpu.geometry.compute_slices:
                    self._plan(gpu, True, layout + [(profile.name, starts[0])])
                    return True
        return False

    def _reshape(self, model, tier, profile, job) -> bool:
        """Drop idle instances of a MIG GPU that block the profile; keep the busy ones."""
        for buckets in self.session.mig.get((model, tier), {}).values():
            for gpu in buckets.values():
                if not self.aged(gpu) or not gpu.node.fits_host(job):
                    continue
                busy = [(inst[0], s) for s, inst in gpu.instances.items() if inst[1] is not None]
                busy_mask = 0
                for p, s in busy:
                    busy_mask |= p.mask_at(s)
                starts = start_choices(gpu.geometry, busy_mask, profile)
                if starts and len(busy) < len(gpu.instances):
                    layout = [(p.name, s) for p, s in busy] + [(profile.name, starts[0])]
                    self._plan(gpu, True, layout)
                    return True
        return False

    def _whole_to_mig(self, model, tier, profile, job) -> bool:
        buckets = self.session.whole.get((model, tier), {})
        for level in sorted(buckets):  # fullest node first: keep empty nodes for gangs
            for node in buckets[level].values():
                if not node.fits_host(job):
                    continue
                for gpu in node.gpus:
                    if gpu.whole_free and self.aged(gpu):
                        start = start_choices(gpu.geometry, 0, profile)[0]
                        self._plan(gpu, True, [(profile.name, start)])
                        return True
        return False

    def for_whole(self, job) -> None:
        """Turn fully idle MIG GPUs of one node back to whole GPUs for a one-node job."""
        count = (job.gpus or 1) * job.gang_size
        if count > self.session.max_gpus_per_node:
            return
        for tier, model in search_order(self.session, job, allowed_models(self.session, job)):
            if geometry_for(model) is None:
                continue
            for node in self._nodes(model, tier):
                free = sum(1 for g in node.gpus if g.whole_free)
                idle_mig = [g for g in node.gpus if g.mig_enabled and g.idle and self.aged(g)]
                if free < count <= free + len(idle_mig) and node.fits_host(job, job.gang_size):
                    for gpu in idle_mig[:count - free]:
                        self._plan(gpu, False, [])
                    return

    def _nodes(self, model, tier):
        seen = {}
        for buckets in self.session.mig.get((model, tier), {}).values():
            for gpu in buckets.values():
                seen.setdefault(gpu.node.name, gpu.node)
        return [seen[name] for name in sorted(seen)]

    def _plan(self, gpu, enabled: bool, layout) -> None:
        mask = 0
        for name, start in layout:
            mask |= gpu.geometry.resolve(name).mask_at(start)
        if gpu.key not in self.planned:
            self.budget -= 1
        self.planned[gpu.key] = [gpu, enabled, layout, mask]

    def emit(self) -> None:
        for gpu, enabled, layout, _ in self.planned.values():
            self.session.repartitions.append(Repartition(
                node=gpu.node.name, gpu_index=gpu.index, mig_enabled=enabled,
                layout=tuple(layout)))
            gpu.settling = True
            self.session.reindex_gpu(gpu)
            self.session.reindex_node(gpu.node)


def repartition(session) -> None:
    if not session.features.mig:
        return
    planner = _Planner(session)
    attempts = session.features.option("repartition_attempts", ATTEMPTS)
    waiting = [j for j in session.waiting() if j.id not in session.nominated
               and j.id not in session.reasons]
    for job in ordered(session, waiting):
        if planner.budget <= 0 or attempts <= 0:
            break
        attempts -= 1
        if as_whole(session, job):
            planner.for_whole(job)
        else:
            planner.for_slice(job)
    planner.emit()
