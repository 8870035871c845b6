"""Metric definitions on tiny scenarios worked out by hand."""

from __future__ import annotations

import pytest

from scheduling.simulator.run.cluster import comm_efficiency
from scheduling.simulator.run.knobs import Knobs
from scheduling.simulator.run.loop import Simulation, run_policy
from scheduling.simulator.run.measure import NodeBill, percentile

from .helpers import cluster_doc, group, job, load

HOUR = 3600.0
FIXED_RESTART = Knobs(restart_min_s=60, restart_max_s=60)


def _run(tmp_path, rows, policy="tessera", doc=None):
    spec, jobs = load(tmp_path, doc or cluster_doc(), rows)
    return run_policy(spec, jobs, policy, seed=1)[0]


def test_whole_gpu_job_allocation_cost_and_goodput(tmp_path):
    # One 2-GPU job runs [0, 1800] on an 8-GPU reserved node; the horizon is the last submit, 3600.
    r = _run(tmp_path, [job("a", duration=1800, gpus=2, mem=80), job("end", submit=HOUR, gpus=1)])
    assert r["gpu_allocation"] == pytest.approx(2 * 1800 / (8 * HOUR), abs=1e-4)
    assert r["gpu_utilization"] == pytest.approx(r["gpu_allocation"], abs=1e-4)
    assert r["memory_waste"] == pytest.approx(0.0, abs=1e-4)  # needs all 80 GB of both GPUs
    assert r["completed"] == 1 and r["jct_p50_s"]["training"] == 1800 and r["jct_mean_s"]["training"] == 1800
    assert r["queue_delay_p95_s"]["training"] == 0
    # Reserved capacity bills whether used or not: all 8 GPUs for the hour, not the 1 GPU-hour used.
    assert r["cost_total"] == pytest.approx(8 * 1.0 * 2.5, abs=0.01)
    assert r["cost_by_tier"]["reserved"] == pytest.approx(r["cost_total"])
    assert r["on_demand_only_cost"] == pytest.approx(2 * 0.5 * 6.9, abs=0.01)  # the GPU-hours used
    assert r["cost_per_useful_gpu_hour"] == pytest.approx(20.0 / 1.0, abs=0.01)
    assert r["training_goodput"] == pytest.approx(2 * 0.5 / 1.0, abs=1e-3)  # GPU-h per hour


def test_elastic_nodes_bill_from_first_pod_until_empty_for_the_scale_down_delay(tmp_path):
    # On-demand node: jobs [0, 1800] and [2000, 2600] (gap 200 s < 600 s: one period), then empty
    # until the horizon at 7200: billed [0, 2600 + 600] = 3200 s of all 8 GPUs.
    doc = cluster_doc(groups=[group(tier="on-demand")])
    rows = [job("a", duration=1800, gpus=2, mem=80), job("b", submit=2000, duration=600, gpus=1),
            job("end", submit=2 * HOUR, gpus=1)]
    r = _run(tmp_path, rows, doc=doc)
    assert r["cost_by_tier"]["on-demand"] == pytest.approx(8 * 3200 / 3600 * 6.9, abs=0.01)
    assert r["cost_total"] == r["cost_by_tier"]["on-demand"]
    assert r["capacity_cost"] == pytest.approx(8 * 2 * 6.9, abs=0.01)  # what an always-on node costs


def test_node_bill_merges_periods_closer_than_the_delay():
    bill = NodeBill(linger_s=600)
    assert bill.bind(0) is None
    bill.release(100)
    assert bill.bind(500) is None  # 400 s empty: still billed, same period
    bill.release(1000)
    assert bill.bind(5000) == (0, 1600)  # empty 4000 s: the first period ended 600 s after 1000
    assert bill.close(6000) == (5000, 6000)  # still busy at the end
    assert bill.close(7000) is None


def test_work_lost_to_a_preemption_is_not_useful(tmp_path):
    # A best-effort job on the only GPU checkpoints every 1000 s but needs 300 s to save (more
    # than the 30 s grace): when production arrives at 2500 it is stopped (5 s) and rolls back to
    # its checkpoint at 2000. Those 505 GPU-seconds were allocated but are not useful work.
    doc = cluster_doc(groups=[group(gpus=1)])
    rows = [job("be", duration=10_000, gpus=1, mem=80, priority="best-effort", checkpoint_interval_s=1000,
                checkpoint_s=300),
            job("prod", submit=2500, duration=20_000, gpus=1, mem=80, kind="inference", priority="production"),
            job("end", submit=5000, gpus=1)]
    r = _run(tmp_path, rows, doc=doc)
    assert r["preemptions"] == 1
    assert r["rolled_back_gpu_hours"] == pytest.approx(505 / 3600, abs=0.01)
    assert r["lost_gpu_hours"] == r["rolled_back_gpu_hours"]
    # Useful: the 2000 s kept + prod from its start; allocation also holds the 505 s thrown away.
    assert r["gpu_allocation"] - r["gpu_utilization"] == pytest.approx(505 / 5000, abs=1e-3)


def test_sub_gpu_job_on_integer_gpus_counts_its_need_not_its_gpu(tmp_path):
    # A 9 GB inference replica: k8s-default gives it a whole GPU; its need is 1g.10gb = 1/7.
    rows = [job("svc", duration=2 * HOUR, gpus=0, mem=9, kind="inference", priority="production"),
            job("end", submit=HOUR, gpus=1, duration=60)]
    r = _run(tmp_path, rows, "k8s-default")
    svc_alloc, end_alloc = 1.0, 0.0  # "end" arrives at the horizon: it holds nothing before it
    assert r["gpu_allocation"] == pytest.approx((svc_alloc + end_alloc) / 8, abs=1e-4)
    assert r["gpu_utilization"] == pytest.approx((1 / 7) / 8, abs=1e-4)
    assert r["memory_waste"] == pytest.approx((80 - 9) / 640, abs=1e-4)
    # Tessera carves the 1g.10gb instance on a MIG GPU: allocation = need = 1/7 of one GPU.
    doc = cluster_doc(groups=[group(mig_enabled_gpus=1)])
    t = _run(tmp_path, rows, "tessera", doc)
    assert t["gpu_allocation"] == pytest.approx((1 / 7) / 8, abs=1e-4)
    assert t["gpu_utilization"] == pytest.approx((1 / 7) / 8, abs=1e-4)


def test_comm_efficiency_stretches_the_comm_share_by_the_bandwidth_ratio(tmp_path):
    spec, jobs = load(tmp_path, cluster_doc(groups=[group("a-", leaf="leaf-1"), group("b-", leaf="leaf-2")],
                                            spine_oversubscription=2.0),
                      [job("g", gpus=16, comm_fraction=0.2)])
    a, b = spec.groups
    one_node = comm_efficiency(jobs[0], [(a, tuple(range(8)))], 2.0)
    assert one_node == 1.0
    # Across leaves: min(NVSwitch 370, 8 NICs x 48 = 384) / 2 (spine) = 185 GB/s.
    across = comm_efficiency(jobs[0], [(a, tuple(range(8))), (b, tuple(range(8)))], 2.0)
    assert across == pytest.approx(1 / (0.8 + 0.2 * 370 / 185))
    same_leaf = comm_efficiency(jobs[0], [(a, tuple(range(8))), (a, tuple(range(8)))], 2.0)
    assert same_leaf == 1.0  # 384 GB/s of NICs is no slower than 370 of NVSwitch


def test_slow_gang_counts_less_and_runs_longer(tmp_path):
    doc = cluster_doc(groups=[group("a-", leaf="leaf-1"), group("b-", leaf="leaf-2")], spine_oversubscription=2.0)
    r = _run(tmp_path, [job("g", gpus=16, duration=1000, comm_fraction=0.2), job("end", submit=5000)], doc=doc)
    eff = 1 / (0.8 + 0.2 * 370 / 185)
    assert r["jct_p50_s"]["training"] == pytest.approx(1000 / eff, abs=0.2)
    assert r["gpu_utilization"] == pytest.approx(r["gpu_allocation"] * eff, abs=1e-3)


def test_spot_reclaim_without_a_fast_checkpoint_loses_work_since_the_last_one(tmp_path):
    doc = cluster_doc(groups=[group(tier="spot")])
    rows = [job("t", duration=10_000, gpus=8, mem=80, checkpoint_interval_s=1000, checkpoint_s=300),
            job("end", submit=20_000, gpus=1)]
    spec, jobs = load(tmp_path, doc, rows)
    sim = Simulation(spec, jobs, "tessera", seed=1, knobs=FIXED_RESTART)
    sim.push(2500.0, sim.on_reclaim, "n-01")  # notice 120 s < checkpoint 300 s: cannot save
    r = sim.run()
    assert r["spot_interruptions"] == 1
    # Gone at 2620; last checkpoint at 2000: 620 s x 8 GPUs lost, and not counted as useful.
    assert r["lost_gpu_hours"] == pytest.approx(620 * 8 / 3600, abs=0.01)
    assert r["rolled_back_gpu_hours"] == pytest.approx(620 * 8 / 3600, abs=0.01)
    # Net useful is exactly the job's 10,000 s x 8 GPUs; the node was gone 1800 s of 20,000.
    assert r["gpu_utilization"] == pytest.approx(10_000 * 8 / (8 * 18_200), abs=1e-4)
    # Requeued; the node is back after replace_s (1800 s), restore 60 s, 8000 s of work left.
    assert r["jct_p50_s"]["training"] == pytest.approx(2620 + 1800 + 60 + 8000, abs=1)


def test_spot_reclaim_with_a_fast_checkpoint_loses_nothing(tmp_path):
    doc = cluster_doc(groups=[group(tier="spot")])
    rows = [job("t", duration=10_000, gpus=8, mem=80, checkpoint_interval_s=1000, checkpoint_s=30),
            job("end", submit=20_000, gpus=1)]
    spec, jobs = load(tmp_path, doc, rows)
    sim = Simulation(spec, jobs, "tessera", seed=1, knobs=FIXED_RESTART)
    sim.push(2500.0, sim.on_reclaim, "n-01")
    r = sim.run()
    assert r["lost_gpu_hours"] == 0 and r["spot_interruptions"] == 1
    # 2620 s of work kept; restarted at 2620 + 1800 (replacement) + 60 s restore.
    assert r["completed"] == 2 - 1  # "end" is submitted at the horizon and cannot finish
    assert r["jct_p50_s"]["training"] == pytest.approx(2620 + 1800 + 60 + (10_000 - 2620), abs=1)


def test_timeslice_ignores_memory_and_fails_with_oom(tmp_path):
    doc = cluster_doc(groups=[group(gpus=1, gpu_sharing="time-slicing", gpu_replicas=4)])
    rows = [job(f"s{i}", gpus=0, mem=50, duration=3000, kind="inference", priority="production",
                submit=i) for i in range(2)] + [job("end", submit=2000, gpus=0, mem=1, kind="batch")]
    sliced = _run(tmp_path, rows, "timeslice", doc)
    assert sliced["oom_failures"] >= 1 and sliced["lost_gpu_hours"] > 0
    aware = _run(tmp_path, rows, "binpack", doc)
    assert aware["oom_failures"] == 0


def test_waits_by_priority_and_percentiles():
    assert percentile([1, 2, 3, 4], 50) == 2 and percentile([1, 2, 3, 4], 95) == 4
    assert percentile(list(range(1, 101)), 99) == 99 and percentile([], 50) is None


def test_an_mps_share_is_metered_as_its_replica(tmp_path):
    # A 5 GB share on an 80 GB GPU whose MPS daemon runs 4 replicas holds a quarter of it for
    # [0, 1800] of the 3600 s horizon: 0.25 x 0.5 allocated, as the ledger bills it (not 5/80).
    doc = cluster_doc(groups=[group(gpus=1, mig_capable=False, gpu_sharing="mps", gpu_replicas=4)])
    rows = [job("nb", duration=1800, gpus=0, mem=5, kind="inference"), job("end", submit=HOUR, gpus=0, mem=5)]
    r = _run(tmp_path, rows, doc=doc)
    assert r["completed"] >= 1
    assert r["gpu_allocation"] == pytest.approx(0.25 * 1800 / HOUR, abs=1e-4)


def test_jct_with_unfinished_counts_a_starved_job_at_its_age(tmp_path):
    # An 8-GPU node: "a" (8 GPUs) runs [0, 1800]; "big" (8 GPUs, submitted at 0) waits behind it
    # and runs from 1800 for 10 h, past the horizon (3600, the last submit). Completed-only p95
    # sees "a" alone; counted at its age at the horizon, "big" is the tail.
    rows = [job("a", duration=1800, gpus=8, mem=80), job("big", duration=10 * HOUR, gpus=8, mem=80, submit=1),
            job("end", submit=HOUR, gpus=1, duration=60)]
    r = _run(tmp_path, rows, policy="binpack")
    assert r["jct_p95_s"]["training"] == 1800
    assert r["jct_p95_with_unfinished_s"]["training"] == pytest.approx(HOUR - 1, abs=1)
