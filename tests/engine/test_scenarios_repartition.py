"""Scenarios for repartitioning between whole-GPU and MIG use."""

from dataclasses import replace

import pytest

from scheduling.engine import Repartition, schedule
from scheduling.engine.policies import get_policy
from tests.engine.builders import NOW, inference, job, node, running, snap

# A notebook beside running training takes an idle whole GPU there rather than wait for a carved
# slice (slice_or_whole, test_slice_or_whole.py); these scenarios are about carving, without it.
CARVES = get_policy("tessera").with_features(slice_or_whole=False)


def test_an_idle_whole_gpu_is_turned_to_mig_for_waiting_inference():
    # The running jobs checkpointed just now: stopping them (mig-manager stops every GPU pod of
    # the node) loses nothing, so the fullest node is carved.
    busy = [running(job(f"t{i}", last_checkpoint_at=NOW), "n1", [i]) for i in range(6)]
    plan = schedule(snap([node("n1"), node("n2")], [inference("i", 15, cls="interactive")],
                         busy), CARVES)
    assert plan.repartitions == (Repartition(node="n1", gpu_index=6, mig_enabled=True, layout=(("1g.20gb", 6),)),)
    assert plan.binds == ()
    assert plan.pending["i"].reason == "repartition-pending"


def test_no_layout_change_on_a_node_whose_training_would_lose_work():
    # mig-manager applies a layout node-wide and stops every GPU pod there: training that has
    # run an hour since its last checkpoint (here: none) would lose that hour on 6 GPUs. The
    # slice is carved on the empty node instead, and with no other node, nowhere.
    busy = [running(job(f"t{i}"), "n1", [i]) for i in range(6)]
    plan = schedule(snap([node("n1"), node("n2")], [inference("i", 15, cls="interactive")], busy), CARVES)
    assert [(r.node, r.mig_enabled) for r in plan.repartitions] == [("n2", True)]
    alone = schedule(snap([node("n1")], [inference("i", 15, cls="interactive")], busy), CARVES)
    assert alone.repartitions == ()
    # A service on the node loses nothing when stopped: it is carved (not above the job's class:
    # test_scenarios_burst_fallback.py).
    served = [running(inference(f"s{i}", 80, cls="interactive"), "n1", [i]) for i in range(6)]
    plan = schedule(snap([node("n1")], [inference("i", 15, cls="interactive")], served), CARVES)
    assert [(r.node, r.gpu_index) for r in plan.repartitions] == [("n1", 6)]


def test_several_small_jobs_share_one_new_layout():
    jobs = [inference(f"i{k}", 8, cls="interactive") for k in range(3)]
    plan = schedule(snap([node("n1", gpus=1)], jobs))
    assert len(plan.repartitions) == 1
    assert len(plan.repartitions[0].layout) == 3


def test_hysteresis_keeps_a_recent_layout():
    recent = node("n1", gpus=1)
    gpu = recent.gpus[0]
    recent = replace(recent, gpus=(replace(gpu, layout_changed_at=NOW - 60),))
    plan = schedule(snap([recent], [inference("i", 15, cls="interactive")]))
    assert plan.repartitions == ()


def test_idle_mig_gpus_go_back_to_whole_for_training():
    nodes = [node("n1", mig=range(8), layouts={0: [("1g.10gb", 0, None)]})]
    plan = schedule(snap(nodes, [job("t", gpus=2)]))
    assert [(r.gpu_index, r.mig_enabled) for r in plan.repartitions] == [(0, False), (1, False)]


def test_busy_instances_are_never_removed():
    # (A 1g.10gb cannot start at slot 7: NVML places it at 0-6. The engine now refuses such a
    # layout as faulty instead of trusting it, so the idle small slice sits at 6 alone.)
    layouts = {0: [("3g.40gb", 0, "busy"), ("2g.20gb", 4, "busy2"), ("1g.10gb", 6, None)]}
    busy = [running(inference("busy", 30, cls="interactive"), "n1", allocations=(
        __import__("scheduling.engine", fromlist=["Allocation"]).Allocation(
            gpu_index=0, milli=429, memory_gb=39.5, mig_profile="3g.40gb", mig_start=0),))]
    plan = schedule(snap([node("n1", gpus=1, layouts=layouts)],
                         [inference("i", 15, cls="interactive")], busy))
    # The idle 1g.10gb (too small for 15 GB) is reshaped into a 1g.20gb; the busy stay.
    assert plan.repartitions[0].layout == (("3g.40gb", 0), ("2g.20gb", 4), ("1g.20gb", 6))
    assert len(plan.repartitions) == 1


def test_an_idle_bigger_instance_is_used_before_a_reshape():
    layouts = {0: [("3g.40gb", 0, "busy"), ("3g.40gb", 4, None)]}
    plan = schedule(snap([node("n1", gpus=1, layouts=layouts)],
                         [inference("i", 15, cls="interactive")], queues=[("web", 1)]))
    assert plan.repartitions == ()
    assert [(a.mig_profile, a.mig_start) for a in plan.binds[0].allocations] == [("3g.40gb", 4)]


def test_in_flight_repartition_counts_as_done_and_takes_no_work():
    pending = [inference("i", 15, cls="interactive")]
    first = schedule(snap([node("n1", gpus=1)], pending))
    second = schedule(snap([node("n1", gpus=1)], pending, in_flight=first.repartitions))
    assert second.repartitions == () and second.binds == ()


def _capped(limit):
    from scheduling.engine import POLICIES
    return POLICIES.get("tessera").with_features(max_repartitions_per_cycle=limit)


def _busy_mig_gpu(i):
    """A MIG GPU running a 3g whose other instances are idle but too small for 15 GB."""
    return [("3g.40gb", 0, f"busy{i}"), ("2g.20gb", 4, f"busy2{i}"), ("1g.10gb", 6, None)]


REPARTITION_CAPS = [
    # name, nodes, jobs, cap, expected repartitions
    ("idle whole GPUs are not capped: every waiting job gets its layout in one cycle",
     [node("n1", gpus=5)], [inference(f"i{k}", 60, cls="interactive") for k in range(5)], 2, 5),
    ("reshaping GPUs that run work stays capped",
     [node("n1", gpus=4, layouts={i: _busy_mig_gpu(i) for i in range(4)})],
     [inference(f"i{k}", 15, cls="interactive") for k in range(4)], 2, 2),
]


@pytest.mark.parametrize("name, nodes, jobs, cap, expected", REPARTITION_CAPS,
                         ids=[c[0] for c in REPARTITION_CAPS])
def test_repartition_cap(name, nodes, jobs, cap, expected):
    plan = schedule(snap(nodes, jobs, queues=[("web", 8)]), _capped(cap))
    assert len(plan.repartitions) == expected
    assert plan.binds == ()


def test_no_repartition_for_a_job_its_quota_refuses():
    plan = schedule(snap([node("n1", gpus=2)], [inference("i", 60, cls="interactive")],
                         queues=[("web", 0, 0)]))
    assert plan.repartitions == ()
    assert plan.pending["i"].reason == "burst-limit"


def test_a_job_waiting_for_a_settling_layout_asks_for_no_second_one():
    first = schedule(snap([node("n1"), node("n2")], [inference("i", 15, cls="interactive")]))
    assert len(first.repartitions) == 1
    again = schedule(snap([node("n1"), node("n2")], [inference("i", 15, cls="interactive")],
                          in_flight=first.repartitions))
    assert again.repartitions == ()
    assert again.pending["i"].reason == "repartition-pending"


def test_a_gpu_that_is_not_mig_capable_is_never_repartitioned():
    plain = node("n1", gpus=1)
    plain = replace(plain, gpus=(replace(plain.gpus[0], mig_capable=False),))
    plan = schedule(snap([plain], [inference("i", 15, cls="interactive")]))
    assert plan.repartitions == ()
