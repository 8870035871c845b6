"""Which tiers a job may use (engine/tiers.py): spot is for work a reclaim costs little."""

from scheduling.engine import schedule
from scheduling.engine.policies import TESSERA
from tests.engine.builders import binds_by_job, job, node, running, snap


def full(node_name):
    return [running(job(f"{node_name}-r{i}", team="other", expected_runtime_s=90_000), node_name, [i])
            for i in range(8)]


# Without reservations, so the reason shown is the tier rule rather than the reservation on the
# reserved GPUs that free first (which tessera takes as well: see the last test).
NO_RESERVE = TESSERA.with_features(reserve=False)


def spot_only_free():
    """Two reserved nodes busy, two spot nodes free, under one leaf."""
    nodes = [node("r1"), node("r2"), node("s1", tier="spot"), node("s2", tier="spot")]
    return nodes, full("r1") + full("r2")


def test_a_gang_that_does_not_checkpoint_waits_rather_than_run_on_spot():
    # One reclaimed spot node would stop both members and lose all their work since start.
    nodes, runs = spot_only_free()
    plan = schedule(snap(nodes, [job("gang", gpus=8, gang_size=2)], runs), NO_RESERVE, idle_causes=True)
    assert binds_by_job(plan) == {}
    assert plan.pending["gang"].reason == "tier"
    assert "gang that does not checkpoint never runs on spot" in plan.pending["gang"].message
    assert {str(c) for c in plan.idle.values()} == {"tier"}


def test_a_gang_that_checkpoints_prefers_spot():
    nodes, runs = spot_only_free()
    gang = job("gang", gpus=8, gang_size=2, checkpoint_interval_s=1800.0)
    plan = schedule(snap(nodes, [gang], runs), "tessera")
    assert sorted(b.node for b in plan.binds) == ["s1", "s2"]


def test_a_single_pod_that_does_not_checkpoint_takes_spot_as_the_last_resort():
    # It risks only its own work, and the spot GPUs would stand idle otherwise.
    nodes, runs = spot_only_free()
    plan = schedule(snap(nodes, [job("solo", gpus=8)], runs), "tessera")
    assert [b.node for b in plan.binds] in (["s1"], ["s2"])


def test_a_small_gang_that_does_not_checkpoint_is_told_why_it_waits():
    # Both members fit on one spot node, so the reason is the free-group one, not the gang's group.
    nodes, runs = spot_only_free()
    plan = schedule(snap(nodes, [job("pair", gpus=2, gang_size=2)], runs), NO_RESERVE)
    assert binds_by_job(plan) == {}
    assert plan.pending["pair"].reason == "tier"
    assert plan.pending["pair"].message.startswith("a gang that does not checkpoint never runs on spot")


def test_with_reservations_it_holds_the_reserved_gpus_that_free_first():
    nodes, runs = spot_only_free()
    plan = schedule(snap(nodes, [job("gang", gpus=8, gang_size=2)], runs), "tessera")
    assert binds_by_job(plan) == {} and plan.pending["gang"].reason == "reserved"
