"""The openb task model on the live engine: nodes become engine Nodes in one Session, tasks
engine Jobs placed by engine.placement.place_job with the policy's scorer.

The mapping: a whole-GPU task (1, 2, 4 or 8 GPUs of 1000 milli) is a Job of that many GPUs; a
sharing task (one GPU, under 1000 milli) a sub-GPU Job asking for that compute share and no GPU
memory (the trace has none), so it goes to a milli share (Features.sharing, SHARE_REPLICAS); a
CPU-only task a Job with no GPU need (Job.host_only); CPU in cores, memory in GiB, gpu_spec as
gpu_models. The
policy scores every node that fits (Features.scored_candidates=0), as the paper's scheduler does,
and its ties go to the first node by name (Features.score_ties="name"): nodes are named by a
seeded permutation, the artifact's seeded node order. With the live default (ties to the first in
index order, binpack: fullest first) FGD leaves 8.37% unallocated on default seed 101 instead of
4.88%: its integer scores tie often, and packing ties onto the fullest nodes fragments them.
"""

from __future__ import annotations

import random

from ...engine import placement
from ...engine.features import Features
from ...engine.fragment.learn import Binding
from ...engine.fragment.shapes import MILLI, NodeView, Request
from ...engine.memory import SHARE_STEP_MILLI
from ...engine.placement import scored
from ...engine.session import Session
from ...engine.statement import Statement
from ...engine.types import NODE_READY, SHARING_TIME_SLICING, Gpu, Job, Node, Snapshot, UsageHistory
from .traces import NodeSpec

GPU_MEMORY_GB = 32.0  # any size: no openb task asks for GPU memory, so none is ever short of it
TEAM = "openb"
# The artifact's GPU-share device plugin (Open-Gpu-Share) hands out a GPU whole or in milli shares
# bounded by nothing but the milli left. No engine sharing mode offers both (a sharing node offers
# replicas only, sharing.py), so the nodes time-slice with a replica per possible share, the tasks
# accept no isolation, and EngineCluster opens their whole GPUs too.
SHARE_REPLICAS = MILLI // SHARE_STEP_MILLI


def features_for(scorer: str) -> Features:
    """The engine's features for a fill run: shares on, all or nothing, binpack order, the
    scorer scoring every node that fits."""
    return Features(gang=True, sharing=True, packing="binpack", share_packing="binpack",
                    placement_scorer=scorer,  # type: ignore[arg-type]  # checked by Features
                    scored_candidates=0, score_ties="name")


def engine_node(name: str, spec: NodeSpec) -> Node:
    gpus = tuple(Gpu(index=i, uuid=f"{name}-{i}", model=spec.model, memory_gb=GPU_MEMORY_GB,
                     mig_enabled=False, mig_instances=(), layout_changed_at=None, healthy=True,
                     mig_capable=False) for i in range(spec.num_gpu))
    return Node(name=name, tier="on-demand", leaf="leaf", spine="spine", gpu_model=spec.model,
                interconnect="pcie", cpu_cores=spec.cpu / 1000, memory_gb=spec.mem / 1024, gpus=gpus,
                state=NODE_READY, nics=1, nic_gb_s=1.0, price_per_gpu_hour=None, sharing=SHARING_TIME_SLICING,
                share_replicas=SHARE_REPLICAS)


def engine_job(job_id: str, task: Request) -> Job:
    if task.num_gpu > 1 and task.gpu_milli < MILLI:
        raise ValueError(f"task {job_id}: a share of {task.gpu_milli} milli on each of {task.num_gpu} "
                         "GPUs; openb shares are single-GPU")
    whole = task.num_gpu if task.gpu_milli >= MILLI else 0
    return Job(id=job_id, team=TEAM, project=TEAM, kind="batch", priority_class="best-effort", priority=50,
               gpus=whole, gpu_memory_gb=0.0, gpu_milli=0 if whole else task.gpu_milli,
               cpu_cores=task.cpu / 1000, memory_gb=task.mem / 1024, gang_size=1,
               gpu_models=tuple(sorted(task.spec or ())), checkpoint_interval_s=None,
               last_checkpoint_at=None, preemptible=True, queue_order=0, submitted_at=0.0,
               expected_runtime_s=0.0, accepts_no_isolation=True, mig_profile="")


class EngineCluster:
    """One engine session over the openb nodes; tasks are placed into it one by one."""

    def __init__(self, nodes: list[NodeSpec], binding: Binding, rng: random.Random):
        order = list(range(len(nodes)))
        rng.shuffle(order)  # the artifact's seeded node order, as the engine's name order
        width = len(str(len(nodes)))
        engine_nodes = [engine_node(f"n{pos:0{width}d}", nodes[n]) for pos, n in enumerate(order)]
        snapshot = Snapshot(now=0.0, nodes=tuple(engine_nodes), pending=(), running=(), queues=(),
                            in_flight=(), spine_oversubscription=1.0, nominations=(),
                            usage_history=UsageHistory(half_life_s=1.0, since=0.0, team_gpu_s=()),
                            clock_speed=1.0)
        self.session = Session(snapshot, features_for(binding.policy.name))
        for state in self.session.nodes.values():  # whole GPUs as well as shares (SHARE_REPLICAS)
            state.offers_whole = True
            self.session.reindex_node(state)
        self.rebind(binding)
        self.placed = 0
        # Each node's view after its last placement: only placements change a node here.
        self.last = {name: scored.node_view(self.session, n) for name, n in self.session.nodes.items()}

    def rebind(self, binding: Binding) -> None:
        """Score with this scorer and prior from now on (the online prior relearns it)."""
        scored.rebind(self.session, binding)

    def views(self) -> list[NodeView]:
        return list(self.last.values())

    def place(self, task: Request) -> tuple[NodeView, NodeView] | None:
        """Place the task with the live engine; the node's view before and after, or None when
        it fits nowhere (it is then dropped, as the experiment does)."""
        self.placed += 1
        job = engine_job(f"t{self.placed}", task)
        stmt = Statement(self.session)
        if not placement.place_job(self.session, job, stmt):
            stmt.discard()
            return None
        stmt.commit()
        name = self.session.binds[-1].node
        before = self.last[name]
        after = self.last[name] = scored.node_view(self.session, self.session.nodes[name])
        return before, after
