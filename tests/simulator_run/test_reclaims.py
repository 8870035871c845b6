"""Spot reclaims: a seeded Poisson process per spot node, the same for every policy of a run."""

from __future__ import annotations

import statistics

from scheduling.simulator.run.loop import Simulation, poisson_times

from .helpers import cluster_doc, group, job, load


def test_poisson_times_are_seeded_and_have_the_rate():
    a = poisson_times(1 / 100, 1_000_000, "1/spot-01")
    assert a == poisson_times(1 / 100, 1_000_000, "1/spot-01")
    assert a != poisson_times(1 / 100, 1_000_000, "2/spot-01")
    assert abs(len(a) - 10_000) < 400  # mean 10,000, sd 100
    gaps = [b - a_ for a_, b in zip(a, a[1:], strict=False)]
    assert abs(statistics.mean(gaps) - 100) < 5 and abs(statistics.stdev(gaps) - 100) < 8  # exponential
    assert poisson_times(0.0, 1000, "x") == []


def _reclaims(sim: Simulation) -> list[tuple[float, str]]:
    return sorted((when, args[0]) for when, _, handler, args in sim.events
                  if getattr(handler, "__name__", "") == "on_reclaim")


def test_only_spot_nodes_are_reclaimed_and_every_policy_sees_the_same(tmp_path):
    doc = cluster_doc(groups=[group("r-", count=2), group("s-", count=3, tier="spot")],
                      spot={"reclaims_per_node_hour": 0.5, "notice_s": 120})
    spec, jobs = load(tmp_path, doc, [job("a"), job("end", submit=100 * 3600)])
    tessera = _reclaims(Simulation(spec, jobs, "tessera", seed=3))
    k8s = _reclaims(Simulation(spec, jobs, "k8s-default", seed=3))
    assert tessera == k8s and tessera
    assert {name for _, name in tessera} <= {"s-01", "s-02", "s-03"}
    assert 3 * 100 * 0.5 * 0.6 < len(tessera) < 3 * 100 * 0.5 * 1.4
    assert _reclaims(Simulation(spec, jobs, "tessera", seed=4)) != tessera


def test_a_reclaimed_node_leaves_capacity_and_comes_back(tmp_path):
    doc = cluster_doc(groups=[group("s-", tier="spot")], spot={"notice_s": 100, "replace_s": 1000})
    spec, jobs = load(tmp_path, doc, [job("end", submit=10_000, gpus=1)])
    sim = Simulation(spec, jobs, "tessera", seed=1)
    sim.push(1000.0, sim.on_reclaim, "s-01")
    r = sim.run()
    # Present except [1100, 2100]: capacity 8 GPUs x 9000 s of 10,000; the run cost is the capacity's.
    assert r["capacity_cost"] == round(8 * 9000 / 3600 * 2.8, 2)
