"""cluster.json / jobs.csv formats, and errors that name the file, the line and the field."""

from __future__ import annotations

import json

import pytest

from scheduling.simulator.run import main
from scheduling.simulator.run.cluster import engine_node, node_infos
from scheduling.simulator.run.spec import SpecError, load_cluster, load_jobs

from .helpers import cluster_doc, group, job, load, write


def test_formats_parse(tmp_path):
    spec, jobs = load(tmp_path, cluster_doc(), [job("a", checkpoint_interval_s=600, checkpoint_s=20,
                                                    comm_fraction=0.1, gpu_model="H100-80GB|A100-80GB"),
                                                job("b", submit=5, gpus=0, mem=9, kind="inference",
                                                    priority="production")])
    assert spec.gpus == 8 and spec.groups[0].gpu_memory_gb == 80 and spec.groups[0].nic_gb_s == 48
    a, b = jobs
    assert a.checkpoint_interval_s == 600 and a.gpu_models == ("H100-80GB", "A100-80GB")
    assert a.preemptible and not b.preemptible  # default: true except production
    assert b.checkpoint_interval_s is None and b.line == 3
    assert (spec.groups[0].gpu_sharing, spec.groups[0].gpu_replicas) == ("none", 1)  # a plain device plugin


def test_node_groups_say_how_their_device_plugin_shares(tmp_path):
    spec, _ = load(tmp_path, cluster_doc(groups=[group(gpu_sharing="mps", gpu_replicas=4)]), [job("a")])
    info = next(iter(node_infos(spec).values()))
    node = engine_node(info, None, "ready", {})
    assert (node.sharing, node.share_replicas) == ("mps", 4)


def _csv_error(tmp_path, rows, header_drop=None) -> str:
    cluster, jobs = write(tmp_path, cluster_doc(), rows)
    if header_drop:
        lines = jobs.read_text().splitlines()
        cols = lines[0].split(",")
        keep = [i for i, c in enumerate(cols) if c != header_drop]
        jobs.write_text("\n".join(",".join(line.split(",")[i] for i in keep) for line in lines) + "\n")
    with pytest.raises(SpecError) as info:
        load_jobs(jobs, {"ml"})
    return str(info.value)


@pytest.mark.parametrize("row, line, field", [
    (job("x", gpus="two"), 3, "gpus"),
    (job("x", kind="serving"), 3, "kind"),
    (job("x", priority="urgent"), 3, "priority"),
    (job("x", duration=""), 3, "duration_s"),
    (job("x", comm_fraction=1.5), 3, "comm_fraction"),
    (job("x", gpus=0, mem=0), 3, "gpu_mem_gb"),
    (job("x", preemptible="maybe"), 3, "preemptible"),
    (job("x", team="nobody"), 3, "team"),
    (job("a"), 3, "job_id"),  # duplicate
])
def test_bad_csv_rows_are_named(tmp_path, row, line, field):
    message = _csv_error(tmp_path, [job("a"), row])
    assert f"jobs.csv:{line}:" in message and f"field {field!r}" in message


def test_missing_column_is_named(tmp_path):
    message = _csv_error(tmp_path, [job("a")], header_drop="submit_s")
    assert "jobs.csv:1:" in message and "'submit_s'" in message


def test_extra_cells_are_refused(tmp_path):
    cluster, jobs = write(tmp_path, cluster_doc(), [job("a")])
    jobs.write_text(jobs.read_text().rstrip("\n") + ",surplus\n")
    with pytest.raises(SpecError, match=r"jobs.csv:2:.*more cells"):
        load_jobs(jobs)


def test_json_syntax_error_has_line(tmp_path):
    path = tmp_path / "cluster.json"
    path.write_text('{\n  "nodes": [\n    {"name_prefix": "a",}\n  ]\n}\n')
    with pytest.raises(SpecError, match=r"cluster.json:3: not valid JSON"):
        load_cluster(path)


@pytest.mark.parametrize("change, field", [
    (lambda d: d["nodes"][0].update(gpus_per_node="8"), "nodes[0].gpus_per_node"),
    (lambda d: d["nodes"][0].update(tier="cheap"), "nodes[0].tier"),
    (lambda d: d["nodes"][0].pop("leaf"), "nodes[0].leaf"),
    (lambda d: d["teams"][0].update(weight=-1), "teams[0].weight"),
    (lambda d: d["spot"].update(notice_s="soon"), "spot.notice_s"),
    (lambda d: d["prices_per_gpu_hour"]["H100-80GB"].pop("reserved"), "prices_per_gpu_hour.H100-80GB"),
    (lambda d: d["nodes"][0].update(gpu_sharing="hami"), "nodes[0].gpu_sharing"),
    (lambda d: d["nodes"][0].update(gpu_sharing="mps"), "nodes[0].gpu_replicas"),  # sharing needs 2+
    (lambda d: d["nodes"][0].update(gpu_replicas=4), "nodes[0].gpu_replicas"),  # and "none" has 1
])
def test_bad_json_fields_are_named(tmp_path, change, field):
    doc = cluster_doc(groups=[group(), group("m-", gpu_model="H100-80GB")])
    change(doc)
    path = tmp_path / "cluster.json"
    path.write_text(json.dumps(doc, indent=2))
    with pytest.raises(SpecError) as info:
        load_cluster(path)
    message = str(info.value)
    assert f"field {field!r}" in message
    line = int(message.split(":")[1])
    assert line > 1 and (field.split(".")[-1].split("[")[0] in path.read_text().splitlines()[line - 1]
                         or "nodes" in field)


def test_cli_reports_bad_input_and_writes_nothing(tmp_path, capsys):
    cluster, jobs = write(tmp_path, cluster_doc(), [job("a"), job("b", submit="later")])
    out = tmp_path / "out.json"
    code = main(["run", "--cluster", str(cluster), "--workload", str(jobs), "--json", str(out)])
    assert code == 2
    assert "jobs.csv:3: field 'submit_s'" in capsys.readouterr().err
    assert not out.exists() and not list(tmp_path.glob(".out.json*"))
