"""Production inference near its team's burst limit, with no slice or share free (serving-heavy,
tuning seed 103: two replicas waited 5,010 s with 0.75 GPU left under `search`'s limit).

Its need, not the whole GPU it falls back on, is what the limit admits, for the replicas
running as for the one being placed; preemption frees a place
of its size where it can, a whole GPU only where it cannot; and a slice carved for a lower class
never stops it (mig-manager stops every GPU pod of the node)."""

from scheduling.engine import Allocation, schedule
from scheduling.engine.policies import get_policy
from tests.engine.builders import NOW, binds_by_job, inference, job, node, running, snap

MPS = node("s", gpus=1, sharing="mps", replicas=4)


def share(gpu_index=0, memory_gb=9.7):
    return (Allocation(gpu_index=gpu_index, milli=250, memory_gb=memory_gb, mig_profile=None, mig_start=None),)


def web_shares(count):
    return [running(inference(f"web-{i}", 9.7), "s", allocations=share()) for i in range(1, count + 1)]


def test_a_replica_whose_need_fits_takes_a_whole_gpu_over_the_limit_by_the_excess():
    # web holds 1 of 1.5: a 1g.10gb slice (1/7) would fit under the limit, none is free.
    state = snap(
        [node("m", gpus=2)],
        [inference("web-2", 9.7)],
        [running(inference("web-1", 30.0), "m", [1])],
        queues=[("web", 0.0, 1.5)],
    )
    [bind] = binds_by_job(schedule(state))["web-2"]
    assert (bind.node, bind.allocations[0].gpu_index, bind.allocations[0].milli) == ("m", 0, 1000)


def test_replicas_running_on_whole_gpus_count_their_need_against_the_limit():
    # web-1 and web-2 each hold a whole GPU for want of a slice: 2 GPUs counted in full, over
    # the limit of 1.5, but their need (a 1g.10gb slice each) leaves room for web-3's.
    state = snap(
        [node("m", gpus=3)],
        [inference("web-3", 9.7)],
        [running(inference("web-1", 9.7), "m", [0]), running(inference("web-2", 9.7), "m", [1])],
        queues=[("web", 0.0, 1.5)],
    )
    [bind] = binds_by_job(schedule(state))["web-3"]
    assert (bind.node, bind.allocations[0].gpu_index) == ("m", 2)


def test_a_replica_whose_need_does_not_fit_waits_at_the_limit():
    # web-1's need is a 3g.40gb slice (3/7), web-2's a 1g.10gb (1/7): 4/7 over the limit of 0.5.
    state = snap(
        [node("m", gpus=2)],
        [inference("web-2", 9.7)],
        [running(inference("web-1", 30.0), "m", [1])],
        queues=[("web", 0.0, 0.5)],
    )
    plan = schedule(state)
    assert "web-2" not in binds_by_job(plan)
    assert plan.pending["web-2"].reason == "burst-limit"


def test_preemption_frees_a_share_within_the_limit_rather_than_a_whole_gpu():
    # web holds 0.75 of 1: a share fits under the limit, a whole GPU only by the excess. The
    # training job is the cheaper victim (lowest class, just checkpointed) but frees a whole GPU.
    train = job("train", checkpoint_interval_s=600, last_checkpoint_at=NOW)
    nb = running(inference("nb", 9.7, team="ml", cls="interactive"), "s", allocations=share())
    state = snap(
        [node("n", gpus=1), MPS],
        [inference("web-4", 9.7)],
        [running(train, "n", [0]), *web_shares(3), nb],
        queues=[("web", 0.0, 1.0), ("ml", 8.0)],
    )
    plan = schedule(state)
    assert [(p.job_id, p.for_job_id) for p in plan.preemptions] == [("nb", "web-4")]


def test_preemption_frees_a_whole_gpu_when_no_place_within_the_limit_can_be_freed():
    train = job("train", checkpoint_interval_s=600, last_checkpoint_at=NOW)
    state = snap(
        [node("n", gpus=1), MPS],
        [inference("web-5", 9.7)],
        [running(train, "n", [0]), *web_shares(4)],
        queues=[("web", 0.0, 1.5), ("ml", 8.0)],
    )
    plan = schedule(state)
    assert [(p.job_id, p.for_job_id) for p in plan.preemptions] == [("train", "web-5")]


def test_a_slice_for_a_notebook_stops_no_production_on_the_node():
    # (Without slice_or_whole, which gives the notebook the node's idle whole GPU instead.)
    waits = get_policy("tessera").with_features(slice_or_whole=False)
    notebook = inference("nb-2", 9.7, team="ml", cls="interactive")
    beside_production = snap(
        [node("m", gpus=2)],
        [notebook],
        [running(inference("web-1", 30.0), "m", [1])],
        queues=[("ml", 8.0), ("web", 8.0)],
    )
    assert schedule(beside_production, waits).repartitions == ()
    beside_a_notebook = snap(
        [node("m", gpus=2)],
        [notebook],
        [running(inference("nb-1", 30.0, team="ml", cls="interactive"), "m", [1])],
        queues=[("ml", 8.0)],
    )
    assert [(r.node, r.gpu_index) for r in schedule(beside_a_notebook, waits).repartitions] == [("m", 0)]
