"""Tiny cluster and workload files written inline for the run-experiment tests."""

from __future__ import annotations

import csv
import json
from pathlib import Path

from scheduling.simulator.run.spec import COLUMNS, load_cluster, load_jobs


def group(prefix="n-", count=1, gpus=8, tier="reserved", leaf="leaf-1", **extra) -> dict:
    base = {"name_prefix": prefix, "count": count, "gpu_model": "H100-80GB", "gpus_per_node": gpus,
            "interconnect": "nvswitch", "cpu_cores": 192, "memory_gb": 2048, "leaf": leaf,
            "tier": tier, "mig_capable": True, "nic_gbps": 400, "nics": 8}
    base.update(extra)
    return base


def cluster_doc(groups=None, **extra) -> dict:
    doc = {"nodes": groups or [group()], "spine_oversubscription": 1.0,
           "prices_per_gpu_hour": {"H100-80GB": {"reserved": 2.5, "on-demand": 6.9, "spot": 2.8}},
           "spot": {"reclaims_per_node_hour": 0.0, "notice_s": 120},
           "teams": [{"name": "ml", "business_unit": "labs", "guaranteed_gpus": 64, "burst_limit_gpus": 64,
                      "weight": 1.0}]}
    doc.update(extra)
    return doc


def job(job_id, submit=0.0, duration=1000.0, gpus=1, mem=40.0, kind="training", priority="training",
        **extra) -> dict:
    row = {"job_id": job_id, "team": "ml", "project": "p", "kind": kind, "priority": priority,
           "submit_s": submit, "duration_s": duration, "gpus": gpus, "gpu_mem_gb": mem, "cpu_cores": 4}
    row.update(extra)
    return row


def write(tmp: Path, doc: dict, rows: list[dict]) -> tuple[Path, Path]:
    cluster, jobs = tmp / "cluster.json", tmp / "jobs.csv"
    cluster.write_text(json.dumps(doc, indent=2))
    with open(jobs, "w", newline="") as handle:
        writer = csv.DictWriter(handle, fieldnames=list(COLUMNS), restval="")
        writer.writeheader()
        writer.writerows(rows)
    return cluster, jobs


def load(tmp: Path, doc: dict, rows: list[dict]):
    cluster, jobs = write(tmp, doc, rows)
    spec = load_cluster(cluster)
    return spec, load_jobs(jobs, {t.name for t in spec.teams})
