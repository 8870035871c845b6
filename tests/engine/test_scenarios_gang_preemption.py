"""Table-driven scenarios: a gang that needs several nodes may preempt across them."""

import pytest

from scheduling.engine import schedule
from tests.engine.builders import NOW, job, node, running, snap


def full_node(name, prefix, team="ml", cls="best-effort", started=NOW - 3600, borrowed=False):
    """Eight 1-GPU jobs filling node `name`."""
    return [running(job(f"{prefix}{i}", team=team, cls=cls), name, [i], started=started,
                    borrowed=borrowed) for i in range(8)]


GANG = job("gang", cls="interactive", gpus=8, gang_size=2)

SCENARIOS = [
    # name, nodes, running, queues, expected victims (set of job-id prefixes), gang
    ("a 16-GPU gang preempts over the two cheapest nodes",
     ["n1", "n2", "n3"],
     full_node("n1", "a") + full_node("n2", "b") + full_node("n3", "c", started=NOW - 90_000),
     [("ml", 40)], {"a", "b"}, GANG),
    ("a node that already has room costs nothing: victims on one node only",
     ["n1", "n2"], full_node("n2", "b"), [("ml", 40)], {"b"}, GANG),
    ("never another team's within-quota job for a burst",
     ["n1", "n2"], full_node("n1", "a", team="other") + full_node("n2", "b", team="other"),
     [("ml", 0), ("other", 16)], set(), GANG),
    ("borrowed capacity of another team goes for a guarantee (reclaim)",
     ["n1", "n2", "n3"],
     full_node("n1", "a", team="other", borrowed=True, cls="training")
     + full_node("n2", "b", team="other", borrowed=True, cls="training")
     + full_node("n3", "c", team="other", cls="training"),
     [("ml", 16), ("other", 8)], {"a", "b"}, job("gang", gpus=8, gang_size=2)),
    ("same class is never preempted",
     ["n1", "n2"], full_node("n1", "a", cls="interactive") + full_node("n2", "b", cls="interactive"),
     [("ml", 40)], set(), GANG),
]


@pytest.mark.parametrize("name, nodes, runs, queues, victims, gang", SCENARIOS,
                         ids=[s[0] for s in SCENARIOS])
def test_gang_preemption(name, nodes, runs, queues, victims, gang):
    plan = schedule(snap([node(n) for n in nodes], [gang], runs, queues=queues))
    assert {p.job_id[0] for p in plan.preemptions} == victims
    assert plan.binds == ()
    if victims:
        assert len(plan.preemptions) == 8 * len(victims)
        assert {p.for_job_id for p in plan.preemptions} == {"gang"}
        assert plan.pending["gang"].reason == "waiting-for-preemption"


def test_gang_victims_are_ordered_borrowed_first_then_lowest_class():
    runs = (full_node("n1", "a", cls="training") + full_node("n2", "b", cls="best-effort")
            + full_node("n3", "c", cls="training", borrowed=True))
    plan = schedule(snap([node(n) for n in ("n1", "n2", "n3")], [GANG], runs,
                         queues=[("ml", 40)]))
    order = [p.job_id[0] for p in plan.preemptions]
    assert order == ["c"] * 8 + ["b"] * 8


def test_the_gang_starts_once_the_release_is_confirmed():
    runs = full_node("n1", "a") + full_node("n2", "b")
    nodes = [node("n1"), node("n2")]
    first = schedule(snap(nodes, [GANG], runs, queues=[("ml", 40)]))
    left = [r for r in runs if r.job.id not in {p.job_id for p in first.preemptions}]
    after = schedule(snap(nodes, [GANG], left, queues=[("ml", 40)]))
    assert sum(len(b.allocations) for b in after.binds) == 16
