"""dcgm-exporter's per-MIG-instance and per-pod fields, partial and malformed scrapes, and a scrape
over real HTTP. Fixtures: tests/agents/fixtures/dcgm_*_{mig_pods,whole}.prom, hand-built (their
headers say from what)."""

import threading
from functools import partial
from http.server import SimpleHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest

from agents.dcgm import DcgmHttpTelemetry, parse_dcgm_text
from agents.node_agent.report import PodReport
from agents.telemetry import reading_from_report

FIXTURES = Path(__file__).parent / "fixtures"
MIG = (FIXTURES / "dcgm_h100_mig_pods.prom").read_text()
WHOLE = (FIXTURES / "dcgm_a100_whole.prom").read_text()


def test_each_mig_instance_gets_its_activity_memory_and_pod():
    gpu = parse_dcgm_text(MIG).gpus[0]
    assert gpu.mig_mode and gpu.utilisation_pct is None  # DCGM has no whole-GPU utilisation in MIG mode
    found = [(m.gpu_instance_id, m.profile, m.utilisation_pct, m.memory_used_mib, m.memory_total_mib,
              [p.pod for p in m.pods]) for m in gpu.mig_instances]
    assert found == [(2, "3g.40gb", 81.2, 30412, 40448, ["search-41-1-0"]),
                     (3, "2g.20gb", 40.2, 11020, 20120, ["vision-42-1-0"]),
                     (9, "1g.10gb", 65.5, 7311, 9984, ["speech-43-1-0"]),
                     (10, "1g.10gb", 0.0, 13, 9984, [])]
    assert gpu.mig_instances[0].pods == [PodReport(namespace="search", pod="search-41-1-0", container="server")]


def test_an_idle_slice_reads_zero_and_a_slice_without_the_profiling_field_reads_not_measured():
    without_prof = "\n".join(line for line in MIG.splitlines() if "GR_ENGINE_ACTIVE" not in line)
    gpu = parse_dcgm_text(without_prof).gpus[0]
    assert {m.utilisation_pct for m in gpu.mig_instances} == {None}
    assert parse_dcgm_text(MIG).gpus[0].mig_instances[3].utilisation_pct == 0.0  # measured idle is 0


def test_the_reading_carries_slices_with_their_pods():
    reading = reading_from_report("gpu-h100-05", parse_dcgm_text(MIG).to_dict(), 100.0)
    assert [g.utilisation for g in reading.gpus] == [None, None]
    first = reading.slices[0]
    assert (first.gpu_index, first.gpu_instance_id, first.profile, first.pods) == (
        0, 2, "3g.40gb", ("search/search-41-1-0",))
    assert first.utilisation == pytest.approx(0.812) and first.memory_used_gb == pytest.approx(30412 / 1024)
    assert len(reading.slices) == 5 and reading.slices[4].pods == ("ml-platform/triton-7d9f-x2",)


def test_a_whole_gpu_node_reads_util_memory_and_the_pod_on_each_gpu():
    report = parse_dcgm_text(WHOLE)
    busy, idle = report.gpus
    assert (busy.utilisation_pct, busy.memory_used_mib, busy.memory_total_mib) == (97, 74210, 81920)
    assert [p.pod for p in busy.pods] == ["vision-17-2-0"] and idle.pods == []
    assert (idle.utilisation_pct, idle.memory_used_mib) == (0, 0)
    assert reading_from_report("gpu-a100-07", report.to_dict(), 1.0).slices == ()


def test_without_gpu_util_the_whole_gpu_reads_the_profiling_ratio():
    text = "\n".join(line for line in WHOLE.splitlines() if "DCGM_FI_DEV_GPU_UTIL" not in line)
    assert [g.utilisation_pct for g in parse_dcgm_text(text).gpus] == [96, 0]


def test_old_pod_label_names_are_read_too():
    old = MIG.replace('namespace="', 'pod_namespace="').replace(',pod="', ',pod_name="')
    assert parse_dcgm_text(old).gpus[0].mig_instances[0].pods[0].pod == "search-41-1-0"


def test_a_partial_scrape_reads_what_it_has():
    cut = MIG[: MIG.index("# HELP DCGM_FI_DEV_FB_FREE")]  # the connection dropped after the power family
    gpu = parse_dcgm_text(cut).gpus[0]
    assert gpu.power_w == 318.2
    assert {(m.memory_used_mib, m.memory_total_mib, m.utilisation_pct) for m in gpu.mig_instances} == {
        (None, None, None)}


@pytest.mark.parametrize("text", [
    "<html>502 Bad Gateway</html>",
    MIG.replace('gpu="0"', 'gpu="zero"'),
    MIG.replace('GPU_I_ID="2"', 'GPU_I_ID="two"'),
    MIG.replace(' 0.812345', ' lots'),
    MIG + MIG.replace("gpu-h100-05", "gpu-h100-06"),
    "",
])
def test_malformed_scrapes_are_refused_with_a_value_error(text):
    with pytest.raises(ValueError):
        parse_dcgm_text(text)


@pytest.fixture
def exporters(tmp_path):
    """Two fake dcgm-exporters on loopback (plain http.server over files): a MIG node and a whole-GPU one,
    plus one that answers garbage."""
    (tmp_path / "mig").mkdir()
    (tmp_path / "mig" / "metrics").write_text(MIG)
    (tmp_path / "whole").mkdir()
    (tmp_path / "whole" / "metrics").write_text(WHOLE)
    (tmp_path / "bad").mkdir()
    (tmp_path / "bad" / "metrics").write_text(MIG[:300] + "{{{ garbage")
    server = ThreadingHTTPServer(("127.0.0.1", 0), partial(_Quiet, directory=str(tmp_path)))
    threading.Thread(target=server.serve_forever, daemon=True).start()
    yield f"http://127.0.0.1:{server.server_address[1]}"
    server.shutdown()
    server.server_close()


class _Quiet(SimpleHTTPRequestHandler):
    def log_message(self, *args):  # keep pytest's output clean
        pass


def test_a_scrape_over_http_and_one_bad_node_never_blinds_the_others(exporters):
    nodes = [("gpu-h100-05", f"{exporters}/mig/metrics"), ("gpu-a100-07", f"{exporters}/whole"),
             ("broken", f"{exporters}/bad/metrics"), ("missing", f"{exporters}/nothing-here/metrics"),
             ("closed", "http://127.0.0.1:9/metrics"), ("no-url", ""), ("file", "file:///etc/passwd")]
    readings = DcgmHttpTelemetry(timeout_s=2).read(nodes)
    assert set(readings) == {"gpu-h100-05", "gpu-a100-07"}
    assert len(readings["gpu-h100-05"].slices) == 5
    assert readings["gpu-a100-07"].gpus[0].utilisation == pytest.approx(0.97)
