"""The shipped 32-GPU example through the CLI: tessera beside k8s-default, JSON and HTML out."""

from __future__ import annotations

import csv
import json
import statistics
from pathlib import Path

import pytest

from scheduling.simulator.run import main
from scheduling.simulator.run.families import Shape
from scheduling.simulator.run.generate import generate
from scheduling.simulator.run.spec import load_cluster, load_jobs

EXAMPLE = Path(__file__).resolve().parents[2] / "examples" / "sim" / "quick-32"


def test_quick_example_through_the_cli(tmp_path, capsys):
    out, html = tmp_path / "out.json", tmp_path / "report.html"
    code = main(["run", "--cluster", str(EXAMPLE / "cluster.json"), "--workload", str(EXAMPLE / "jobs.csv"),
                 "--policies", "tessera,k8s-default", "--seed", "1", "--json", str(out), "--html", str(html)])
    assert code == 0
    table = capsys.readouterr().out
    assert "gpu_utilization" in table and "target (tessera)" in table
    doc = json.loads(out.read_text())
    assert doc["experiment"] == "run" and list(doc["policies"]) == ["tessera", "k8s-default"]
    t, k = doc["policies"]["tessera"], doc["policies"]["k8s-default"]
    for key in ("gpu_allocation", "gpu_utilization", "rolled_back_gpu_hours", "memory_waste", "completed",
                "jct_mean_s", "jct_p95_s", "queue_delay_p95_s", "wait_p95_s", "production_wait_p99_s",
                "oom_failures", "preemptions", "lost_gpu_hours", "training_goodput", "cost_total",
                "cost_per_useful_gpu_hour", "cost_by_tier", "on_demand_only_cost"):
        assert key in t and key in k
    # Performance comparisons are the README's, from `simulate sweep`; here only what holds by
    # definition for any policy.
    for r in (t, k):
        assert 0 <= r["gpu_utilization"] <= r["gpu_allocation"] <= 1
        assert r["cost_by_tier"]["reserved"] == t["cost_by_tier"]["reserved"]  # billed used or not
        assert r["cost_total"] == pytest.approx(sum(r["cost_by_tier"].values()), abs=0.05)
    assert t["oom_failures"] == 0
    page = html.read_text()
    assert "<html" in page and "plotly" in page.lower() and len(page) > 1_000_000  # plotly.js inlined


def test_generate_is_seeded_and_loads(tmp_path):
    a = generate("mixed", Shape(gpus=32, hours=12), 11, tmp_path / "a")
    b = generate("mixed", Shape(gpus=32, hours=12), 11, tmp_path / "b")
    assert a[1].read_text() == b[1].read_text() and a[0].read_text() == b[0].read_text()
    spec = load_cluster(a[0])
    jobs = load_jobs(a[1], {t.name for t in spec.teams})
    assert spec.gpus == 32 and {g.tier for g in spec.groups} == {"reserved", "on-demand", "spot"}
    assert {j.kind for j in jobs} == {"inference", "training", "interactive", "batch"}
    assert max(j.gpus for j in jobs) <= 32 and max(j.submit_s for j in jobs) <= 12 * 3600


@pytest.mark.parametrize("seed", [7, 8, 9])
def test_generated_demand_exceeds_capacity_inside_the_window(tmp_path, seed):
    from scheduling.simulator.run.generate import LOAD_TOLERANCE

    _, jobs_path = generate("mixed", Shape(gpus=64, hours=24), seed, tmp_path)
    rows = list(csv.DictReader(jobs_path.open()))
    horizon = 24 * 3600
    asked = sum((int(r["gpus"]) or float(r["gpu_mem_gb"]) / 80)
                * max(0.0, min(float(r["duration_s"]), horizon - float(r["submit_s"]))) for r in rows)
    assert abs(asked / (64 * horizon) - 1.3) <= LOAD_TOLERANCE
    # The window opens on a busy cluster: a cluster's worth of training is there in the first
    # minute, and it is not all short work (length-biased: a job is there in proportion to its
    # run time).
    opening = [r for r in rows if r["kind"] == "training" and float(r["submit_s"]) <= 60]
    assert sum(int(r["gpus"]) for r in opening) >= 64
    assert statistics.median(float(r["duration_s"]) for r in opening) > 3600


def test_manage_py_simulate_needs_no_settings(tmp_path):
    """The README's `python manage.py simulate ...` works on a fresh machine: no SECRET_KEY,
    DEBUG or database configured."""
    import os
    import subprocess
    import sys

    root = Path(__file__).resolve().parents[2]
    env = {k: v for k, v in os.environ.items()
           if k not in {"SECRET_KEY", "DEBUG", "DATABASE_URL", "DJANGO_SETTINGS_MODULE"}}
    done = subprocess.run([sys.executable, "manage.py", "simulate", "generate", "--gpus", "32",
                           "--hours", "2", "--seed", "1", "--out", str(tmp_path)],
                          cwd=root, env=env, capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    assert (tmp_path / "cluster.json").exists() and (tmp_path / "jobs.csv").exists()
