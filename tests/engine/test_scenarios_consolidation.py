"""Table-driven scenarios: consolidation moves running jobs into gaps elsewhere so that a job
needing a whole node (or several) can start, and never moves what it must not."""

import pytest

from scheduling.engine import schedule
from tests.engine.builders import NOW, binds_by_job, job, node, running, snap

DAY = 86_400.0
POLICY = "tessera-consolidate"


def small(id, team="ml", cls="training", ckpt=1800.0, runtime=DAY, **kw):
    """A 1-GPU training job that checkpoints and would run for another day."""
    return job(id, team=team, cls=cls, checkpoint_interval_s=ckpt, expected_runtime_s=runtime, **kw)


def spread(prefix, node_name, gpus, started=NOW - 3600, **kw):
    return [running(small(f"{prefix}{i}", **kw), node_name, [i], started=started) for i in gpus]


WHOLE_NODE = job("big", gpus=8, expected_runtime_s=DAY)
HALF = range(4)

SCENARIOS = [
    # name, running, pending, expected movers (job-id prefixes)
    ("four jobs on each of two nodes: one node's four move into the other's gaps",
     spread("a", "n1", HALF) + spread("b", "n2", HALF), WHOLE_NODE, 4),
    ("no room elsewhere for the movers: nothing moves",
     spread("a", "n1", range(6)) + spread("b", "n2", range(6)), WHOLE_NODE, 0),
    ("jobs that do not checkpoint are never moved",
     spread("a", "n1", HALF, ckpt=None) + spread("b", "n2", HALF, ckpt=None), WHOLE_NODE, 0),
    ("a job of a higher class than the waiting one is never moved",
     spread("a", "n1", HALF, cls="interactive") + spread("b", "n2", HALF, cls="interactive"),
     WHOLE_NODE, 0),
    ("a job that started less than 15 minutes ago is left alone",
     spread("a", "n1", HALF, started=NOW - 300) + spread("b", "n2", HALF, started=NOW - 300),
     WHOLE_NODE, 0),
    ("the waiting job would start within 30 minutes anyway: nothing moves",
     spread("a", "n1", HALF, runtime=3600 + 600) + spread("b", "n2", HALF, runtime=3600 + 600),
     WHOLE_NODE, 0),
    ("jobs that may not be preempted stay",
     spread("a", "n1", HALF, preemptible=False) + spread("b", "n2", HALF, preemptible=False),
     WHOLE_NODE, 0),
]


@pytest.mark.parametrize("name, runs, pending, movers", SCENARIOS, ids=[s[0] for s in SCENARIOS])
def test_consolidation(name, runs, pending, movers):
    plan = schedule(snap([node("n1"), node("n2")], [pending], runs, queues=[("ml", 16, 16)]), POLICY)
    moved = [p for p in plan.preemptions if p.reason == "consolidate"]
    assert len(moved) == movers
    assert plan.binds == ()
    if movers:
        assert len({m.job_id[0] for m in moved}) == 1  # all from one node
        assert {m.for_job_id for m in moved} == {"big"}
        assert plan.pending["big"].reason == "waiting-for-consolidation"
    else:
        assert plan.preemptions == ()


def test_production_inference_is_never_moved():
    runs = [running(small(f"p{i}", cls="production", team="web"), n, [i])
            for n in ("n1", "n2") for i in HALF]
    plan = schedule(snap([node("n1"), node("n2")], [WHOLE_NODE], runs,
                         queues=[("ml", 16, 16), ("web", 16, 16)]), POLICY)
    assert plan.preemptions == ()


def test_after_the_move_the_big_job_gets_the_freed_node_and_the_movers_the_gaps():
    runs = spread("a", "n1", HALF) + spread("b", "n2", HALF)
    nodes = [node("n1"), node("n2")]
    plan = schedule(snap(nodes, [WHOLE_NODE], runs, queues=[("ml", 16, 16)]), POLICY)
    moved = {p.job_id for p in plan.preemptions}
    assert len(moved) == 4
    # The backend confirms the release: the movers wait again beside the big job.
    later = NOW + 60
    stayed = [r for r in runs if r.job.id not in moved]
    movers = [r.job for r in runs if r.job.id in moved]
    plan = schedule(snap(nodes, [WHOLE_NODE, *movers], stayed, queues=[("ml", 16, 16)], now=later), POLICY)
    binds = binds_by_job(plan)
    assert set(binds) == {"big", *moved}
    freed = {r.node for r in runs if r.job.id in moved}
    assert {b.node for b in binds["big"]} == freed
    assert all(binds[m][0].node not in freed for m in moved)
    assert plan.preemptions == ()


def test_a_gang_over_two_nodes_empties_the_cheapest_node():
    gang = job("gang", gpus=8, gang_size=2, expected_runtime_s=DAY)
    runs = spread("a", "n1", range(2)) + spread("b", "n2", range(5))
    plan = schedule(snap([node("n1"), node("n2"), node("n3")], [gang], runs,
                         queues=[("ml", 32, 32)]), POLICY)
    moved = {p.job_id for p in plan.preemptions if p.reason == "consolidate"}
    assert moved == {"a0", "a1"}  # n3 is free already; n1 is the cheaper node to empty


@pytest.mark.parametrize("policy", ["tessera", "binpack", "k8s-default"])
def test_policies_without_the_action_never_move_jobs(policy):
    runs = spread("a", "n1", HALF) + spread("b", "n2", HALF)
    plan = schedule(snap([node("n1"), node("n2")], [WHOLE_NODE], runs, queues=[("ml", 16, 16)]),
                    policy)
    assert plan.preemptions == ()


def test_while_the_movers_release_the_waiting_job_says_so():
    from scheduling.engine import Preempt

    runs = spread("a", "n1", HALF) + spread("b", "n2", HALF)
    moving = tuple(Preempt(job_id=f"a{i}", for_job_id="big", reason="consolidate") for i in HALF)
    plan = schedule(snap([node("n1"), node("n2")], [WHOLE_NODE], runs, queues=[("ml", 16, 16)],
                         in_flight=moving), POLICY)
    assert plan.pending["big"].reason == "waiting-for-consolidation"
    assert plan.preemptions == ()  # nothing asked twice
