"""Inference credit: a serving replica counts what it needs, as far as its placement can serve it."""

from __future__ import annotations

import pytest

from scheduling.engine.types import Allocation
from scheduling.simulator.run.loop import run_policy
from scheduling.simulator.run.serving import ANCHORS, credit, need_from_rate, speed, tokens_per_s

from .helpers import cluster_doc, group, job, load

H100 = 3350 / 2039


def _alloc(milli, index=0, profile=None):
    return Allocation(gpu_index=index, milli=milli, memory_gb=0.0, mig_profile=profile,
                      mig_start=0 if profile else None)


def _whole(index=0):
    return _alloc(1000, index)


def test_throughput_goes_through_the_published_anchors():
    for params, tokens in ANCHORS:
        assert tokens_per_s(params) == pytest.approx(tokens)
    assert tokens_per_s(13) < tokens_per_s(7) and tokens_per_s(0.33) > tokens_per_s(7)
    assert need_from_rate(7, 1928 / 256) == pytest.approx(1.0)  # one A100-80GB's worth


def test_speed_is_the_memory_bandwidth_ratio():
    assert speed("A100-80GB") == 1.0 and speed("H100-80GB") == pytest.approx(H100)
    assert speed("A100-40GB") == pytest.approx(1555 / 2039) and speed("A100-PCIE-40GB") == speed("A100-40GB")


def test_a_whole_gpu_counts_the_need_not_the_gpu():
    # Needing a fifth of an A100-80GB, on a whole H100 it uses 0.2 / 1.64 of it.
    assert credit(0.2, "H100-80GB", [_whole()]) == pytest.approx(0.2 / H100)
    assert credit(0.2, "A100-80GB", [_whole()]) == pytest.approx(0.2)


def test_a_slice_smaller_than_the_need_serves_and_counts_less():
    # 1g.10gb on H100: 1/7 of the compute, 1/8 of the memory (bandwidth): capacity 1.64 / 8.
    small = _alloc(142, profile="1g.10gb")
    assert credit(0.5, "H100-80GB", [small]) == pytest.approx(1 / 8)
    assert credit(0.1, "H100-80GB", [small]) == pytest.approx(0.1 / H100)  # fits: counts its need
    share = _alloc(250)  # a memory-bounded quarter of a GPU
    assert credit(1.0, "A100-80GB", [share]) == pytest.approx(0.25)
    two = [_whole(0), _whole(1)]
    assert credit(3.0, "A100-80GB", two) == pytest.approx(2.0)  # a 2-GPU replica asked for 3


def test_the_simulation_credits_a_declared_need(tmp_path):
    doc = cluster_doc(groups=[group(gpus=1)])
    rows = [job("svc", duration=7200, gpus=1, mem=60, kind="inference", priority="production", gpu_need=0.5),
            job("end", submit=3600, gpus=0, mem=1, kind="batch")]
    spec, jobs = load(tmp_path, doc, rows)
    assert jobs[0].gpu_need == 0.5
    r = run_policy(spec, jobs, "k8s-default", seed=1)[0]
    assert r["gpu_allocation"] == pytest.approx(1.0, abs=1e-3)
    assert r["gpu_utilization"] == pytest.approx(0.5 / H100, abs=1e-3)


def test_shares_of_one_gpu_never_count_for_more_than_it(tmp_path):
    # Four 20 GB notebooks on one 80 GB H100, memory-bounded shares of a quarter each: each needs
    # a 2g.20gb slice's compute (2/7), but together they hold one GPU, so they count for at most
    # one (times the share's efficiency), never 4 x 2/7. The node's device plugin runs MPS with
    # four 20 GB replicas: no policy shares a GPU the cluster does not offer as replicas.
    doc = cluster_doc(groups=[group(gpus=1, mig_capable=False, gpu_sharing="mps", gpu_replicas=4)])
    rows = [job(f"nb-{i}", duration=7200, gpus=0, mem=20, kind="interactive", priority="interactive")
            for i in range(4)] + [job("end", submit=3600, gpus=0, mem=1, kind="batch")]
    spec, jobs = load(tmp_path, doc, rows)
    r = run_policy(spec, jobs, "volcano", seed=1)[0]
    assert r["gpu_allocation"] == pytest.approx(1.0, abs=1e-3)
    assert r["gpu_utilization"] <= r["gpu_allocation"]
    assert r["gpu_utilization"] == pytest.approx(0.925, abs=1e-3)
