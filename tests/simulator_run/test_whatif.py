"""What-if: the same files run as they are and changed, through `simulate run`'s loop (the portal's
page over the live cluster is tests/ui/test_whatif.py)."""

from __future__ import annotations

from types import SimpleNamespace

import pytest

from scheduling.engine.plan import Repartition
from scheduling.simulator.run.knobs import Knobs
from scheduling.simulator.run.spec import jobs_csv
from scheduling.simulator.run.whatif import Change, ChangeError, _TeamSimulation, apply_change, compare

from .helpers import cluster_doc, group, job, load

HOUR = 3600.0


def _queue() -> str:
    """Three whole-node jobs of an hour each at once: on one node they wait for each other."""
    return jobs_csv([job(f"train-{i}", gpus=8, mem=80, duration=HOUR) for i in range(3)])


def test_adding_nodes_shortens_the_wait_and_the_progress_reaches_the_end():
    told = []
    result = compare(cluster_doc(), _queue(), "tessera", Change(add_model="H100-80GB", add_count=2),
                     horizon=4 * HOUR, progress=told.append)
    base, changed = result["baseline"], result["changed"]
    assert (base["gpus"], changed["gpus"]) == (8, 24)
    assert base["teams"]["ml"]["wait_p95_s"] >= 2 * HOUR - 60 and changed["teams"]["ml"]["wait_p95_s"] < 60
    assert changed["teams"]["ml"]["jct_mean_s"] < base["teams"]["ml"]["jct_mean_s"]
    assert base["completed"] == changed["completed"] == 3
    assert changed["cost_total"] > base["cost_total"]  # two more reserved nodes bill for the window
    assert told == sorted(told) and told[-1] == 1.0 and told[0] <= 0.5
    assert result["changes"] == ["2 more H100-80GB node(s), reserved"]
    assert len(base["series"]["allocated"]) == len(base["series"]["t_h"]) > 0
    for side in (base, changed):  # what the teams held is what the cluster had allocated, and priced
        held = side["gpu_allocation"] * side["capacity_gpu_hours"]
        assert side["teams"]["ml"]["gpu_hours"] == pytest.approx(held, rel=0.01) == 3 * 8
        assert side["teams"]["ml"]["cost"] == pytest.approx(3 * 8 * 2.5)


def test_a_policy_switch_runs_the_changed_side_under_the_other_policy():
    result = compare(cluster_doc(), _queue(), "tessera", Change(policy="k8s-default"), horizon=4 * HOUR)
    assert (result["baseline"]["policy"], result["changed"]["policy"]) == ("tessera", "k8s-default")
    assert result["changes"] == ["policy tessera → k8s-default"]


def test_a_guarantee_moves_and_a_burst_limit_below_it_is_raised():
    doc = cluster_doc(teams=[{"name": "ml", "guaranteed_gpus": 4, "burst_limit_gpus": 8, "weight": 1.0}])
    changed = apply_change(doc, Change(team="ml", guarantee_delta=8))
    assert changed["teams"][0] == {"name": "ml", "guaranteed_gpus": 12.0, "burst_limit_gpus": 12.0, "weight": 1.0}
    assert doc["teams"][0]["guaranteed_gpus"] == 4  # the input is left as it was


@pytest.mark.parametrize("change,message", [
    (Change(team="nobody", guarantee_delta=1), "there is no team 'nobody'"),
    (Change(team="ml", guarantee_delta=-65), "would make it negative"),
    (Change(add_model="B200", add_count=1), "no B200 node to copy; it has H100-80GB"),
    (Change(add_model="H100-80GB", add_count=1, add_tier="gold"), "unknown tier 'gold'"),
    (Change(policy="slurm"), "unknown policy 'slurm'"),
])
def test_a_change_that_cannot_be_made_says_why(change, message):
    with pytest.raises(ChangeError, match=message):
        apply_change(cluster_doc(), change)


def test_adding_nodes_needs_a_price_for_their_tier():
    doc = cluster_doc(prices_per_gpu_hour={"H100-80GB": {"reserved": 2.5, "on-demand": 6.9}})
    with pytest.raises(ChangeError, match="no spot price for H100-80GB"):
        apply_change(doc, Change(add_model="H100-80GB", add_count=1, add_tier="spot"))


def test_a_mig_reconfiguration_counts_what_the_stopped_job_held(tmp_path):
    # The what-if loop counts each team's GPU-hours where pods are released; a node-wide MIG
    # reconfiguration releases them too (it once crashed every what-if over a MIG cluster).
    doc = cluster_doc(groups=[group(gpus=2)])
    spec, jobs = load(tmp_path, doc, [job("a", duration=10_000, gpus=1, mem=80), job("end", submit=20_000)])
    sim = _TeamSimulation(spec, jobs, "tessera", seed=1, knobs=Knobs(mig_reconfig_s=120))
    rep = Repartition(node="n-01", gpu_index=1, mig_enabled=True, layout=(("1g.10gb", 0),))
    sim.push(2500.0, lambda now: sim.apply(SimpleNamespace(repartitions=(rep,), preemptions=(), binds=()), now))
    r = sim.run()
    assert r["mig_disruptions"] == 1
    held = r["gpu_allocation"] * r["capacity_gpu_hours"] * HOUR  # what the cluster says was held
    assert sim.team_gpu_s["ml"] == pytest.approx(held, rel=0.01) and held > 2500
