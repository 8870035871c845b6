"""`simulate sweep`: the summary's medians, worst cases and win/tie/loss counts, and a tiny run."""

from __future__ import annotations

import json

import pytest

from scheduling.simulator.run import main
from scheduling.simulator.run.sweep import format_summary, split_plan, strongest_baseline, summarise


def _r(family, seed, policy, util, goodput=1.0, wait=0.0):
    return {"family": family, "seed": seed, "policy": policy, "gpu_utilization": util, "gpu_allocation": util,
            "training_goodput": goodput, "production_wait_p99_s": wait, "jct_p95_s": {"training": 100.0},
            "preemptions": 0, "lost_gpu_hours": 0.0, "oom_failures": 0, "cost_per_useful_gpu_hour": 3.0}


def test_medians_worst_cases_and_wins():
    results = [_r("mixed", 1, "a", 0.80, wait=10), _r("mixed", 1, "b", 0.70),
               _r("mixed", 2, "a", 0.60, wait=90), _r("mixed", 2, "b", 0.603),
               _r("light", 1, "a", 0.50), _r("light", 1, "b", 0.55)]
    s = summarise(results, ["a", "b"])
    mixed_a = s["families"]["mixed"]["a"]
    assert mixed_a["gpu_utilization"] == {"median": 0.70, "worst": 0.60}
    assert mixed_a["production_wait_p99_s"] == {"median": 50.0, "worst": 90}  # worst: the highest
    assert s["families"]["all"]["a"]["gpu_utilization"]["worst"] == 0.50
    assert s["wins"]["a"]["b"] == [1, 1, 1] and s["wins"]["b"]["a"] == [1, 1, 1]  # 0.003 apart: a tie
    assert strongest_baseline(s, "light", ours="a") == "b"


def test_tuning_split_refuses_reporting_only_families_and_uses_other_seeds():
    families, seeds = split_plan("tuning", None, 3)
    assert "pcie-heldout" not in families and seeds == [101, 102, 103]
    assert split_plan("reporting", ["pcie-heldout"], 2) == (["pcie-heldout"], [1, 2])
    with pytest.raises(ValueError, match="reporting only"):
        split_plan("tuning", ["pcie-heldout"], 1)
    with pytest.raises(ValueError, match="unknown family"):
        split_plan("reporting", ["nosuch"], 1)


def test_a_tiny_sweep_through_the_cli(tmp_path, capsys):
    out = tmp_path / "sweep.json"
    code = main(["sweep", "--family", "light", "--seeds", "1", "--gpus", "24", "--hours", "2",
                 "--policies", "tessera,k8s-default", "--json", str(out)])
    assert code == 0
    text = capsys.readouterr().out
    assert "family light" in text and "wins/ties/losses" in text and "strongest baseline" in text
    doc = json.loads(out.read_text())
    assert [(r["family"], r["seed"], r["policy"]) for r in doc["runs"]] == [
        ("light", 1, "tessera"), ("light", 1, "k8s-default")]
    assert doc["families"]["light"]["shape"]["gpus"] == 24 and doc["split"] == "reporting"


def test_a_failed_run_is_reported_not_summarised():
    results = [_r("mixed", 1, "a", 0.8), _r("mixed", 1, "b", 0.7),
               {"family": "mixed", "seed": 2, "policy": "a", "error": "RuntimeError: boom"}]
    s = summarise(results, ["a", "b"])
    assert s["errors"] == [results[2]]
    assert s["families"]["mixed"]["a"]["gpu_utilization"] == {"median": 0.8, "worst": 0.8}
    assert "FAILED mixed/2/a: RuntimeError: boom" in format_summary(s, ["a", "b"])
