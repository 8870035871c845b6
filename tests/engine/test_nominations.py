"""Nomination (kube-scheduler's nominatedNodeName) in the baselines: the GPUs a preemptor's
victims free are held for it, against its class and below, until it binds."""

import pytest

from scheduling.engine import Preempt, schedule
from scheduling.engine.policies import get_policy
from scheduling.engine.reasons import PreemptReason
from tests.engine.builders import NOW, job, node, running, snap

EIGHT = range(8)
GANG = job("gang", cls="interactive", gpus=8, gang_size=2)
NODES = [node("n1"), node("n2")]
BOTH = [("n1", i) for i in EIGHT] + [("n2", i) for i in EIGHT]


def stopping(victim, preemptor="gang"):
    return Preempt(job_id=victim, for_job_id=preemptor, reason=PreemptReason.PREEMPT)


@pytest.mark.parametrize("policy", ["kueue", "kueue-mig", "volcano"])
def test_a_gang_whose_victims_stop_on_different_cycles_gets_what_they_free(policy):
    a, b = job("a", cls="best-effort", gpus=8), job("b", cls="best-effort", gpus=8)
    first = schedule(snap(NODES, [GANG], [running(a, "n1", EIGHT), running(b, "n2", EIGHT)],
                          queues=[("ml", 40)]), policy)
    assert {p.job_id for p in first.preemptions} == {"a", "b"}
    assert [(n.job_id, sorted(n.gpus)) for n in first.nominations] == [("gang", BOTH)]
    # a has stopped and waits again; b is still stopping: a must not restart on n1 (it would be
    # preempted again at once: the thrash of issue 12)
    second = schedule(snap(NODES, [GANG, a], [running(b, "n2", EIGHT)], queues=[("ml", 40)],
                           in_flight=[stopping("b")], nominations=first.nominations), policy)
    assert second.binds == () and second.preemptions == ()
    assert [n.job_id for n in second.nominations] == ["gang"]
    # b has stopped too: the gang binds on both nodes and its nomination goes
    third = schedule(snap(NODES, [GANG, a, b], queues=[("ml", 40)], nominations=second.nominations), policy)
    assert {(bd.job_id, bd.node) for bd in third.binds} == {("gang", "n1"), ("gang", "n2")}
    assert third.nominations == ()


def test_without_nomination_the_lower_class_takes_the_freed_gpus_back():
    """The defect the feature fixes, as the engine behaves without it (tessera has `reserve`
    of its own and no nominations)."""
    a, b = job("a", cls="best-effort", gpus=8), job("b", cls="best-effort", gpus=8)
    plain = get_policy("kueue").with_features(nominate=False)
    plan = schedule(snap(NODES, [GANG, a], [running(b, "n2", EIGHT)], queues=[("ml", 40)],
                         in_flight=[stopping("b")], nominations=[("gang", BOTH, GANG.priority)]), plain)
    assert [(bd.job_id, bd.node) for bd in plan.binds] == [("a", "n1")]
    assert plan.nominations == ()


@pytest.mark.parametrize("cls, takes", [("best-effort", False), ("interactive", False), ("production", True)])
def test_only_a_higher_class_may_use_nominated_gpus(cls, takes):
    """addGENominatedPods counts a nominated pod against every pod of equal or lower priority."""
    other = job("other", team="web", cls=cls, gpus=8)
    plan = schedule(snap(NODES, [GANG, other], [running(job("b", cls="best-effort", gpus=8), "n2", EIGHT)],
                         queues=[("ml", 40), ("web", 40)], in_flight=[stopping("b")],
                         nominations=[("gang", BOTH, GANG.priority)]), "kueue")
    assert [(bd.job_id, bd.node) for bd in plan.binds] == ([("other", "n1")] if takes else [])


def test_a_nomination_is_dropped_once_its_gpus_run_other_work():
    """A higher class took part of it: the job no longer fits there and may preempt anew."""
    prod = job("prod", team="web", cls="production", gpus=8)
    plan = schedule(snap(NODES, [GANG], [running(prod, "n1", EIGHT, started=NOW - 10),
                                         running(job("b", cls="best-effort", gpus=8), "n2", EIGHT)],
                         queues=[("ml", 40), ("web", 40)], nominations=[("gang", BOTH, GANG.priority)]), "kueue")
    assert all(n.job_id != "gang" or ("n1", 0) not in n.gpus for n in plan.nominations)


def test_a_nomination_of_a_job_no_longer_pending_is_dropped():
    plan = schedule(snap(NODES, [job("x", cls="best-effort", gpus=8)], queues=[("ml", 40)],
                         nominations=[("gang", BOTH, GANG.priority)]), "kueue")
    assert plan.nominations == ()
    assert [bd.job_id for bd in plan.binds] == ["x"]


def test_tessera_never_nominates():
    a, b = job("a", cls="best-effort", gpus=8), job("b", cls="best-effort", gpus=8)
    plan = schedule(snap(NODES, [GANG], [running(a, "n1", EIGHT), running(b, "n2", EIGHT)],
                         queues=[("ml", 40)]), "tessera")
    assert plan.preemptions and plan.nominations == ()


def test_a_reclaim_holds_against_its_higher_class_victims_too():
    """A team under its guarantee takes back borrowed GPUs whatever their class; the borrower
    must not be re-admitted into them (Kueue orders within-quota work before borrowing)."""
    a = job("a", team="other", cls="interactive", gpus=8)
    b = job("b", team="other", cls="interactive", gpus=8)
    queues = [("ml", 8), ("other", 0, 40)]
    gang = job("gang", gpus=8)
    first = schedule(snap([node("n1")], [gang], [running(a, "n1", EIGHT, borrowed=True)], queues=queues), "kueue")
    assert [p.job_id for p in first.preemptions] == ["a"] and first.preemptions[0].reason == "reclaim"
    assert [(n.job_id, n.priority) for n in first.nominations] == [("gang", a.priority)]
    again = schedule(snap([node("n1")], [gang, a, b], queues=queues, nominations=first.nominations), "kueue")
    assert [(bd.job_id, bd.node) for bd in again.binds] == [("gang", "n1")]
