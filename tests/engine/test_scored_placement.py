"""The live engine's placement with a fragmentation scorer (Features.placement_scorer): in a
hand-built case it takes the node, or the GPU, that leaves the cluster less fragmented for the
jobs it sees, where index order (binpack) would take the fullest."""

import pytest

from scheduling.engine import schedule
from scheduling.engine.fragment import Request
from scheduling.engine.placement import scored
from scheduling.engine.policies import TESSERA
from scheduling.engine.session import Session
from scheduling.engine.types import Allocation
from tests.engine.builders import binds_by_job, inference, job, node, running, snap


def _share(gpu_index, milli, memory_gb):
    return Allocation(gpu_index=gpu_index, milli=milli, memory_gb=memory_gb, mig_profile=None, mig_start=None)


def whole_case():
    """Node a has 2 free GPUs, b has 3; most jobs ask for 2 GPUs. A 1-GPU job on a would leave
    it one GPU no 2-GPU job can use; on b it leaves two that one can."""
    nodes = [node("a", gpus=4), node("b", gpus=4), node("c", gpus=8)]
    pairs = [job(f"p{i}", gpus=2) for i in range(5)]
    busy = [running(pairs[0], "a", (0, 1)), running(job("one"), "b", (0,))]
    busy += [running(p, "c", (2 * i, 2 * i + 1)) for i, p in enumerate(pairs[1:])]
    return snap(nodes, [job("new", gpus=1)], busy)


def share_case():
    """One T4 node: GPU 0 has 500 milli free, GPU 1 has 700. A 200-milli share on GPU 0 (the
    fullest) leaves 300 that a 500-milli job cannot use; on GPU 1 it leaves two 500s."""
    t4 = node("t", model="T4", interconnect="pcie", gpus=2, sharing="mps", replicas=2)  # shares only where MPS
    busy = [
        running(inference("half", 8), "t", allocations=(_share(0, 500, 8),)),
        running(inference("third", 4.8), "t", allocations=(_share(1, 300, 4.8),)),
    ]
    return snap([t4], [inference("new", 3.2)], busy)


def _where(plan, job_id):
    [bind] = binds_by_job(plan)[job_id]
    return bind.node, [a.gpu_index for a in bind.allocations]


@pytest.mark.parametrize("scorer", ["tessera", "fgd"])
def test_a_whole_gpu_goes_where_it_fragments_less(scorer):
    policy = TESSERA.with_features(placement_scorer=scorer)
    assert _where(schedule(whole_case(), policy), "new")[0] == "b"
    # Index order alone (binpack, the fullest node first) takes a.
    assert _where(schedule(whole_case(), TESSERA.with_features(placement_scorer="order")), "new")[0] == "a"


@pytest.mark.parametrize("scorer", ["tessera", "fgd"])
def test_a_share_goes_to_the_gpu_it_fragments_less(scorer):
    policy = TESSERA.with_features(placement_scorer=scorer)
    assert _where(schedule(share_case(), policy), "new") == ("t", [1])
    assert _where(schedule(share_case(), TESSERA.with_features(placement_scorer="order")), "new") == ("t", [0])


def test_the_prior_is_the_cycles_jobs_one_request_per_member():
    session = Session(whole_case(), TESSERA.with_features(placement_scorer="fgd").features)
    bound = scored.binding(session)
    assert bound is not None and bound.policy.name == "fgd"
    shapes = {(s.num_gpu, s.gpu_milli): s.p for s in bound.fm.shapes}
    # 5 members ask for 2 GPUs, 2 for one: learned as a mix in 16 steps (11 and 5).
    assert shapes == {(2, 1000): 11 / 16, (1, 1000): 5 / 16}
    view = scored.node_view(session, session.nodes["a"])
    assert view.gpus == (1000, 1000, 0, 0) and view.cpu_left == 127_000


def test_an_unknown_scorer_is_refused_when_the_policy_is_built():
    with pytest.raises(ValueError, match="placement_scorer is 'tessera-fill'"):
        TESSERA.with_features(placement_scorer="tessera-fill")


def test_the_mix_is_ordered_whatever_the_model_constraints():
    free, h100 = Request(1000, 0, 1, 1000), Request(1000, 0, 1, 1000, frozenset({"H100-80GB"}))
    share = Request(1000, 0, 1, 250, frozenset({"A100-80GB", "H100-80GB"}))
    mixes = {scored._mix(order) for order in ([free, h100, share, free], [share, free, h100, free])}
    assert mixes == {((share, 4), (free, 8), (h100, 4))}
