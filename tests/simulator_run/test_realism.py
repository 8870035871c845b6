"""Realism knobs: node-wide MIG reconfiguration and drawn restart times."""

from __future__ import annotations

from types import SimpleNamespace

import pytest

from scheduling.engine.plan import Repartition
from scheduling.simulator.run.knobs import Knobs
from scheduling.simulator.run.loop import Simulation

from .helpers import cluster_doc, group, job, load


def _repartition_gpu_1(sim: Simulation):
    """A handler applying a plan that puts GPU 1 of n-01 in MIG mode."""
    rep = Repartition(node="n-01", gpu_index=1, mig_enabled=True, layout=(("1g.10gb", 0),))
    return lambda now: sim.apply(SimpleNamespace(repartitions=(rep,), preemptions=(), binds=()), now)


def test_a_mig_reconfiguration_stops_every_gpu_pod_of_the_node(tmp_path):
    # Job "a" runs on GPU 0 of a 2-GPU node. At 2500 a repartition of GPU 1 (idle) is applied:
    # mig-manager reconfigures the whole node, so "a" stops too (it saves: 10 s < 30 s grace),
    # and the node takes nothing until 2500 + 120. Restart 60 s, then 7500 s of work left.
    doc = cluster_doc(groups=[group(gpus=2)])
    rows = [job("a", duration=10_000, gpus=1, mem=80, checkpoint_interval_s=1000, checkpoint_s=10),
            job("end", submit=20_000, gpus=1)]
    spec, jobs = load(tmp_path, doc, rows)
    knobs = Knobs(mig_reconfig_s=120, restart_min_s=60, restart_max_s=60)
    sim = Simulation(spec, jobs, "tessera", seed=1, knobs=knobs)
    states = []
    sim.push(2500.0, _repartition_gpu_1(sim))
    sim.push(2600.0, lambda now: states.append(sim.backend.present["n-01"]))
    sim.push(2700.0, lambda now: states.append(sim.backend.present["n-01"]))
    r = sim.run()
    assert states == ["reconfiguring", "ready"]
    assert r["mig_reconfigurations"] == 1 and r["mig_disruptions"] == 1
    assert r["lost_gpu_hours"] == 0  # it saved
    assert r["jct_p50_s"]["training"] == pytest.approx(2620 + 60 + 7500, abs=1)


def test_a_job_bound_to_a_reconfiguring_node_starts_when_it_is_done(tmp_path):
    doc = cluster_doc(groups=[group(gpus=2)])
    spec, jobs = load(tmp_path, doc, [job("a", submit=10, duration=1000, gpus=1, mem=80),
                                      job("end", submit=5000, gpus=1)])
    sim = Simulation(spec, jobs, "tessera", seed=1, knobs=Knobs(mig_reconfig_s=300))
    sim.push(5.0, _repartition_gpu_1(sim))
    r = sim.run()
    assert r["jct_p50_s"]["training"] == pytest.approx(305 + 1000 - 10, abs=1)  # first start: no restore


def test_restart_stalls_are_drawn_log_uniformly_in_the_range_and_seeded(tmp_path):
    spec, jobs = load(tmp_path, cluster_doc(), [job("a"), job("end", submit=100)])
    sim = Simulation(spec, jobs, "tessera", seed=1, knobs=Knobs(restart_min_s=60, restart_max_s=600))
    stalls = [sim.restart_stall(SimpleNamespace(spec=jobs[0], epoch=e)) for e in range(400)]
    assert all(60 <= s <= 600 for s in stalls)
    assert stalls == [sim.restart_stall(SimpleNamespace(spec=jobs[0], epoch=e)) for e in range(400)]
    below = sum(s < 60 * 10 ** 0.5 for s in stalls) / len(stalls)  # the log-midpoint, ~190 s
    assert 0.4 < below < 0.6
    fixed = Simulation(spec, jobs, "tessera", seed=1, knobs=Knobs(restart_min_s=0, restart_max_s=0))
    assert fixed.restart_stall(SimpleNamespace(spec=jobs[0], epoch=3)) == 0
