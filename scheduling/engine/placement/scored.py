"""Choosing among candidate nodes with a placement scorer (engine/fragment: tessera, fgd and the
FGD paper's baselines), when the policy names one in Features.placement_scorer.

The scorer sees each candidate as a fragment.NodeView: its model, CPU left and the free milli of
every non-MIG GPU (0 for one that is busy whole, unhealthy, settling, reserved or on a node that
is not ready) and the classes of the jobs on it (share, k-GPU: GpuClustering's and tessera's
affinity), and the job as a fragment.Request. Its workload prior is the cycle's jobs, running
and pending, one request per member (the live form of the fill experiment's online prior: the
jobs that have arrived, never one that has not), learned from its mix to 1/MIX_STEPS. The index
order (binpack or spread, tier first) decides among equal scores (or, with Features.score_ties
"name", the node name: a fixed order unrelated to load), and only the first
Features.scored_candidates candidates in that order are scored (0: every one, as the FGD paper's
scheduler does and `simulate fill` asks), so a cycle's cost stays linear in the jobs it places.
A node's view is rebuilt only when its state changes (NodeState.version), and a score is worked
out once per (view, request) while the binding stands: nodes in the same state share it.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable, Iterable
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


def rebind(session: Session, bound: Binding) -> None:
    """Score with this binding from now on (the fill experiment's online prior relearns it as
    tasks arrive); scores worked out under the old one are dropped."""
    session.fragment = bound
    session.scores.clear()


def candidate_limit(session: Session) -> int:
    """Nodes scored per placement, in index order; unbounded when the policy says 0."""
    return session.features.scored_candidates or len(session.nodes) + 1


def better(session: Session, points: Any, node: NodeState, best: Any, best_node: NodeState) -> bool:
    """Whether `node`, scoring `points`, beats the best so far (found earlier in index order)."""
    if points != best:
        return bool(points > best)
    return session.features.score_ties == "name" and node.name < best_node.name


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
            request = seen[key] = request_for(session, job, 1)
        for _ in range(count):
            yield request


def request_for(session: Session, job: Job, members: int, milli: int | None = None) -> Request:
    """The job's ask as the scorer sees it, memory 0: no scorer reads it (fragment.Scorer), so
    scores are shared by jobs alike but for memory. A share's milli depends on the GPU's memory:
    it is given by the caller for a placement, and for the prior taken on the smallest allowed GPU."""
    spec = frozenset(canonical_model(m) for m in job.gpu_models) or None
    cpu, mem = round(job.cpu_cores * 1000 * members), 0
    if job.host_only:
        return Request(cpu, mem, 0, 0, spec)
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


def node_view(session: Session, node: NodeState) -> NodeView:
    """The node as a scorer sees it, rebuilt only when the node's state has changed."""
    return _cached_view(session, node)[1]


def _cached_view(session: Session, node: NodeState) -> tuple[int, NodeView, int]:
    """(version, view, the number of the view without memory: what a score depends on)."""
    cached = session.views.get(node.name)
    if cached is None or cached[0] != node.version:
        gpus = sorted((_free_milli(g) for g in node.gpus if not g.mig_enabled), reverse=True)
        view = NodeView(node.model, round(node.free_cpu * 1000), round(node.free_mem * 1024), tuple(gpus),
                        _classes(session, node))
        ids = session.view_ids
        number = ids.setdefault(view._replace(mem_left=0), len(ids))
        cached = session.views[node.name] = (node.version, view, number)
    return cached


def _classes(session: Session, node: NodeState) -> frozenset[str]:
    """The classes (fragment.shapes.affinity_tag) of the jobs holding GPUs on the node."""
    tags = set()
    for gpu in node.gpus:
        if gpu.shares:
            tags.add("share")
        if gpu.whole_job is not None:
            members = session.members.get(gpu.whole_job)
            job = members[0].job if members else None
            tags.add(f"{job.gpus}gpu" if job is not None and job.gpus else "1gpu")
    return frozenset(tags)


def scorer(session: Session, bound: Binding, request: Request) -> Callable[[NodeState], Any]:
    """The scorer's score of a node for the request (request_for's: memory 0). Scorers read no
    memory (fragment.Scorer), so nodes alike but for memory share one entry, kept while the
    binding stands."""
    memo = session.scores.setdefault(request, {})
    policy, fm = bound
    views = session.views

    def score(node: NodeState) -> Any:
        cached = views.get(node.name)  # _cached_view's hit path inlined: asked for every candidate
        if cached is None or cached[0] != node.version:
            cached = _cached_view(session, node)
        _, view, number = cached
        value = memo.get(number, memo)  # the memo doubles as the "missing" sentinel
        if value is memo:
            value = memo[number] = policy.score(view, request, fm)
        return value

    return score


def pick_share(session: Session, bound: Binding, job: Job, firsts: list[GpuState]) -> tuple[GpuState, int | None]:
    """Of the candidate nodes for a share, each given by its first GPU with room (at least one,
    in index order), the best-scoring one's, and the free milli of the GPU the scorer picks on
    it (None when the request is not a share: any GPU with room)."""
    memory = model_memory(session)
    # per model: a share's milli depends on the GPU's memory
    requests: dict[str, tuple[Request, Callable[[NodeState], Any]]] = {}
    best: tuple[Any, GpuState, Request] | None = None
    for gpu in firsts:  # index order among equal scores
        node = gpu.node
        entry = requests.get(node.model)
        if entry is None:
            milli = share_milli(job.gpu_memory_gb, memory[node.model], job.gpu_milli) or MILLI
            request = request_for(session, job, 1, milli)
            entry = requests[node.model] = (request, scorer(session, bound, request))
        request, score = entry
        key = score(node)
        if best is None or better(session, key, node, best[0], best[1].node):
            best = (key, gpu, request)
    assert best is not None
    _, first, request = best
    if not request.is_share:
        return first, None
    return first, bound.policy.share_pick(node_view(session, first.node), request, bound.fm, None)
