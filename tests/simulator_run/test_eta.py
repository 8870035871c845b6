"""ETA error (issue 16, item 8): the first start estimate a waiting job is shown, the engine's own
(what the portal shows), against when it really started, per kind."""

from __future__ import annotations

from scheduling.simulator.run.loop import Simulation

from .helpers import cluster_doc, group, job, load

HOUR = 3600.0


def test_a_job_behind_a_full_node_is_told_when_it_ends(tmp_path):
    rows = [job("a", gpus=8, mem=80, duration=HOUR), job("b", submit=60, gpus=8, mem=80, duration=HOUR),
            job("end", submit=3 * HOUR, gpus=1)]
    spec, jobs = load(tmp_path, cluster_doc(groups=[group()]), rows)
    sim = Simulation(spec, jobs, "tessera", seed=1)
    result = sim.run()
    assert sim.first_eta["b"] is not None and "a" not in sim.first_eta  # a started at once
    assert result["eta_samples"] == {"training": 1}
    assert result["eta_abs_error_p50_s"]["training"] == abs(sim.jobs["b"].first_start - sim.first_eta["b"])
    assert result["eta_abs_error_p90_s"]["training"] < 60  # a ran as long as it said


def test_jobs_behind_a_queue_count_the_queue(tmp_path):
    """Three 8-GPU jobs of an hour each behind a running one: the third waits for two ends, not one."""
    rows = [job("run", gpus=8, mem=80, duration=HOUR)]
    rows += [job(f"q{i}", submit=60 + i, gpus=8, mem=80, duration=HOUR) for i in range(3)]
    rows += [job("end", submit=6 * HOUR, gpus=1)]
    spec, jobs = load(tmp_path, cluster_doc(groups=[group()]), rows)
    sim = Simulation(spec, jobs, "tessera", seed=1)
    result = sim.run()
    starts = {name: sim.jobs[name].first_start for name in ("q0", "q1", "q2")}
    assert starts["q2"] > starts["q1"] > starts["q0"] >= HOUR
    assert result["eta_samples"] == {"training": 3} and result["eta_unknown"] == 0
    for name in ("q1", "q2"):  # each told it starts after the jobs ahead of it have run their hour
        assert abs(sim.first_eta[name] - starts[name]) < 120, name


def test_far_down_a_long_queue_the_estimate_says_it_cannot_tell(tmp_path):
    """The dry run plans the first PLANNED_JOBS of a model set's queue; past them an estimate costs
    more than it tells (a thousand-node cycle must not spend seconds on it)."""
    from scheduling.engine.explain import PLANNED_JOBS

    rows = [job(f"run{i}", gpus=1, mem=80, duration=HOUR) for i in range(8)]
    rows += [job(f"q{i:03d}", submit=60 + i, gpus=1, mem=80, duration=600) for i in range(PLANNED_JOBS + 8)]
    rows += [job("end", submit=2 * HOUR, gpus=1)]
    spec, jobs = load(tmp_path, cluster_doc(groups=[group()]), rows)
    sim = Simulation(spec, jobs, "tessera", seed=1)
    sim.run()
    shown = [sim.first_eta[f"q{i:03d}"] for i in range(PLANNED_JOBS + 8)]
    assert all(eta is not None for eta in shown[:PLANNED_JOBS // 2])
    assert shown[-1] is None
