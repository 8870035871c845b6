"""Scenarios for repartitioning between whole-GPU and MIG use."""

from scheduling.engine import Repartition, schedule
from scheduling.engine.types import Gpu, Node
from tests.engine.builders import NOW, inference, job, node, running, snap


def test_an_idle_whole_gpu_is_turned_to_mig_for_waiting_inference():
    busy = [running(job(f"t{i}"), "n1", [i]) for i in range(6)]
    plan = schedule(snap([node("n1"), node("n2")], [inference("i", 15, cls="interactive")],
                         busy))
    assert plan.repartitions == (Repartition("n1", 6, True, (("1g.20gb", 6),)),)
    assert plan.binds == ()
    assert plan.pending["i"].reason == "repartition-pending"


def test_several_small_jobs_share_one_new_layout():
    jobs = [inference(f"i{k}", 8, cls="interactive") for k in range(3)]
    plan = schedule(snap([node("n1", gpus=1)], jobs))
    assert len(plan.repartitions) == 1
    assert len(plan.repartitions[0].layout) == 3


def test_hysteresis_keeps_a_recent_layout():
    recent = node("n1", gpus=1)
    gpu = recent.gpus[0]
    recent = Node(**{**recent.__dict__, "gpus": (Gpu(**{**gpu.__dict__,
                                                        "layout_changed_at": NOW - 60}),)})
    plan = schedule(snap([recent], [inference("i", 15, cls="interactive")]))
    assert plan.repartitions == ()


def test_idle_mig_gpus_go_back_to_whole_for_training():
    nodes = [node("n1", mig=range(8), layouts={0: [("1g.10gb", 0, None)]})]
    plan = schedule(snap(nodes, [job("t", gpus=2)]))
    assert [(r.gpu_index, r.mig_enabled) for r in plan.repartitions] == [(0, False), (1, False)]


def test_busy_instances_are_never_removed():
    layouts = {0: [("3g.40gb", 0, "busy"), ("3g.40gb", 4, None)]}
    busy = [running(inference("busy", 30), "n1", allocations=(
        __import__("scheduling.engine", fromlist=["Allocation"]).Allocation(
            0, 429, 39.5, "3g.40gb", 0),))]
    plan = schedule(snap([node("n1", gpus=1, layouts=layouts)],
                         [inference("i", 15, cls="interactive")], busy))
    # The idle 3g is reshaped to fit the 15 GB job; the busy one stays.
    assert plan.repartitions[0].layout[0] == ("3g.40gb", 0)
    assert len(plan.repartitions) == 1


def test_in_flight_repartition_counts_as_done_and_takes_no_work():
    pending = [inference("i", 15, cls="interactive")]
    first = schedule(snap([node("n1", gpus=1)], pending))
    second = schedule(snap([node("n1", gpus=1)], pending, in_flight=first.repartitions))
    assert second.repartitions == () and second.binds == ()
