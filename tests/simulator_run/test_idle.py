"""Idle and lost GPU-hours by cause in `simulate run` (engine/idle.py, loop.note_idle)."""

from __future__ import annotations

import pytest

from scheduling.simulator.run.families import Shape, shape_with
from scheduling.simulator.run.generate import generate
from scheduling.simulator.run.loop import Simulation, run_policy
from scheduling.simulator.run.spec import load_cluster, load_jobs

from .helpers import cluster_doc, group, job, load

HOUR = 3600.0


@pytest.mark.parametrize("policy", ["tessera", "volcano"])
def test_idle_causes_sum_to_the_idle_capacity(tmp_path, policy):
    cluster, jobs = generate("mixed", shape_with(Shape(), gpus=32, hours=4.0), 3, tmp_path)
    spec = load_cluster(cluster)
    sim = Simulation(spec, load_jobs(jobs, {t.name for t in spec.teams}), policy, seed=3)
    r = sim.run()
    integral = sim.meter.integral
    idle = sum(sim.meter.idle_gpu_s.values())
    assert idle == pytest.approx(integral["capacity"] - integral["allocated"], rel=1e-9)
    assert r["idle_gpu_hours"] == pytest.approx(r["capacity_gpu_hours"] * (1 - r["gpu_allocation"]), abs=0.05)
    for key, total in (("idle_by_cause", "idle_gpu_hours"), ("lost_by_cause", "lost_gpu_hours")):
        causes = r[key]
        assert sum(causes.values()) == pytest.approx(r[total], abs=0.01 * len(causes) + 1e-9)
    assert "unattributed" not in r["idle_by_cause"]


def test_an_empty_queue_leaves_idle_gpus_to_nothing_waiting(tmp_path):
    # One 2-GPU job runs [0, 1800] on an 8-GPU node; the horizon is 3600: 7 idle GPU-hours.
    spec, jobs = load(
        tmp_path, cluster_doc(), [job("a", duration=1800, gpus=2, mem=80), job("end", submit=HOUR, gpus=1)]
    )
    r = run_policy(spec, jobs, "tessera", seed=1)[0]
    assert r["idle_gpu_hours"] == pytest.approx(7.0, abs=0.01)
    assert r["idle_by_cause"] == {"nothing-waiting": pytest.approx(7.0, abs=0.01)}


@pytest.mark.parametrize("policy, cause", [("tessera", "reserved"), ("volcano", "nothing-fits")])
def test_gpus_idle_behind_an_eight_gpu_job_that_does_not_fit(tmp_path, policy, cause):
    # A 4-GPU job holds half the node for the hour; an 8-GPU job waits behind it: the other 4
    # GPUs stand idle, held for it where the policy reserves (tessera), else because nothing
    # waiting fits them.
    rows = [
        job("half", duration=2 * HOUR, gpus=4, mem=80),
        job("all", submit=1, duration=HOUR, gpus=8, mem=80),
        job("end", submit=HOUR, gpus=1),
    ]
    r = run_policy(*load(tmp_path, cluster_doc(), rows), policy, seed=1)[0]
    assert r["idle_by_cause"] == {cause: pytest.approx(4.0, abs=0.01)}


def test_work_lost_is_told_by_the_stop_that_lost_it(tmp_path):
    # test_metrics' preemption: 505 GPU-seconds rolled back by a stop for production.
    doc = cluster_doc(groups=[group(gpus=1)])
    rows = [
        job(
            "be", duration=10_000, gpus=1, mem=80, priority="best-effort", checkpoint_interval_s=1000, checkpoint_s=300
        ),
        job("prod", submit=2500, duration=20_000, gpus=1, mem=80, kind="inference", priority="production"),
        job("end", submit=5000, gpus=1),
    ]
    r = run_policy(*load(tmp_path, doc, rows), "tessera", seed=1)[0]
    assert r["lost_by_cause"] == {"preempt": pytest.approx(505 / 3600, abs=0.01)}
