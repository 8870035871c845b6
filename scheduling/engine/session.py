"""The session: a per-cycle mutable copy of the snapshot, with indexes of free capacity.

Indexes (kept current on every occupy/release, so no action scans every node per job):
  whole[(model, tier)][free whole GPUs] -> {node name: NodeState}
  mig[(model, tier)][occupied memory-slice mask] -> {gpu key: GpuState}   (MIG-enabled GPUs)
  idle[(model, tier, shape)] -> {gpu key: GpuState}                       (idle MIG instances)
  share[(model, tier)][free milli] -> {gpu key: GpuState}                 (sharable GPUs)
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Hashable, Iterable
from collections.abc import Set as AbstractSet
from operator import attrgetter
from typing import TYPE_CHECKING, Any

from .fair_history import decay
from .features import Features
from .mig import canonical_model
from .plan import Allocation, Bind, Preempt, Repartition
from .reasons import PreemptReason, WaitingReason
from .reservations import Book
from .state import GpuKey, GpuState, Member, NodeState, Outer, Shape, _mig_units
from .types import Job, Nomination, Queue, Running, Snapshot

if TYPE_CHECKING:
    from .fragment import Binding, NodeView, Request
    from .supply import ModelSupply, ReleaseCurve

_NO_SHAPES: frozenset[Shape] = frozenset()
_NAME = attrgetter("name")
RequestShape = int  # the number of what placement depends on (actions.common.request_shape)
# within quota, then class and work lost (in the policy's victim_order), runtime, id: lowest first
VictimKey = tuple[int, float, float, float, str]


def _by_level() -> defaultdict:
    return defaultdict(dict)


class Session:
    def __init__(self, snapshot: Snapshot, features: Features):
        self.snapshot = snapshot
        self.features = features
        self.now = snapshot.now
        self.whole: defaultdict[Outer, defaultdict[int, dict[str, NodeState]]] = defaultdict(_by_level)
        self.mig: defaultdict[Outer, defaultdict[int, dict[GpuKey, GpuState]]] = defaultdict(_by_level)
        self.idle: defaultdict[tuple[str, str, Shape], dict[GpuKey, GpuState]] = defaultdict(dict)
        self.share: defaultdict[Outer, defaultdict[int, dict[GpuKey, GpuState]]] = defaultdict(_by_level)
        self.nodes: dict[str, NodeState] = {}
        self.members: dict[str, list[Member]] = defaultdict(list)
        self.usage: dict[str, float] = defaultdict(float)
        # Running units per team weighted by decay since their start: fair_history's entry penalty.
        self.entry: dict[str, float] = defaultdict(float)
        self.half_life_s = snapshot.usage_history.half_life_s
        self.queues: dict[str, Queue] = {q.team: q for q in snapshot.queues}
        self.binds: list[Bind] = []
        self.preemptions: list[Preempt] = []
        self.repartitions: list[Repartition] = []
        self.settling_mig_nodes: set[str] = set()  # nodes with an unconfirmed MIG layout
        self.preempting: set[str] = set()   # victims already asked to stop
        self.nominated: dict[str, int] = {}  # preemptor -> victims it waits for
        self.consolidating: set[str] = set()  # preemptors whose victims are only moving
        self.reasons: dict[str, tuple[WaitingReason, str]] = {}  # job -> why it waits, decided by an action
        self.book = Book(self)  # reservations for blocked jobs (EASY backfilling) and nominations
        self.nominations: dict[str, Nomination] = {}  # nominated job -> its GPUs (nominations.py)
        self.placed: set[str] = set()
        self.max_gpus_per_node = max((len(n.gpus) for n in snapshot.nodes), default=0)
        self.releases = 0  # bumps whenever capacity is given back (see actions.common)
        self.occupancy = 0  # bumps whenever a member is added or removed
        self.runners: tuple[int, list[Member]] | None = None  # (occupancy, stoppable runners) (actions.evict)
        # Worked out once per cycle, on first use, by the module named (what each depends on is
        # fixed for the cycle, or keyed by `releases`).
        self.deserved: dict[str, float] | None = None  # fair share per team (actions.common)
        self.capacity: int | None = None  # healthy GPUs on ready nodes (actions.common)
        # per team, units its running production replicas hold beyond their need (actions.common)
        self.production_excess: dict[str, float] | None = None
        # (decayed use over capacity, share, capacity) per team (actions.common.fair_ratio)
        self.fair_basis: tuple[dict[str, float], dict[str, float], float] | None = None
        self.no_fit: dict[RequestShape, int] = {}  # request shape -> `releases` when it found no place
        # ("mig" or "share", model, tier, what the search reads of the job) -> `releases` when it
        # found no MIG slot or share (placement.slices)
        self.no_slot: dict[tuple[object, ...], int] = {}
        self.shapes: dict[str, RequestShape] = {}  # per job (actions.common.request_shape)
        self.shape_ids: dict[tuple[object, ...], RequestShape] = {}  # per distinct request (the same)
        self._waiting: tuple[int, int, list[Job]] | None = None  # (occupancy, placed, waiting jobs)
        self.victim_keys: dict[str, VictimKey] = {}  # victim ranking per running job (actions.evict)
        self.job_ends: dict[str, float] = {}  # expected end per running job (actions.reserve)
        # (node version, expected free time of each GPU) per node (actions.reserve)
        self.free_times: dict[str, tuple[int, list[tuple[float, int, GpuState]]]] = {}
        self.memory_by_model: dict[str, float] | None = None  # smallest GPU memory (placement.common)
        self.fragment: Binding | None = None  # the placement scorer and its prior (placement.scored)
        # (node version, scorer's view, its number in view_ids) per node (placement.scored)
        self.views: dict[str, tuple[int, NodeView, int]] = {}
        self.view_ids: dict[NodeView, int] = {}  # every view without memory seen this cycle, numbered
        self.scores: dict[Request, dict[int, Any]] = {}  # per request, per view number, under `fragment`
        self.allowed: dict[tuple[object, ...], tuple[str, ...]] = {}  # models per request (placement.common)
        self.job_models: dict[str, tuple[Job, tuple[str, ...]]] = {}  # the same per job (placement.common)
        # whether any GPU of a (model, tier) has a replica that could hold a share (placement.slices)
        self.replica_fits: dict[tuple[object, ...], bool] = {}
        # (buckets, masks with a bucket that leave room) per (model, tier, MIG shape) (placement.slices)
        self.mig_masks: dict[tuple[str, str, Shape], tuple[int, list[int]]] = {}
        self.slice_units: dict[tuple[object, ...], float] = {}  # per sub-GPU request (actions.common.min_units)
        self.job_units: dict[str, tuple[Job, float]] = {}  # min_units per job (actions.common)
        self.supply: dict[str, ModelSupply] | None = None  # free/total units and ends per model (supply)
        self.release_curves: dict[tuple[str, ...], ReleaseCurve] = {}  # per model set (supply)
        self.node_words: dict[tuple[str, ...], str] = {}  # "one (NVSwitch) node" per model set (explain)
        self._load(snapshot)

    # --- building ---------------------------------------------------------------------------

    def _load(self, snapshot: Snapshot) -> None:
        for node in sorted(snapshot.nodes, key=_NAME):
            self.nodes[node.name] = NodeState(node, canonical_model(node.gpu_model))
        self._apply_in_flight_layouts(snapshot)
        self._load_running(snapshot.running)
        jobs = {j.id: j for j in snapshot.pending}
        for action in snapshot.in_flight:
            if isinstance(action, Bind) and action.node in self.nodes:
                job = jobs.get(action.job_id)
                self.occupy(Member(action.job_id, action.team, job, action.node,
                                   action.allocations, action.borrowed, self.now, action.member),
                            reindex=False)
            elif isinstance(action, Preempt):
                self.preempting.add(action.job_id)
                if action.for_job_id is None:  # a spot reclaim: nobody waits for it
                    continue
                self.nominated[action.for_job_id] = self.nominated.get(action.for_job_id, 0) + 1
                if action.reason == PreemptReason.CONSOLIDATE:
                    self.consolidating.add(action.for_job_id)
        for state in self.nodes.values():
            for gpu in state.gpus:
                # A whole GPU in use goes in no index (reindex_gpu would file it nowhere): most
                # GPUs of a busy cluster, so they are not asked one by one.
                if gpu.whole_job is None or gpu.mig_enabled:
                    self.reindex_gpu(gpu)
            self.reindex_node(state)

    def _load_running(self, runs: Iterable[Running]) -> None:
        """occupy(Member(...), reindex=False) for each running member, with the two kinds most
        members of a busy cluster are (a whole GPU, an existing MIG instance) taken inline and
        the decay worked out once per start time: every cycle loads them all (24,376 at 4,000
        nodes). The same updates in the same order, so the same floats."""
        nodes, usage, entry, members = self.nodes, self.usage, self.entry, self.members
        now, half_life = self.now, self.half_life_s
        decays: dict[float, float] = {}
        count = 0
        replica_one = self.features.replica_counts_one
        for run in runs:
            job = run.job
            job_id, team, started_at = job.id, job.team, run.started_at
            member = Member(job_id, team, job, run.node, run.allocations, run.borrowed, started_at, run.member)
            node = nodes[run.node]
            gpus = node.gpus
            units = 0.0
            for alloc in member.allocations:
                i = alloc.gpu_index
                gpu = gpus[i] if i < len(gpus) and gpus[i].index == i else self.gpu(node.name, i)
                profile = alloc.mig_profile
                if profile is None and alloc.milli >= 1000 and not gpu.layout_errors:
                    gpu.whole_job = job_id
                    units += 1.0
                    continue
                inst = gpu.instances.get(alloc.mig_start) if profile is not None and alloc.mig_start is not None \
                    and not gpu.layout_errors else None
                geometry = gpu.geometry  # (a GPU with instances has one)
                if inst is not None and profile is not None and geometry is not None:
                    # _take and gpu.units for an existing instance
                    gpu.busy += 1 - (inst[1] is not None)  # set_user
                    inst[1] = job_id
                    units += _mig_units(geometry, profile)
                else:
                    self._take(gpu, member, alloc)
                    # replica_counts_one (features.py): a device-plugin replica is one nvidia.com/gpu
                    units += 1.0 if replica_one and profile is None else gpu.units(alloc)
            member.units = units
            count += 1
            node.free_cpu -= job.cpu_cores
            node.free_mem -= job.memory_gb
            usage[team] += units
            weight = decays.get(started_at)
            if weight is None:
                weight = decays[started_at] = decay(now - started_at, half_life)
            entry[team] += units * weight
            members[job_id].append(member)
        self.occupancy += count

    def _apply_in_flight_layouts(self, snapshot: Snapshot) -> None:
        for action in snapshot.in_flight:
            if isinstance(action, Repartition) and action.node in self.nodes:
                gpu = self.gpu(action.node, action.gpu_index)
                gpu.set_layout(action.mig_enabled, action.layout)
                gpu.settling = True
                if action.mig_enabled:
                    self.settling_mig_nodes.add(action.node)

    def close(self) -> None:
        """Undo the references that make the cycle's objects a cycle (each GPU names its node,
        each node lists its GPUs; the book names the session), so they are freed as the cycle
        returns: left to the collector, its pass over them (290,000 objects at 4,000 nodes)
        cost 0.4 s CPU after every cycle, a fifth of a steady one. The session is unusable after."""
        for node in self.nodes.values():
            node.gpus = []
        self.book.items.clear()
        del self.book

    # --- lookups ----------------------------------------------------------------------------

    def faulty_gpus(self) -> dict[str, tuple[str, ...]]:
        return {f"{node.name}/{gpu.index}": gpu.layout_errors
                for node in self.nodes.values() for gpu in node.gpus if gpu.layout_errors}

    def gpu(self, node: str, index: int) -> GpuState:
        gpus = self.nodes[node].gpus
        if index < len(gpus) and gpus[index].index == index:
            return gpus[index]
        for gpu in gpus:
            if gpu.index == index:
                return gpu
        raise KeyError(f"node {node} has no GPU {index}")

    def waiting(self) -> list[Job]:
        """Pending jobs still to decide: not bound in flight, not placed this cycle. Kept until a
        member comes or goes or a job is placed (every action asks); callers must not change it."""
        cached = self._waiting
        if cached is not None and cached[0] == self.occupancy and cached[1] == len(self.placed):
            return cached[2]
        jobs = [j for j in self.snapshot.pending if j.id not in self.members and j.id not in self.placed]
        self._waiting = (self.occupancy, len(self.placed), jobs)
        return jobs

    def queue(self, team: str) -> Queue:
        """A team without a queue row has no guarantee, no burst limit and weight 1."""
        return self.queues.get(team) or Queue(team=team, guaranteed_gpus=0.0, burst_limit_gpus=None, weight=1.0)

    # --- occupancy --------------------------------------------------------------------------

    def occupy(self, member: Member, reindex: bool = True) -> None:
        """Take a member's resources. `reindex=False` while loading: indexes are built once
        at the end."""
        node = self.nodes[member.node]
        gpus = node.gpus
        units = 0.0
        replica_one = self.features.replica_counts_one
        for alloc in member.allocations:
            i = alloc.gpu_index
            gpu = gpus[i] if i < len(gpus) and gpus[i].index == i else self.gpu(node.name, i)
            if alloc.mig_profile is None and alloc.milli >= 1000 and not gpu.layout_errors:
                # _take and gpu.units inlined for a whole GPU: most members of a busy cluster,
                # and every cycle loads them all
                gpu.whole_job = member.job_id
                units += 1.0
            else:
                self._take(gpu, member, alloc)
                # replica_counts_one (features.py): a device-plugin replica is one nvidia.com/gpu
                units += 1.0 if replica_one and alloc.mig_profile is None else gpu.units(alloc)
            if reindex:
                self.reindex_gpu(gpu)
        member.units = units
        self.occupancy += 1
        if member.job is not None:
            node.free_cpu -= member.job.cpu_cores
            node.free_mem -= member.job.memory_gb
        self.usage[member.team] += units
        self.entry[member.team] += units * decay(self.now - member.started_at, self.half_life_s)
        self.members[member.job_id].append(member)
        if reindex:
            self.reindex_node(node)

    def release(self, member: Member, undo: bool = False) -> None:
        """Free a member's resources. `undo` also removes MIG instances created this cycle."""
        self.releases += 1
        self.occupancy += 1
        node = self.nodes[member.node]
        for alloc in member.allocations:
            gpu = self.gpu(member.node, alloc.gpu_index)
            self._give_back(gpu, member, alloc, undo)
            self.reindex_gpu(gpu)
        if member.job is not None:
            node.free_cpu += member.job.cpu_cores
            node.free_mem += member.job.memory_gb
        self.usage[member.team] -= member.units
        self.entry[member.team] -= member.units * decay(self.now - member.started_at, self.half_life_s)
        members = self.members[member.job_id]
        members.remove(member)
        if not members:
            del self.members[member.job_id]
        self.reindex_node(node)

    def _take(self, gpu: GpuState, member: Member, alloc: Allocation) -> None:
        if gpu.layout_errors:  # a member still running on a GPU with a bad layout holds all of it
            gpu.whole_job = member.job_id
        elif alloc.mig_profile is not None and alloc.mig_start is not None:
            inst = gpu.instances.get(alloc.mig_start)
            if inst is None:
                gpu.add_instance(gpu.mig_geometry.resolve(alloc.mig_profile), alloc.mig_start,
                                 created=member.new)
            gpu.set_user(alloc.mig_start, member.job_id)
        elif alloc.milli >= 1000:
            gpu.whole_job = member.job_id
        else:
            gpu.shares[(member.job_id, member.member)] = (alloc.milli, alloc.memory_gb)
            gpu.milli_used += alloc.milli
            gpu.mem_used += alloc.memory_gb

    def _give_back(self, gpu: GpuState, member: Member, alloc: Allocation, undo: bool) -> None:
        if gpu.layout_errors:
            gpu.whole_job = None
        elif alloc.mig_profile is not None and alloc.mig_start is not None:
            inst = gpu.instances.get(alloc.mig_start)
            if inst is None:
                return
            gpu.set_user(alloc.mig_start, None)
            if undo and inst[2]:
                gpu.drop_instance(alloc.mig_start)
        elif alloc.milli >= 1000:
            gpu.whole_job = None
        else:
            milli, memory = gpu.shares.pop((member.job_id, member.member))
            gpu.milli_used -= milli
            gpu.mem_used -= memory

    # --- indexes ----------------------------------------------------------------------------

    @staticmethod
    def _move(table: Any, old: tuple[Any, int] | None, new: tuple[Any, int] | None, item_key: Hashable,
              item: object) -> None:
        """Move `item` in a two-level index from the bucket `old` to `new` (either None: none)."""
        if old is not None:
            outer, bucket = old
            del table[outer][bucket][item_key]
        if new is not None:
            outer, bucket = new
            table[outer][bucket][item_key] = item

    def reindex_node(self, node: NodeState) -> None:
        node.version += 1
        count = len(node.free_whole())
        new = (node.outer, count) if count else None
        if node.whole_key != new:
            self._move(self.whole, node.whole_key, new, node.name, node)
            node.whole_key = new

    def reindex_gpu(self, gpu: GpuState) -> None:
        outer = gpu.outer
        usable = gpu.healthy and not gpu.settling and gpu.node.ready and gpu.reserved is None  # gpu.usable
        mig: tuple[Outer, int] | None = None
        share: tuple[Outer, int] | None = None
        shapes: AbstractSet[Shape] = _NO_SHAPES
        if gpu.mig_enabled:
            if usable:
                mig = (outer, gpu.used_mask)
                if gpu.busy < len(gpu.instances):
                    shapes = {inst[0].shape for inst in gpu.instances.values() if inst[1] is None}
        elif (usable and gpu.whole_job is None and gpu.milli_used < 1000 and gpu.node.offers_shares
              and len(gpu.shares) < gpu.node.node.share_replicas):  # a replica left
            # A GPU whose replicas are all taken holds no more shares, milli left or not: listing
            # it made every share request scan it. It comes back when a share leaves, and it would
            # move then anyway (its free milli changes), so the index order is the same.
            share = (outer, 1000 - gpu.milli_used)
        if gpu.mig_key != mig:
            self._move(self.mig, gpu.mig_key, mig, gpu.key, gpu)
            gpu.mig_key = mig
        if gpu.share_key != share:
            self._move(self.share, gpu.share_key, share, gpu.key, gpu)
            gpu.share_key = share
        old_shapes = gpu.idle_shapes
        if old_shapes or shapes:
            for shape in old_shapes - shapes:
                del self.idle[(*outer, shape)][gpu.key]
            for shape in shapes - old_shapes:
                self.idle[(*outer, shape)][gpu.key] = gpu
            gpu.idle_shapes = shapes
