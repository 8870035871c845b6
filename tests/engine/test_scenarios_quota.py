"""Scenarios for quotas, fair share, priorities, preemption, reclaim and tiers."""

import pytest

from scheduling.engine import Bind, Preempt, schedule
from scheduling.engine.policies import get_policy
from tests.engine.builders import NOW, binds_by_job, inference, job, node, running, snap, whole


def gpus_of(plan, job_id):
    return sum(len(b.allocations) for b in plan.binds if b.job_id == job_id)


def test_guaranteed_first_then_burst_marked_borrowed():
    jobs = [job(f"a{i}", team="a") for i in range(12)]
    plan = schedule(snap([node("n1"), node("n2")], jobs, queues=[("a", 8), ("b", 8)]))
    binds = plan.binds
    assert len(binds) == 12
    assert sum(b.borrowed for b in binds) == 4


def test_idle_capacity_is_lent_by_weight():
    jobs = [job(f"a{i}", team="a") for i in range(16)] + \
        [job(f"b{i}", team="b") for i in range(16)]
    plan = schedule(snap([node("n1"), node("n2")], jobs,
                         queues=[("a", 2, None, 3.0), ("b", 2, None, 1.0)]))
    per_team = {t: sum(1 for b in plan.binds if b.team == t) for t in "ab"}
    assert per_team == {"a": 11, "b": 5}


def test_burst_limit_is_a_hard_cap():
    jobs = [job(f"a{i}", team="a") for i in range(10)]
    plan = schedule(snap([node("n1")], jobs, queues=[("a", 2, 4)]))
    assert len(plan.binds) == 4
    assert plan.pending["a4"].reason == "burst-limit"


def test_reclaim_stops_borrowed_work_for_a_guarantee_and_waits():
    borrowed = [running(job(f"b{i}", team="b"), "n1", [i], borrowed=True) for i in range(8)]
    plan = schedule(snap([node("n1")], [job("a1", team="a", gpus=2)], borrowed,
                         queues=[("a", 4), ("b", 4)]))
    assert plan.binds == ()
    assert {p.reason for p in plan.preemptions} == {"reclaim"}
    assert len(plan.preemptions) == 2
    assert plan.pending["a1"].reason == "waiting-for-preemption"


def test_a_guarantee_is_reclaimed_even_from_a_long_job_without_checkpoints():
    # DESIGN: a team's guaranteed quota is always available to it. Team a (guarantee 4) runs 8 GPUs:
    # a 5-hour job that never checkpoints, marked borrowed when it bound, and a checkpointing one;
    # team b, holding nothing, asks its 4. Sparing the unsaved job while the other keeps its
    # within-guarantee mark left b waiting (reverted rule, issue 18 experiment log).
    unsaved = job("unsaved", team="a", gpus=4)
    saved = job("saved", team="a", gpus=4, checkpoint_interval_s=600.0, last_checkpoint_at=NOW - 60)
    runs = [running(unsaved, "n1", range(4), started=NOW - 5 * 3600, borrowed=True),
            running(saved, "n1", range(4, 8), started=NOW - 2 * 3600)]
    plan = schedule(snap([node("n1")], [job("b1", team="b", gpus=4)], runs, queues=[("a", 4), ("b", 4)]))
    assert [p.job_id for p in plan.preemptions] == ["unsaved"]


def test_no_preemption_of_another_teams_within_quota_job_for_a_burst():
    within = [running(job(f"b{i}", team="b", cls="best-effort"), "n1", [i]) for i in range(8)]
    plan = schedule(snap([node("n1")], [job("a1", team="a", cls="interactive")], within,
                         queues=[("a", 0), ("b", 8)]))
    assert plan.preemptions == ()


def test_production_inference_within_quota_always_gets_resources():
    within = [running(job(f"b{i}", team="b"), "n1", [i]) for i in range(8)]
    plan = schedule(snap([node("n1")], [inference("p1", 70, team="web")], within,
                         queues=[("web", 2), ("b", 8)]))
    assert len(plan.preemptions) == 1 and plan.preemptions[0].reason == "preempt"


def test_production_beyond_its_guarantee_preempts_another_teams_guaranteed_work():
    # Serving at its peak far beyond its guarantee (here none) still wins (production_wins);
    # the baselines keep the old rule: only within its own guarantee.
    within = [running(job(f"b{i}", team="b"), "n1", [i]) for i in range(8)]
    state = snap([node("n1")], [inference("p1", 70, team="web")], within, queues=[("web", 0), ("b", 8)])
    plan = schedule(state)
    assert [p.reason for p in plan.preemptions] == ["preempt"]
    assert schedule(state, get_policy("tessera").with_features(production_wins=False)).preemptions == ()
    assert schedule(state, "volcano").preemptions == ()


def test_free_room_goes_to_production_beyond_its_guarantee_before_guaranteed_training():
    # Else the room its victims free goes to a guaranteed job first, and it preempts again.
    others = [running(job(f"b{i}", team="b"), "n1", [i]) for i in range(7)]
    pending = [inference("p1", 70, team="web"), job("t1", team="b")]
    state = snap([node("n1")], pending, others, queues=[("web", 0), ("b", 8)])
    assert [b.job_id for b in schedule(state).binds] == ["p1"]
    without = schedule(state, get_policy("tessera").with_features(production_wins=False))
    assert [b.job_id for b in without.binds] == ["t1"]


VICTIMS = [  # (job, started, borrowed)
    (job("old-train", cls="training", checkpoint_interval_s=600, last_checkpoint_at=NOW - 100), NOW - 7200, False),
    (job("fresh-train", cls="training"), NOW - 300, False),
    (job("best", cls="best-effort"), NOW - 7200, False),
    (job("borrowed", cls="interactive"), NOW - 7200, True),
]


@pytest.mark.parametrize("policy, expected", [
    # The baselines' order (kube-scheduler, Kueue, Volcano): the lowest class, then work lost.
    ("kueue", ["borrowed", "best", "old-train", "fresh-train"]),
    # tessera's (issue 18): the fewest GPU-seconds lost since the last checkpoint, then class;
    # the best-effort job that never checkpointed would lose two hours, so it goes last.
    ("tessera", ["borrowed", "old-train", "fresh-train", "best"]),
])
def test_victims_borrowed_first_then_in_the_policys_victim_order(policy, expected):
    jobs = list(VICTIMS)
    pending = [job("hi", team="ml", cls="production", kind="inference", gpus=1)]
    order = []
    while jobs:
        runs = [running(j, "n1", [i], started=s, borrowed=b) for i, (j, s, b) in enumerate(jobs)]
        plan = schedule(snap([node("n1", gpus=len(jobs))], pending, runs,
                             queues=[("ml", len(jobs))]), policy)
        victim = plan.preemptions[0].job_id
        order.append(victim)
        jobs = [r for r in jobs if r[0].id != victim]
    assert order == expected


def test_the_preemptor_is_placed_only_after_the_release_is_confirmed():
    victim = running(job("low", team="b", cls="best-effort"), "n1", [0])
    hi = inference("hi", 70, team="b")
    nodes = [node("n1", gpus=1)]
    first = schedule(snap(nodes, [hi], [victim], queues=[("b", 1)]))
    assert first.preemptions == (Preempt(job_id="low", for_job_id="hi", reason="preempt"),) and first.binds == ()
    # Next cycle: the preemption is in flight, the victim still running: nothing new.
    second = schedule(snap(nodes, [hi], [victim], queues=[("b", 1)],
                           in_flight=first.preemptions))
    assert second.preemptions == () and second.binds == ()
    assert second.pending["hi"].reason == "waiting-for-preemption"
    # Release confirmed: the victim is gone and the preemptor starts.
    third = schedule(snap(nodes, [hi], [], queues=[("b", 1)]))
    assert [b.job_id for b in third.binds] == ["hi"]


def test_in_flight_binds_count_as_done():
    bind = Bind(job_id="x", team="ml", member=0, node="n1", allocations=tuple(whole(i) for i in range(6)),
                borrowed=False)
    plan = schedule(snap([node("n1")], [job("j", gpus=4)], in_flight=[bind]))
    assert plan.binds == ()


def test_production_inference_never_goes_to_spot():
    plan = schedule(snap([node("s", tier="spot", mig=range(8))], [inference("p", 10)]))
    assert plan.binds == ()
    k8s = schedule(snap([node("s", tier="spot")], [inference("p", 10)]), "k8s-default")
    assert len(k8s.binds) == 1


def test_production_prefers_reserved_then_on_demand():
    nodes = [node("od", tier="on-demand", mig=range(8)), node("r", tier="reserved", mig=range(8))]
    plan = schedule(snap(nodes, [inference("p", 10)]))
    assert plan.binds[0].node == "r"
    plan = schedule(snap(nodes[:1], [inference("p", 10)]))
    assert plan.binds[0].node == "od"


def test_checkpointing_training_prefers_spot_else_reserved():
    nodes = [node("od", tier="on-demand"), node("r", tier="reserved"), node("s", tier="spot")]
    ckpt = job("c", checkpoint_interval_s=900)
    plain = job("p")
    plan = schedule(snap(nodes, [ckpt, plain]))
    where = {b.job_id: b.node for b in plan.binds}
    assert where == {"c": "s", "p": "r"}


def test_blocked_head_reserves_and_backfill_fills_without_delay():
    busy = [running(job(f"r{i}", team="x"), "n1", [i], started=NOW - 100) for i in range(6)]
    # r* end at NOW + 3500; the 4-GPU head waits for them; "short" ends before, "long" after.
    head = job("head", gpus=4, queue_order=1)
    short = job("short", queue_order=2, expected_runtime_s=600)
    long_ = job("long", queue_order=3, expected_runtime_s=90_000)
    plan = schedule(snap([node("n1")], [head, short, long_], busy))
    assert [b.job_id for b in plan.binds] == ["short"]
    # The head reserves n1's GPUs; "long" would still run at the reservation, so it waits.
    assert plan.pending["head"].reason == "reserved"
    assert "held for head" in plan.pending["long"].message
    assert plan.pending["head"].eta == NOW + 3500
    assert plan.pending["head"].team_position == 1 and plan.pending["long"].team_position == 2


def test_quota_message_names_the_quota():
    jobs = [job(f"a{i}", team="a") for i in range(9)]
    plan = schedule(snap([node("n1")], jobs, queues=[("a", 8)]))
    assert plan.pending["a8"].message.startswith("team quota 8/8 GPUs in use")


def test_positions_overall_follow_class():
    nodes = [node("n1", gpus=1)]
    busy = [running(job("r"), "n1", [0])]
    plan = schedule(snap(nodes, [job("t1"), inference("p1", 70, team="ml"), job("t2")], busy))
    assert plan.pending["p1"].overall_position == 1
    assert [plan.pending[j].overall_position for j in ("t1", "t2")] == [2, 3]
    assert binds_by_job(plan) == {}


def test_a_job_at_its_teams_burst_limit_is_expected_when_its_own_jobs_end():
    mine = job("mine", team="web", gpus=2, expected_runtime_s=7200)  # started an hour ago: ends in ~1 h
    plan = schedule(snap([node("n1")], [job("next", team="web", gpus=2)], [running(mine, "n1", [0, 1])],
                         queues=[("web", 2, 2)]))
    info = plan.pending["next"]
    assert info.reason == "burst-limit"
    assert "would hold 4 GPUs; its burst limit is 2" in info.message
    assert info.eta == pytest.approx(NOW + 3600)


def test_a_job_larger_than_its_teams_burst_limit_says_so():
    plan = schedule(snap([node("n1")], [job("big", team="web", gpus=4)], queues=[("web", 2, 2)]))
    assert plan.pending["big"].reason == "burst-limit"
    assert "more than team web's burst limit of 2" in plan.pending["big"].message
    assert plan.pending["big"].eta is None


def test_a_team_at_its_guarantee_is_told_the_real_reason_when_gpus_are_idle():
    # Team web holds its guarantee; 14 GPUs are idle but no node has the 8 its jobs need
    # (the first holds a reservation, the second is the one explained).
    mine = job("mine", team="web", gpus=1)
    plan = schedule(snap([node("n1"), node("n2")], [job("big", team="web", gpus=8), job("big2", team="web", gpus=8)],
                         [running(mine, "n1", [0]), running(job("other", team="b", gpus=1), "n2", [0])],
                         queues=[("web", 1, 16)]))
    info = plan.pending["big2"]
    assert info.reason == "no-free-gpus"
    assert "no idle GPU to borrow" not in info.message and "largest free group is 7" in info.message


def test_a_team_at_its_guarantee_with_nothing_idle_is_told_so():
    busy = [running(job(f"b{i}", team="b"), "n1", [i]) for i in range(7)]
    busy.append(running(job("mine", team="web"), "n1", [7]))
    plan = schedule(snap([node("n1")], [job("next", team="web")], busy, queues=[("web", 1, 4), ("b", 7, 8)]))
    info = plan.pending["next"]
    assert info.reason == "quota-no-idle" and "no idle GPU to borrow" in info.message
