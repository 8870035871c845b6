"""What the simulated backend models for the baselines: static MIG layouts, time-slicing
replicas and ResourceQuota namespaces (engine behaviour: tests/engine/test_baselines.py)."""

from __future__ import annotations

from collections import Counter

import pytest

from scheduling.simulator.run.loop import Simulation
from scheduling.simulator.run.policies import REPLICAS, static_mig_layout

from .helpers import cluster_doc, group, job, load

HOUR = 3600.0
# The cluster must offer time-slicing for timeslice to share (engine/sharing.py applies to every policy).
TIME_SLICED = {"gpu_sharing": "time-slicing", "gpu_replicas": REPLICAS}


def test_kueue_mig_keeps_the_scenarios_mig_layout_for_the_whole_run(tmp_path):
    doc = cluster_doc(groups=[group("mig-", mig_enabled_gpus=4)])
    rows = [job(f"nb{i}", submit=60 * i, duration=1800, gpus=0, mem=9 + 10 * (i % 4), kind="interactive",
                priority="interactive") for i in range(12)]
    rows += [job("train", gpus=8, mem=80, duration=4 * HOUR), job("end", submit=3 * HOUR)]
    spec, jobs = load(tmp_path, doc, rows)
    sim = Simulation(spec, jobs, "kueue-mig", seed=1)
    start = {gpu: {s: p for s, (p, _) in layout.items()} for gpu, layout in sim.backend.layouts["mig-01"].items()}
    assert start == {g: {s: p for s, (p, _) in static_mig_layout("H100-80GB").items()} for g in range(4)}
    result = sim.run()
    after = {gpu: {s: p for s, (p, _) in layout.items()} for gpu, layout in sim.backend.layouts["mig-01"].items()}
    assert after == start and sim.backend.changed_at["mig-01"] == {}
    assert result["completed"] >= 12  # the notebooks ran on the existing instances


def test_timeslice_puts_at_most_replicas_pods_on_a_gpu_and_spreads_them(tmp_path):
    doc = cluster_doc(groups=[group("n-", gpus=2, **TIME_SLICED)])
    rows = [job(f"s{i}", duration=10 * HOUR, gpus=0, mem=5, kind="inference", priority="production")
            for i in range(2 * REPLICAS + 3)]
    spec, jobs = load(tmp_path, doc, rows + [job("end", submit=HOUR, gpus=0, mem=5)])
    sim = Simulation(spec, jobs, "timeslice", seed=1)
    sim.run()
    per_gpu = Counter((m.node, a.gpu_index) for j in sim.holding.values() for m in j.bound.values()
                      for a in m.allocations)
    assert sorted(per_gpu.values()) == [REPLICAS, REPLICAS]  # three wait: no slot is left


def test_timeslice_spreads_replicas_over_gpus(tmp_path):
    doc = cluster_doc(groups=[group("n-", gpus=4, **TIME_SLICED)])
    rows = [job(f"s{i}", duration=10 * HOUR, gpus=0, mem=5, kind="inference", priority="production")
            for i in range(4)]
    spec, jobs = load(tmp_path, doc, rows + [job("end", submit=HOUR, gpus=0, mem=5)])
    sim = Simulation(spec, jobs, "timeslice", seed=1)
    sim.run()
    gpus = {(m.node, a.gpu_index) for j in sim.holding.values() for m in j.bound.values() for a in m.allocations}
    assert len(gpus) == 4  # one replica on each GPU, as the device plugin hands them out


def _serving_team_doc():
    team = {"name": "ml", "business_unit": "labs", "guaranteed_gpus": 2, "burst_limit_gpus": 2, "weight": 1.0}
    return cluster_doc(teams=[team])


def test_serving_has_its_own_namespace_quota_except_in_k8s_naive(tmp_path):
    # ml's ResourceQuota is 2 GPUs and its training holds both: in k8s-default serving is in a
    # namespace of its own and starts at once; k8s-naive counts it against ml's training quota.
    rows = [job("t", gpus=2, mem=80, duration=10 * HOUR),
            job("serve", submit=60, duration=10 * HOUR, gpus=0, mem=9, kind="inference", priority="production"),
            job("end", submit=HOUR, gpus=0, mem=5, kind="batch", priority="best-effort")]
    spec, jobs = load(tmp_path, _serving_team_doc(), rows)
    fair = Simulation(spec, jobs, "k8s-default", seed=1)
    fair.run()
    naive = Simulation(spec, jobs, "k8s-naive", seed=1)
    naive.run()
    assert fair.jobs["serve"].first_start == 60
    assert naive.jobs["serve"].first_start is None


@pytest.mark.parametrize("policy", ["kueue", "kueue-mig", "volcano"])
def test_serving_is_outside_its_teams_queue(tmp_path, policy):
    # ml's queue (ClusterQueue: nominalQuota 2 = borrowingLimit; Volcano Queue: guarantee 2 =
    # capability). Serving (kueue: no queue-name label, a namespace Kueue does not manage; volcano:
    # a serving Queue of its own) starts beside training that holds the whole quota, and the
    # training after it is admitted: serving counts against no team's queue.
    rows = [job("t", gpus=2, mem=80, duration=10 * HOUR),
            job("serve", submit=60, duration=10 * HOUR, gpus=0, mem=9, kind="inference", priority="production"),
            job("t2", submit=120, gpus=1, mem=80, duration=10 * HOUR),
            job("end", submit=HOUR, gpus=0, mem=5, kind="batch", priority="best-effort")]
    spec, jobs = load(tmp_path, _serving_team_doc(), rows)
    sim = Simulation(spec, jobs, policy, seed=1)
    sim.run()
    assert sim.jobs["serve"].first_start == 60
    assert sim.jobs["t2"].first_start is None  # the third training GPU is over ml's quota
    done = Simulation(*load(tmp_path, _serving_team_doc(), [r for r in rows if r["job_id"] != "t"]), policy, seed=1)
    done.run()
    assert done.jobs["t2"].first_start == 120  # serving's GPU did not use ml's quota


@pytest.mark.parametrize(("policy", "ml_guarantee"), [("kueue", 8), ("kueue-mig", 8), ("volcano", 4)])
def test_serving_stops_another_teams_training_for_room(tmp_path, policy, ml_guarantee):
    # ml's training holds the whole node; web has no quota at all. web's serving stops one
    # training pod: kueue's within ml's nominalQuota, as kube-scheduler's DefaultPreemption would;
    # volcano's one ml borrowed beyond its guarantee, as the reclaim action takes from a Queue over
    # its deserved share for the serving Queue under its own.
    teams = [{"name": "ml", "business_unit": "labs", "guaranteed_gpus": ml_guarantee, "burst_limit_gpus": 8,
              "weight": 1.0},
             {"name": "web", "business_unit": "web", "guaranteed_gpus": 0, "burst_limit_gpus": 0, "weight": 1.0}]
    rows = [job(f"t{i}", gpus=1, mem=80, duration=10 * HOUR) for i in range(8)]
    rows += [job("serve", submit=600, duration=10 * HOUR, gpus=1, mem=80, kind="inference", priority="production",
                 team="web"),
             job("end", submit=2 * HOUR, gpus=0, mem=5, kind="batch", priority="best-effort")]
    spec, jobs = load(tmp_path, cluster_doc(teams=teams), rows)
    sim = Simulation(spec, jobs, policy, seed=1)
    result = sim.run()
    assert sim.jobs["serve"].first_start is not None and sim.jobs["serve"].first_start < 900
    assert result["preemptions"] == 1


def _gang_over_two_victims(tmp_path, policy):
    """Two best-effort jobs fill two nodes; one stops in 5 s, the other saves for 25 s; a 16-GPU
    interactive gang then needs both nodes."""
    doc = cluster_doc(groups=[group("n-", count=2)])
    rows = [job("fast", gpus=8, mem=80, duration=20 * HOUR, priority="best-effort"),
            job("slow", gpus=8, mem=80, duration=20 * HOUR, priority="best-effort",
                checkpoint_interval_s=600, checkpoint_s=25),
            job("gang", submit=HOUR, gpus=16, mem=80, duration=HOUR, priority="interactive"),
            job("end", submit=3 * HOUR, gpus=0, mem=5)]
    spec, jobs = load(tmp_path, doc, rows)
    sim = Simulation(spec, jobs, policy, seed=1)
    return sim, sim.run()


@pytest.mark.parametrize("policy", ["kueue", "kueue-mig", "volcano"])
def test_a_gang_preempts_each_victim_once(tmp_path, policy):
    sim, result = _gang_over_two_victims(tmp_path, policy)
    assert result["preemptions"] == 2  # fast once, slow once: fast does not restart in between
    assert sim.jobs["gang"].first_start is not None


def test_without_nomination_the_fast_victim_is_preempted_twice(tmp_path, monkeypatch):
    """The thrash the nomination removes, pinned so the test above keeps meaning something."""
    from scheduling.engine import policies
    plain = policies.get_policy("kueue").with_features(nominate=False)
    monkeypatch.setitem(policies.POLICIES._items, "kueue", plain)
    _, result = _gang_over_two_victims(tmp_path, "kueue")
    assert result["preemptions"] > 2  # 480 when written: each victim restarts while the other stops


@pytest.mark.parametrize("policy", ["volcano", "binpack", "tessera", "k8s-default", "kueue"])
def test_a_sub_gpu_job_no_replica_or_slice_could_hold_asks_for_a_whole_gpu(tmp_path, policy):
    # MPS with 4 replicas pins 20 GB each; the plain nodes cannot do MIG. A 30 GB notebook fits no
    # share or slice anywhere, so (as its user would, once refused) it takes a whole GPU; a 10 GB one
    # takes a replica. The same for every policy: none waits forever for a share the cluster lacks.
    doc = cluster_doc(groups=[group("plain-", gpus=2, mig_capable=False),
                              group("mps-", gpus=2, leaf="leaf-2", mig_capable=False, gpu_sharing="mps",
                                    gpu_replicas=4)])
    rows = [job("big", duration=10 * HOUR, gpus=0, mem=30, kind="interactive", priority="interactive"),
            job("small", duration=10 * HOUR, gpus=0, mem=10, kind="interactive", priority="interactive"),
            job("end", submit=HOUR, gpus=0, mem=5)]
    spec, jobs = load(tmp_path, doc, rows)
    sim = Simulation(spec, jobs, policy, seed=1)
    sim.run()
    placed = {j.spec.job_id: m for j in sim.holding.values() for m in j.bound.values()}
    assert placed["big"].node.startswith("plain-") and placed["big"].allocations[0].milli == 1000
    assert placed["small"].node.startswith("mps-") and placed["small"].allocations[0].milli < 1000


@pytest.mark.parametrize("policy", ["k8s-default", "kueue"])
def test_notebooks_take_mps_replicas_each_counting_one_gpu_of_the_quota(tmp_path, policy):
    # The plugin advertises GPUs x replicas nvidia.com/gpu: a sub-GPU pod asking one gets a
    # replica, counted as 1 nvidia.com/gpu, as a whole GPU is: by k8s-default's ResourceQuota (the
    # simulator's backend), by kueue's ClusterQueue (the engine's quota).
    team = {"name": "ml", "business_unit": "labs", "guaranteed_gpus": 2, "burst_limit_gpus": 2, "weight": 1.0}
    doc = cluster_doc(groups=[group("mps-", gpu_sharing="mps", gpu_replicas=4)], teams=[team])
    rows = [job(f"nb{i}", duration=HOUR, gpus=0, mem=9, kind="interactive", priority="interactive")
            for i in range(3)]
    spec, jobs = load(tmp_path, doc, rows + [job("end", submit=3 * HOUR, gpus=0, mem=5)])
    sim = Simulation(spec, jobs, policy, seed=1)
    sim.run()
    starts = sorted(sim.jobs[f"nb{i}"].first_start for i in range(3))
    assert starts[0] == starts[1] == 0 and starts[2] >= HOUR  # the third waits for the quota
