"""Shares follow each node's device-plugin sharing mode (engine/sharing.py): MPS replicas pinned to
1/replicas of the memory, time-slicing only for jobs that accept no isolation, nothing on a node
that does not share; a sharing node offers no whole GPU; a GPU takes at most `replicas` shares."""

import pytest

from scheduling.engine import Allocation, schedule
from tests.engine.builders import NOW, binds_by_job, inference, job, node, running, snap

# L4s have no MIG: a sub-GPU job there can only share.
L4 = dict(model="L4", interconnect="pcie")


def notebook(id, mem, **kw):
    return inference(id, mem, team="ml", cls="interactive", **kw)


def place(nodes, jobs, policy="tessera"):
    return schedule(snap(nodes, jobs, queues=[("ml", 8), ("web", 8)]), policy)


def test_an_mps_node_takes_a_share_within_its_pinned_replica_memory():
    plan = place([node("m", gpus=1, sharing="mps", replicas=4, **L4)], [notebook("nb", 5.0)])
    [bind] = binds_by_job(plan)["nb"]
    assert bind.node == "m" and bind.allocations[0].memory_gb == 5.0
    # It holds its replica, a quarter of the GPU (compute and pinned memory), not 5/24 of it:
    # what the ledger bills and the simulator meters (Allocation.milli -> Placement.share_milli).
    assert bind.allocations[0].milli == 250


def test_mps_replicas_that_do_not_divide_a_thousand_still_fill_the_gpu():
    # 8 GB of 24 GB rounds up to 340 thousandths; each of 3 replicas holds 333, and 3 x 333 fit.
    plan = place([node("m", gpus=1, sharing="mps", replicas=3, **L4)], [notebook(f"nb{i}", 8.0) for i in range(3)])
    held = [binds[0].allocations[0].milli for binds in binds_by_job(plan).values()]
    assert held == [333, 333, 333]


def test_time_slicing_holds_only_the_memory_share():
    # No compute or memory is set aside for a time-sliced replica: the share is its memory fraction.
    plan = place([node("t", gpus=1, sharing="time-slicing", replicas=4, **L4)],
                 [notebook("nb", 4.0, accepts_no_isolation=True)])
    assert binds_by_job(plan)["nb"][0].allocations[0].milli == 170  # 4/24, up to the 10-thousandths step


def test_an_mps_replica_cannot_give_more_compute_than_its_share():
    plan = place([node("m", gpus=1, sharing="mps", replicas=4, **L4)], [notebook("nb", 2.0, gpu_milli=500)])
    assert "nb" not in binds_by_job(plan)


def test_a_need_beyond_the_mps_replica_waits_and_says_why():
    # 24 GB / 4 replicas = 6 GB pinned per client: 7 GB cannot run there.
    plan = place([node("m", gpus=1, sharing="mps", replicas=4, **L4)], [notebook("nb", 7.0)])
    assert "nb" not in binds_by_job(plan)
    assert plan.pending["nb"].reason == "no-sharing"
    assert "MPS replicas of m are smaller than its memory need" in plan.pending["nb"].message


def test_replicas_cap_the_shares_of_one_gpu():
    plan = place(
        [node("m", gpus=2, sharing="mps", replicas=2, **L4)],
        [notebook("a", 2.0), notebook("b", 2.0), notebook("c", 2.0)],
    )
    per_gpu: dict[int, int] = {}
    for binds in binds_by_job(plan).values():
        for alloc in binds[0].allocations:
            per_gpu[alloc.gpu_index] = per_gpu.get(alloc.gpu_index, 0) + 1
    assert per_gpu == {0: 2, 1: 1}  # packed, but never a third client on GPU 0


@pytest.mark.parametrize("accepts, placed", [(False, False), (True, True)])
def test_time_slicing_only_for_jobs_that_accept_no_isolation(accepts, placed):
    plan = place(
        [node("t", gpus=1, sharing="time-slicing", replicas=4, **L4)],
        [notebook("nb", 4.0, accepts_no_isolation=accepts)],
    )
    assert ("nb" in binds_by_job(plan)) is placed
    if not placed:
        assert plan.pending["nb"].reason == "no-sharing"
        assert "time-slice GPUs with no memory isolation" in plan.pending["nb"].message


def test_a_node_with_no_sharing_refuses_a_share_in_plain_words():
    plan = place([node("p", gpus=2, **L4)], [notebook("nb", 4.0)])
    assert "nb" not in binds_by_job(plan)
    assert plan.pending["nb"].reason == "no-sharing"
    assert "this node offers no GPU sharing" in plan.pending["nb"].message


def test_a_sharing_node_offers_no_whole_gpu():
    plan = place(
        [node("m", gpus=8, sharing="mps", replicas=2), node("w", gpus=8)], [job("train", gpus=4), job("wide", gpus=8)]
    )
    assert binds_by_job(plan)["train"][0].node == "w"
    assert "wide" not in binds_by_job(plan)  # "m" has 8 idle GPUs, but only as replicas


def test_shares_go_to_the_sharing_node_and_whole_gpus_to_the_plain_one():
    plan = place(
        [node("p", gpus=1, **L4), node("m", gpus=1, sharing="mps", replicas=4, **L4)],
        [notebook("nb", 4.0), job("train", gpus=1, gpu_models=("L4",))],
    )
    jobs = binds_by_job(plan)
    assert jobs["nb"][0].node == "m" and jobs["train"][0].node == "p"


def test_production_with_no_share_anywhere_takes_a_whole_gpu_rather_than_wait():
    plan = place([node("p", gpus=1, **L4)], [inference("web", 4.0)])
    assert binds_by_job(plan)["web"][0].allocations[0].milli == 1000


SHARING_POLICIES = ("tessera", "volcano", "binpack", "kueue-mig")


@pytest.mark.parametrize("policy", SHARING_POLICIES)
def test_no_policy_shares_a_gpu_the_cluster_does_not_offer_as_replicas(policy):
    # The device plugin on a node is the cluster's configuration: a baseline modelling HAMi or
    # volcano-vgpu gets no share where the node runs the plain plugin, tessera none either.
    plan = place([node("p", gpus=1, **L4)], [notebook("nb", 4.0)], policy=policy)
    assert "nb" not in binds_by_job(plan)


@pytest.mark.parametrize("policy", SHARING_POLICIES)
def test_every_sharing_policy_takes_an_mps_replica_and_no_whole_gpu_on_an_mps_node(policy):
    plan = place(
        [node("m", gpus=2, sharing="mps", replicas=4, **L4)],
        [inference("web", 4.0), job("train", gpus=1, gpu_models=("L4",))],  # kueue-mig shares serving only
        policy=policy,
    )
    jobs = binds_by_job(plan)
    assert jobs["web"][0].node == "m" and jobs["web"][0].allocations[0].milli < 1000
    assert "train" not in jobs  # the node offers replicas only, to every policy alike


def test_a_policy_that_does_not_share_gets_no_whole_gpu_on_a_sharing_node_either():
    plan = place([node("m", gpus=8, sharing="mps", replicas=2)], [job("train", gpus=1)], policy="k8s-default")
    assert "train" not in binds_by_job(plan)


@pytest.mark.parametrize("policy", ["tessera", "volcano", "kueue", "k8s-default"])
def test_a_whole_gpu_preemptor_looks_for_victims_past_sharing_nodes(policy):
    # 13 MPS nodes hold cheap best-effort shares (ranked first as victims); stopping them frees
    # no whole GPU (a sharing node offers none), so they must not take the 12 node tries
    # (evict.py NODE_TRIES) and hide the plain node whose training job production may stop.
    sharing = [node(f"m{i}", gpus=1, sharing="mps", replicas=4, **L4) for i in range(13)]
    share = (Allocation(gpu_index=0, milli=250, memory_gb=5.0, mig_profile=None, mig_start=None),)
    busy = [running(inference(f"nb{i}", 5.0, team="ml", cls="best-effort"), f"m{i}", allocations=share,
                    started=NOW - 600) for i in range(13)]
    busy.append(running(job("t", gpus=1), "p", [0], started=NOW - 3600))
    waiting = job("w", team="web", cls="production", gpus=1, gpu_models=("L4",), submitted_at=NOW - 5)
    plan = schedule(snap(sharing + [node("p", gpus=1, **L4)], [waiting], busy, queues=[("ml", 0), ("web", 1)]),
                    policy)
    assert [p.job_id for p in plan.preemptions] == ["t"]
    assert plan.pending["w"].reason == "waiting-for-preemption"
