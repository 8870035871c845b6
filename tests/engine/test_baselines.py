"""The fair baselines of `simulate run` (engine/policies.py), each pinned by the behaviour that
defines the real system it models."""

from scheduling.engine import schedule
from tests.engine.builders import NOW, inference, job, node, running, snap


def full_node(name, prefix, team="ml", cls="training", borrowed=False, started=NOW - 3600):
    """Eight 1-GPU jobs filling node `name`."""
    return [running(job(f"{prefix}{i}", team=team, cls=cls), name, [i], started=started,
                    borrowed=borrowed) for i in range(8)]


# --- k8s-default ------------------------------------------------------------------------------

def test_k8s_default_serves_production_within_one_cycle_by_preempting_lower_classes():
    # Another team's training, within no quota at all (k8s has none in the engine), just started:
    # DefaultPreemption stops a lower-priority pod whatever its namespace or age.
    runs = full_node("n1", "t", team="research", started=NOW - 10)
    plan = schedule(snap([node("n1")], [inference("serve", 9, team="search")], runs), "k8s-default")
    assert len(plan.preemptions) == 1
    assert plan.preemptions[0].for_job_id == "serve" and plan.preemptions[0].job_id.startswith("t")
    # The floor it replaces never preempts: production waits for a training job to end.
    naive = schedule(snap([node("n1")], [inference("serve", 9, team="search")], runs), "k8s-naive")
    assert naive.preemptions == () and naive.binds == ()


def test_k8s_default_preempts_only_lower_priority_classes():
    runs = full_node("n1", "p", team="search", cls="production")
    plan = schedule(snap([node("n1")], [job("train", team="research")], runs), "k8s-default")
    assert plan.preemptions == ()
    runs = full_node("n1", "b", team="other", cls="best-effort")
    plan = schedule(snap([node("n1")], [job("train", team="research")], runs), "k8s-default")
    assert [p.for_job_id for p in plan.preemptions] == ["train"]


def test_k8s_default_takes_whole_gpus_and_places_gang_members_one_by_one():
    plan = schedule(snap([node("a")], [inference("inf", 5)]), "k8s-default")
    assert [a.milli for a in plan.binds[0].allocations] == [1000]
    plan = schedule(snap([node("a"), node("b")], [job("g", gpus=8, gang_size=3)]), "k8s-default")
    assert len(plan.binds) == 2  # two of three pods hold GPUs; the third waits
