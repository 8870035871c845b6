"""The simulated backend: what exists (nodes, MIG layouts, bound pods) and the engine's view of
it. Snapshots are built incrementally: a node's frozen Node is rebuilt only when its layout or
state changed, a pod's Running only when it is bound (or its checkpoint moves on)."""

from __future__ import annotations

from dataclasses import replace

from scheduling.engine.fair_history import HALF_LIFE_S, decay, decayed_gpu_s
from scheduling.engine.memory import smallest_profile
from scheduling.engine.mig import geometry_for
from scheduling.engine.policies import get_policy
from scheduling.engine.types import (
    PRIORITY_CLASSES,
    PRODUCTION,
    SHARING_MPS,
    SHARING_NONE,
    SHARING_TIME_SLICING,
    Job,
    Queue,
    Running,
    Snapshot,
    UsageHistory,
)

from .cluster import NodeInfo, allocation_memory, allocation_units, engine_node
from .jobs import WAITING, Member, SimJob
from .policies import REPLICAS, Mode, static_mig_layout
from .spec import ClusterSpec, JobSpec

TIMESLICE_MEMORY_GB = 0.001  # what a time-sliced job declares: memory is not looked at
SIM_HOST_MEMORY_GB = 4.0  # host RAM per member: the workloads give none, so it never binds


def serving_namespace(team: str) -> str:
    """The namespace a team's production serving runs in when it is kept apart from its training
    (Backend.namespace), and the engine's queue row for it where no team's queue counts it."""
    return f"{team}/serving"


class Backend:
    def __init__(self, spec: ClusterSpec, infos: dict[str, NodeInfo], mode: Mode):
        self.spec, self.infos, self.mode = spec, infos, mode
        self.present: dict[str, str] = {}              # node -> state (ready/draining)
        self.layouts: dict[str, dict[int, dict[int, list]]] = {}
        self.changed_at: dict[str, dict[int, float]] = {}
        self.node_cache: dict[str, object] = {}
        self.residents: dict[tuple[str, int], dict[tuple[str, int], float]] = {}
        self.gpu_units: dict[tuple[str, int], float] = {}  # GPU units bound per GPU (idle attribution)
        self.team_units: dict[str, float] = {}
        self.queues = tuple(Queue(team=t.name, guaranteed_gpus=t.guaranteed_gpus,
                                  burst_limit_gpus=t.burst_limit_gpus, weight=t.weight) for t in spec.teams)
        if mode.serving_unqueued:  # serving's namespaces, outside every team's queue (SERVING_UNQUEUED, _OWN_QUEUE)
            self.queues += tuple(Queue(team=serving_namespace(t.name), guaranteed_gpus=float(spec.gpus),
                                       burst_limit_gpus=None, weight=t.weight) for t in spec.teams)
        self.caps = {t.name: t.burst_limit_gpus for t in spec.teams}
        self.max_per_node = max(g.gpus_per_node for g in spec.groups)
        self.min_gpu_memory = min(g.gpu_memory_gb for g in spec.groups)
        self.pods: dict[str, tuple[SimJob, int]] = {}  # engine job id -> (job, member)
        self.sub_gpu_cache: dict[tuple, bool] = {}
        # Fair share over time, as the live ledger gives it (scheduling/usage_history.py): per team
        # the decayed GPU-seconds of released members, as of the time beside it; `since` is the
        # first bind (the live side: the first usage interval in the window).
        self.half_life_s = HALF_LIFE_S
        self.used: dict[str, tuple[float, float]] = {}
        self.since: float | None = None
        # Tests that mirror the simulator into ledger rows set a list: (job, member, released) each.
        self.ledger: list[tuple[str, Member, float]] | None = None
        for name in infos:
            self.add_node(name, None)

    # --- nodes and MIG layouts --------------------------------------------------------------

    def add_node(self, name: str, now: float | None) -> None:
        group = self.infos[name].group
        self.present[name] = "ready"
        mig = group.mig_enabled_gpus if self.mode.mig else 0
        self.layouts[name] = {i: static_mig_layout(group.gpu_model) if self.mode.mig_static else {}
                              for i in range(mig)}
        self.changed_at[name] = {}
        self.node_cache.pop(name, None)

    def remove_node(self, name: str) -> None:
        del self.present[name]
        self.node_cache.pop(name, None)

    def set_state(self, name: str, state: str) -> None:
        self.present[name] = state
        self.node_cache.pop(name, None)

    def set_layout(self, name: str, gpu: int, mig_enabled: bool, layout, now: float) -> None:
        old = self.layouts[name].get(gpu, {})
        if any(inst[1] is not None for inst in old.values()):
            busy = {s for s, inst in old.items() if inst[1] is not None}
            kept = {s for _, s in layout}
            if not mig_enabled or not busy <= kept:
                raise RuntimeError(f"repartition of {name}/{gpu} removes a busy MIG instance")
        if mig_enabled:
            self.layouts[name][gpu] = {s: [p, old.get(s, [p, None])[1]] for p, s in layout}
        else:
            self.layouts[name].pop(gpu, None)
        self.changed_at[name][gpu] = now
        self.node_cache.pop(name, None)

    def idle_gpus(self) -> list[tuple[tuple[str, int], str, float]]:
        """((node, GPU index), node state, free units) of every GPU no pod holds all of."""
        out = []
        for name, state in self.present.items():
            for index in range(self.infos[name].group.gpus_per_node):
                free = 1.0 - self.gpu_units.get((name, index), 0.0)
                if free > 1e-9:
                    out.append(((name, index), state, free))
        return out

    def nodes(self) -> tuple:
        out = []
        for name, state in self.present.items():
            node = self.node_cache.get(name)
            if node is None:
                node = engine_node(self.infos[name], self.layouts[name], state, self.changed_at[name])
                self.node_cache[name] = node
            out.append(node)
        return tuple(out)

    # --- binding and releasing pods ---------------------------------------------------------

    def bind(self, job: SimJob, member: int, node: str, allocations, borrowed: bool,
             now: float) -> Member:
        group = self.infos[node].group
        units = sum(allocation_units(group, a) for a in allocations)
        need = job.spec.gpu_mem_gb or group.gpu_memory_gb
        waste = sum(max(0.0, allocation_memory(group, a) - need) for a in allocations)
        for alloc in allocations:
            if alloc.mig_profile is not None:
                layout = self.layouts[node].setdefault(alloc.gpu_index, {})
                layout.setdefault(alloc.mig_start, [alloc.mig_profile, None])[1] = job.spec.job_id
                self.node_cache.pop(node, None)
            key = (node, alloc.gpu_index)
            self.gpu_units[key] = self.gpu_units.get(key, 0.0) + allocation_units(group, alloc)
            used = sum(self.residents.get(key, {}).values())
            if used + need > group.gpu_memory_gb + 1e-6:
                job.doomed = True  # the memory is not there: this pod fails with OOM
            self.residents.setdefault(key, {})[(job.spec.job_id, member)] = 0.0 if job.doomed else need
        placed = Member(node, tuple(allocations), now, borrowed, units, waste)
        self.since = now if self.since is None else self.since
        job.bound[member] = placed
        space = self.namespace(job)
        self.team_units[space] = self.team_units.get(space, 0.0) + self.quota_units(placed)
        job.engine_jobs = None
        return placed

    def release(self, job: SimJob, member: int, now: float) -> Member:
        placed = job.bound.pop(member)
        before, at = self.used.get(job.spec.team, (0.0, now))
        self.used[job.spec.team] = (before * decay(now - at, self.half_life_s)
                                    + decayed_gpu_s(placed.units, placed.since, now, now, self.half_life_s), now)
        if self.ledger is not None:
            self.ledger.append((job.spec.job_id, placed, now))
        for alloc in placed.allocations:
            if alloc.mig_profile is not None:
                inst = self.layouts.get(placed.node, {}).get(alloc.gpu_index, {}).get(alloc.mig_start)
                if inst is not None:
                    inst[1] = None
                self.node_cache.pop(placed.node, None)
            key = (placed.node, alloc.gpu_index)
            self.gpu_units[key] -= allocation_units(self.infos[placed.node].group, alloc)
            residents = self.residents.get(key, {})
            residents.pop((job.spec.job_id, member), None)
        self.team_units[self.namespace(job)] -= self.quota_units(placed)
        job.engine_jobs = None
        return placed

    # --- the engine's view ------------------------------------------------------------------

    def template(self, job: SimJob) -> Job:
        """The job as the engine sees it (one gang Job; pods are copies with their own ids).
        Cached until the job's progress changes."""
        if job.template is not None:
            return job.template
        spec = job.spec
        memory, milli, gpus = spec.gpu_mem_gb, 0, job.per_member_gpus
        if spec.gpus == 0 and not self.sub_gpu_possible(spec):
            gpus = 1  # what its user asks for once refused a share (the metering still reads the spec)
        elif self.mode.timeslice and spec.gpus == 0:
            memory, milli = TIMESLICE_MEMORY_GB, 1000 // REPLICAS
        job.template = Job(
            id=spec.job_id, team=self.namespace(job) if self.mode.serving_unqueued else spec.team,
            project=spec.project, kind=spec.kind,
            priority_class=spec.priority, priority=PRIORITY_CLASSES[spec.priority],
            gpus=gpus, gpu_memory_gb=memory, gpu_milli=milli,
            cpu_cores=spec.cpu_cores / job.members, gang_size=job.members if self.mode.gang else 1,
            memory_gb=SIM_HOST_MEMORY_GB, gpu_models=spec.gpu_models,
            checkpoint_interval_s=spec.checkpoint_interval_s, last_checkpoint_at=None,
            preemptible=spec.preemptible, queue_order=0, submitted_at=spec.submit_s,
            expected_runtime_s=max(1.0, spec.duration_s - job.done_s),
            # timeslice models pods that all run time-sliced, so each accepts sharing without isolation.
            accepts_no_isolation=spec.accepts_no_isolation or self.mode.timeslice,
            mig_profile="")  # traces pin no profile
        return job.template

    def sub_gpu_possible(self, spec: JobSpec) -> bool:
        """Whether some node of this cluster could ever hold this sub-GPU job as a MIG slice or a
        device-plugin replica under the policy. Where none could, its user asks for a whole GPU,
        as they would on the real system (Tessera refuses the share at submit,
        selectors.share_refusal; kube-scheduler would leave the pod pending for good): the same
        rule for every policy, so no policy's sub-GPU work waits forever for a share the cluster
        does not offer. Policies without MIG or sharing give it a whole GPU anyway (as_whole)."""
        key = (spec.gpu_mem_gb, spec.gpu_models, spec.accepts_no_isolation, spec.priority == PRODUCTION)
        known = self.sub_gpu_cache.get(key)
        if known is None:
            known = self.sub_gpu_cache[key] = self._sub_gpu_possible(spec)
        return known

    def _sub_gpu_possible(self, spec: JobSpec) -> bool:
        features = get_policy(self.mode.name).features
        if self.mode.whole:
            return True  # takes a whole GPU whatever it asks
        shares = features.sharing and (spec.priority == PRODUCTION or not features.share_production_only)
        accepts = spec.accepts_no_isolation or self.mode.timeslice
        for group in self.spec.groups:
            if spec.gpu_models and group.gpu_model not in spec.gpu_models:
                continue
            geometry = geometry_for(group.gpu_model) if group.mig_capable else None
            if features.mig and geometry is not None and group.gpu_sharing == SHARING_NONE:
                if features.mig_static:  # only the layout the GPUs start with, on the MIG-mode ones
                    held = [geometry.resolve(p).memory_gb for p, _ in static_mig_layout(group.gpu_model).values()]
                    if group.mig_enabled_gpus and any(spec.gpu_mem_gb <= m + 1e-9 for m in held):
                        return True
                elif smallest_profile(geometry, spec.gpu_mem_gb) is not None:
                    return True
            if shares and group.gpu_sharing == SHARING_MPS and (
                    self.mode.timeslice or spec.gpu_mem_gb <= group.gpu_memory_gb / group.gpu_replicas + 1e-9):
                return True
            if shares and group.gpu_sharing == SHARING_TIME_SLICING and accepts:
                return True
        return False

    def engine_jobs(self, job: SimJob) -> tuple[Job, ...]:
        """Pending engine jobs: the gang, or (no gangs) one Job per pod not bound yet."""
        if job.engine_jobs is None:
            base = self.template(job)
            if self.mode.gang:
                self.pods[base.id] = (job, 0)
                job.engine_jobs = (base,)
            else:
                job.engine_jobs = tuple(replace(base, id=self.pod_id(job, m))
                                        for m in range(job.members) if m not in job.bound)
        return job.engine_jobs

    def pod_id(self, job: SimJob, member: int) -> str:
        pod = job.spec.job_id if self.mode.gang else f"{job.spec.job_id}#{member}"
        self.pods[pod] = (job, member)
        return pod

    def running_view(self, job: SimJob, now: float) -> list[Running]:
        out = []
        # A service reports no checkpoint, as on a live cluster (the engine knows it loses nothing).
        saved = job.last_checkpoint(now)[1] if job.run_since is not None and job.stateful else None
        for m, placed in job.bound.items():
            view = placed.running
            if view is None or view.job.last_checkpoint_at != saved:
                engine_job = replace(self.template(job), id=self.pod_id(job, m), last_checkpoint_at=saved)
                view = Running(job=engine_job, node=placed.node, allocations=placed.allocations,
                               started_at=placed.since, borrowed=placed.borrowed,
                               member=m if self.mode.gang else 0)
                placed.running = view
            out.append(view)
        return out

    def namespace(self, job: SimJob) -> str:
        """The Kubernetes namespace whose ResourceQuota a job's pods count against: its team's,
        or (serving apart) a serving namespace whose quota is sized to its peak and never binds."""
        if self.mode.serving_apart and job.spec.priority == PRODUCTION:
            return serving_namespace(job.spec.team)
        return job.spec.team

    def admitted(self, jobs: list[SimJob]) -> list[Job]:
        """Pending engine jobs. Without the engine's quotas a team namespace is only capped at
        the team's burst limit, as a Kubernetes ResourceQuota would (pods beyond it are not
        created; pending pods count)."""
        out = []
        headroom = dict(self.team_units)
        for job in jobs:
            if job.state != WAITING:
                continue
            pods = self.engine_jobs(job)
            space = self.namespace(job)
            cap = self.caps.get(space)
            if not self.mode.quota and cap is not None:
                units = sum(self.pod_units(p) for p in pods)
                used = headroom.get(space, 0.0)
                if used + units > cap + 1e-9:
                    continue
                headroom[space] = used + units
            out.extend(pods)
        return out

    def quota_units(self, placed: Member) -> float:
        """What a bound pod counts for in its namespace's quota: with integer GPUs one
        nvidia.com/gpu per allocation, a device-plugin replica as much as a whole GPU (pod_units);
        else the GPU share it holds."""
        return float(len(placed.allocations)) if self.mode.whole else placed.units

    def pod_units(self, pod: Job) -> float:
        if pod.gpus:
            return float(pod.gpus * pod.gang_size)
        if self.mode.timeslice:
            return pod.gang_size / REPLICAS
        if self.mode.whole:
            return float(pod.gang_size)  # integer GPUs: a sub-GPU pod takes a whole one
        return pod.gang_size * min(1.0, pod.gpu_memory_gb / self.min_gpu_memory)

    def snapshot(self, now: float, pending: list[Job], running: list[Running], in_flight,
                 nominations=()) -> Snapshot:
        """`nominations`: the last plan's, kept as the API server keeps nominatedNodeName."""
        return Snapshot(now=now, nodes=self.nodes(), pending=tuple(pending), running=tuple(running),
                        queues=self.queues, in_flight=tuple(in_flight),
                        spine_oversubscription=self.spec.spine_oversubscription,
                        nominations=tuple(nominations), usage_history=self.usage_history(now, running),
                        clock_speed=1.0)  # the simulator words waits in its own time

    def usage_history(self, now: float, running: list[Running]) -> UsageHistory:
        """Released work decayed to now, plus running members up to now (the live ledger counts
        open intervals the same way)."""
        h = self.half_life_s
        used = {team: value * decay(now - at, h) for team, (value, at) in self.used.items()}
        for run in running:
            units = sum(allocation_units(self.infos[run.node].group, a) for a in run.allocations)
            used[run.job.team] = used.get(run.job.team, 0.0) + decayed_gpu_s(units, run.started_at, now, now, h)
        return UsageHistory(half_life_s=h, since=now if self.since is None else self.since,
                            team_gpu_s=tuple(sorted((t, v) for t, v in used.items() if v > 0)))

