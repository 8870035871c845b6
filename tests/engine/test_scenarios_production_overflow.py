"""Production inference that finds no free MIG slice still starts at once: it shares a
whole-mode GPU, bounded by memory, rather than holding a whole GPU for a fraction of its use,
where a node's device plugin shares (MPS here); elsewhere it takes a whole GPU."""

from scheduling.engine import schedule
from scheduling.engine.policies import get_policy
from tests.engine.builders import binds_by_job, inference, job, node, snap

# GPU 0 is in MIG mode and fully used; GPUs 1-3 are whole and idle.
FULL_MIG = node("n", gpus=4, mig=(0,), layouts={0: [("7g.80gb", 0, "busy")]})
MPS = node("s", gpus=2, sharing="mps", replicas=4)  # 20 GB pinned per replica


def allocation(plan, job_id):
    [bind] = binds_by_job(plan)[job_id]
    [alloc] = bind.allocations
    return alloc


def test_production_overflow_shares_a_whole_gpu_instead_of_taking_it():
    plan = schedule(snap([FULL_MIG, MPS], [inference("web-1", 9.7)], queues=[("web", 8)]))
    alloc = allocation(plan, "web-1")
    assert alloc.mig_profile is None and alloc.milli < 1000 and alloc.memory_gb == 9.7
    assert binds_by_job(plan)["web-1"][0].node == "s"


def test_overflow_replicas_pack_onto_the_same_shared_gpu():
    plan = schedule(snap([FULL_MIG, MPS], [inference("web-1", 9.7), inference("web-2", 18.3)],
                         queues=[("web", 8)]))
    assert allocation(plan, "web-1").gpu_index == allocation(plan, "web-2").gpu_index


def test_with_no_sharing_node_the_overflow_takes_a_whole_gpu():
    plan = schedule(snap([FULL_MIG], [inference("web-1", 9.7)], queues=[("web", 8)]))
    assert allocation(plan, "web-1").milli == 1000


def test_the_rest_of_the_node_stays_whole_for_training():
    plan = schedule(snap([FULL_MIG], [inference("web-1", 9.7), job("train", gpus=2)],
                         queues=[("web", 8), ("ml", 8)]))
    used = {allocation(plan, "web-1").gpu_index}
    [bind] = binds_by_job(plan)["train"]
    assert {a.gpu_index for a in bind.allocations}.isdisjoint(used)


def test_without_the_option_it_takes_a_whole_gpu():
    policy = get_policy("tessera").with_features(production_shares=False)
    plan = schedule(snap([FULL_MIG], [inference("web-1", 9.7)], queues=[("web", 8)]), policy)
    assert allocation(plan, "web-1").milli == 1000


def test_without_slice_or_whole_non_production_sub_gpu_work_waits_for_a_slice():
    policy = get_policy("tessera").with_features(slice_or_whole=False)
    plan = schedule(snap([FULL_MIG], [inference("nb-1", 9.7, cls="interactive", team="ml")],
                         queues=[("ml", 8)]), policy)
    assert "nb-1" not in binds_by_job(plan)
