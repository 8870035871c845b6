"""The fill loop end to end: a tiny synthetic cluster, the CLI, and the real trace if present."""

import json
import random
from pathlib import Path

import pytest

from scheduling.engine.fragment.frag import FragModel
from scheduling.engine.fragment.shapes import Request
from scheduling.simulator.cli import main, parse_seeds
from scheduling.simulator.fill import get_policy
from scheduling.simulator.fill.experiment import run_one
from scheduling.simulator.fill.loop import arrival_sequence, run_fill
from scheduling.simulator.fill.prior import Binding, FixedPrior
from scheduling.simulator.fill.traces import NodeSpec, TraceTask

TRACES = Path(__file__).resolve().parents[2].parent / "shared" / "traces"
OPENB = TRACES / "alibaba-gpu-v2023"

NODES = [NodeSpec("n0", 16000, 65536, 2, "A"), NodeSpec("n1", 8000, 32768, 1, "B")]
TASKS = [TraceTask(f"p{i}", t) for i, t in enumerate([
    Request(4000, 4096, 1, 500), Request(2000, 2048, 1, 1000), Request(1000, 1024, 0, 0),
    Request(4000, 8192, 2, 1000, frozenset({"A"}))])]


def test_arrival_sequence_inflates_to_the_target():
    seq = arrival_sequence(TASKS, 3000, random.Random(1))
    total = sum(t.total_milli for t in seq)
    assert sorted(seq[:4]) == sorted(t.task for t in TASKS)  # the trace first, shuffled
    assert 3900 - 1000 < total <= 3900 + 1000  # copies stop around 130%


def test_arrival_sequence_drops_tasks_above_the_target():
    big = [TraceTask(f"p{i}", Request(0, 0, 1, 1000)) for i in range(10)]
    assert sum(t.total_milli for t in arrival_sequence(big, 3000, random.Random(1))) <= 3900


@pytest.mark.parametrize("policy", ["tessera", "fgd", "bestfit", "gpupacking", "gpuclustering",
                                    "dotprod"])
def test_fill_never_overcommits(policy):
    rng = random.Random(7)
    seq = arrival_sequence(TASKS, 3000, rng)
    fm = FragModel.from_tasks(t.task for t in TASKS)
    result = run_fill(NODES, seq, FixedPrior(Binding(get_policy(policy), fm)), fm, rng)
    assert len(result.arrived) == len(seq)
    assert all(0 <= u <= 3000 for u in result.used)
    assert result.used[-1] + result.idle[-1] == 3000
    assert result.failed > 0  # 130% arrived cannot all fit
    assert result.arrived[-1] == sum(t.total_milli for t in seq)  # failures count as arrived


def test_tasks_respect_memory_and_model():
    rng = random.Random(3)
    fm = FragModel.from_tasks(t.task for t in TASKS)
    seq = [Request(1000, 40000, 1, 1000), Request(1000, 1, 1, 1000, frozenset({"C"}))]
    result = run_fill(NODES, seq, FixedPrior(Binding(get_policy("fgd"), fm)), fm, rng)
    assert result.used == [1000, 1000] and result.failed == 1


def test_seeded_runs_repeat():
    first = run_one(NODES, TASKS, "fgd", 5)
    assert run_one(NODES, TASKS, "fgd", 5).allocation_rate == first.allocation_rate


def _write_tiny_trace(tmp_path):
    nodes = tmp_path / "nodes.csv"
    nodes.write_text("sn,cpu_milli,memory_mib,gpu,model\n" + "".join(
        f"n{i},32000,131072,{g},{m}\n" for i, (g, m) in enumerate([(4, "A"), (2, "B")] * 4)))
    pods = tmp_path / "tiny_pods.csv"
    pods.write_text("name,cpu_milli,memory_mib,num_gpu,gpu_milli,gpu_spec\n" + "".join(
        f"p{i},{2000 + 500 * (i % 5)},2048,{(1, 1, 2, 0)[i % 4]},{(300, 1000, 1000, 0)[i % 4]},\n"
        for i in range(40)))
    return nodes, pods


def test_cli_fill_writes_json_and_html(tmp_path, capsys):
    nodes, pods = _write_tiny_trace(tmp_path)
    out, html = tmp_path / "out.json", tmp_path / "report.html"
    code = main(["fill", "--nodes", str(nodes), "--trace", str(pods), "--policies",
                 "tessera,fgd,bestfit", "--seeds", "1-2", "--json", str(out), "--html", str(html),
                 "--processes", "1"])
    assert code == 0
    doc = json.loads(out.read_text())
    assert doc["experiment"] == "fill" and doc["trace"] == "tiny_pods" and doc["seeds"] == [1, 2]
    assert doc["prior"] == "online"  # the default: what an online scheduler could know
    assert set(doc["policies"]) == {"tessera", "fgd", "bestfit"}
    assert set(doc["policies"]["fgd"]) == {"allocation_rate", "frag_ratio"}
    assert "100" in doc["policies"]["fgd"]["allocation_rate"]
    assert "plotly" in html.read_text()[:100_000].lower()
    assert sorted(p.name for p in tmp_path.iterdir()) == sorted(
        ["nodes.csv", "tiny_pods.csv", "out.json", "report.html"])  # no temp files left
    assert "unalloc@100" in capsys.readouterr().out


def test_cli_bad_input_fails_without_writing(tmp_path, capsys):
    nodes, _ = _write_tiny_trace(tmp_path)
    pods = tmp_path / "bad.csv"
    pods.write_text("name,cpu_milli,memory_mib,num_gpu,gpu_milli\np0,x,1,1,100\n")
    out = tmp_path / "out.json"
    assert main(["fill", "--nodes", str(nodes), "--trace", str(pods), "--json", str(out)]) == 2
    assert "bad.csv:2: field 'cpu_milli'" in capsys.readouterr().err
    assert not out.exists()


def test_cli_refuses_unknown_policy():
    with pytest.raises(SystemExit):
        main(["fill", "--nodes", "n.csv", "--trace", "t.csv", "--policies", "fgd,nope"])


def test_parse_seeds():
    assert parse_seeds("42-44") == [42, 43, 44]
    assert parse_seeds("1,3-4") == [1, 3, 4]


@pytest.mark.skipif(not (OPENB / "openb_pod_list_default.csv").is_file(),
                    reason="the Alibaba trace is not at ../shared/traces (github.com/alibaba/"
                           "clusterdata, cluster-trace-gpu-v2023)")
def test_real_default_trace_reproduces_the_paper(tmp_path):
    out = tmp_path / "out.json"
    assert main(["fill", "--nodes", str(OPENB / "openb_node_list_gpu_node.csv"),
                 "--trace", str(OPENB / "openb_pod_list_default.csv"), "--policies",
                 "fgd,tessera", "--seeds", "42", "--json", str(out)]) == 0
    policies = json.loads(out.read_text())["policies"]
    fgd = policies["fgd"]["allocation_rate"]["100"]
    assert abs(fgd - 95.23) <= 0.5  # the paper's FGD, mean of its 10 seeds (± 0.10)
    assert policies["tessera"]["allocation_rate"]["100"] >= fgd - 0.3
