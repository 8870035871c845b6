"""Choosing among candidate nodes with a placement scorer (engine/fragment: tessera, fgd and the
FGD paper's baselines), when the policy names one in Features.placement_scorer.

The scorer sees each candidate as a fragment.NodeView: its model, CPU left and the free milli of
every non-MIG GPU (0 for one that is busy whole, unhealthy, settling, reserved or on a node that
is not ready), and the job as a fragment.Request. Its workload prior is the cycle's jobs, running
and pending, one request per member (the live form of the fill experiment's online prior: the
jobs that have arrived, never one that has not), learned from its mix to 1/MIX_STEPS. The index
order (binpack or spread, tier first) still decides among equal scores, and only the first
SCORED_CANDIDATES candidates in that order are scored, so a cycle's cost stays linear in the jobs
it places.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable
from functools import lru_cache
from typing import TYPE_CHECKING, Any

from ..fragment import MILLI, SCORERS, Binding, NodeView, Request, bind
from ..memory import share_milli
from ..mig import canonical_model
from ..state import GpuState, NodeState
from ..types import Job
from .common import model_memory

if TYPE_CHECKING:
    from ..session import Session

SCORED_CANDIDATES = 64  # nodes scored per placement, in index order
MIX_STEPS = 16  # resolution of the workload mix the prior is learned from (_mix)


def binding(session: Session) -> Binding | None:
    """The policy's scorer bound to this cycle's jobs, or None when the policy scores nothing."""
    name = session.features.placement_scorer
    if name == "order":
        return None
    if session.fragment is None:
        capacity: dict[str, int] = {}
        for node in session.nodes.values():
            capacity[node.model] = capacity.get(node.model, 0) + MILLI * len(node.gpus)
        session.fragment = _bound(name, _mix(_workload(session)), tuple(sorted(capacity.items())))
    return session.fragment


def _mix(requests: Iterable[Request]) -> tuple[tuple[Request, int], ...]:
    """The workload as each request's share in MIX_STEPS steps (at least 1): what the prior
    learns is a function of the mix, so cycles with the same mix share one binding (the LP
    behind tessera's prices is the costly part) and the plan stays a function of the snapshot."""
    counts = Counter(requests)
    total = sum(counts.values())
    mix = ((r, max(1, round(MIX_STEPS * n / total))) for r, n in counts.items())
    return tuple(sorted(mix, key=_order))


def _order(entry: tuple[Request, int]) -> tuple[object, ...]:
    """A total order (allowed-model sets do not have one)."""
    request, _ = entry
    return (*request[:4], sorted(request.spec or ()), request.spec is None)


@lru_cache(maxsize=256)
def _bound(name: str, mix: tuple[tuple[Request, int], ...], capacity: tuple[tuple[str, int], ...]) -> Binding:
    return bind(SCORERS.get(name), [r for r, n in mix for _ in range(n)], dict(capacity))


def _workload(session: Session) -> Iterable[Request]:
    snapshot = session.snapshot
    seen: dict[tuple[object, ...], Request] = {}  # many jobs share a shape: build each once
    members = [(run.job, 1) for run in snapshot.running] + [(job, job.gang_size) for job in snapshot.pending]
    for job, count in members:
        key = (job.cpu_cores, job.gpus, job.gpu_memory_gb, job.gpu_milli, job.gpu_models)
        request = seen.get(key)
        if request is None:
            request = seen[key] = request_for(session, job, 1)._replace(mem=0)  # no scorer reads memory
        for _ in range(count):
            yield request


def request_for(session: Session, job: Job, members: int, milli: int | None = None) -> Request:
    """The job's ask as the scorer sees it. A share's milli depends on the GPU's memory: it is
    given by the caller for a placement, and for the prior taken on the smallest allowed GPU."""
    spec = frozenset(canonical_model(m) for m in job.gpu_models) or None
    cpu, mem = round(job.cpu_cores * 1000 * members), round(job.memory_gb * 1024 * members)
    if not job.fractional:
        return Request(cpu, mem, job.gpus * members, MILLI, spec)
    if milli is None:
        memory = model_memory(session)
        sizes = [memory[m] for m in (spec or memory) if m in memory]
        milli = share_milli(job.gpu_memory_gb, min(sizes), job.gpu_milli) if sizes else None
    return Request(cpu, mem, members, milli or MILLI, spec)


def _free_milli(gpu: GpuState) -> int:
    if gpu.whole_job is not None or not gpu.usable:
        return 0
    return MILLI - gpu.milli_used


def node_view(node: NodeState) -> NodeView:
    gpus = sorted((_free_milli(g) for g in node.gpus if not g.mig_enabled), reverse=True)
    return NodeView(node.model, round(node.free_cpu * 1000), round(node.free_mem * 1024), tuple(gpus))


def score(bound: Binding, node: NodeState, request: Request) -> Any:
    return bound.policy.score(node_view(node), request, bound.fm)


def pick_share(session: Session, bound: Binding, job: Job, model: str, gpus: list[GpuState]) -> GpuState:
    """Of the GPUs a share may take (at least one, all with room for it), the one on the
    best-scoring node, and on that node the GPU whose free milli the scorer picks."""
    milli = share_milli(job.gpu_memory_gb, model_memory(session)[model], job.gpu_milli) or MILLI
    request = request_for(session, job, 1, milli)
    nodes: dict[str, list[GpuState]] = {}
    for gpu in gpus:
        if gpu.node.name in nodes or len(nodes) < SCORED_CANDIDATES:
            nodes.setdefault(gpu.node.name, []).append(gpu)
    best: tuple[Any, list[GpuState]] | None = None
    for on_node in nodes.values():  # dict order keeps the index order among equal scores
        key = score(bound, on_node[0].node, request)
        if best is None or key > best[0]:
            best = (key, on_node)
    assert best is not None
    options = best[1]
    view = node_view(options[0].node)
    if not request.is_share:
        return options[0]
    wanted = bound.policy.share_pick(view, request, bound.fm, None)
    exact = [g for g in options if _free_milli(g) == wanted]
    # The scorer sees every GPU of the node; one it picks may lack the memory: then the fullest.
    return exact[0] if exact else min(options, key=_free_milli)
