"""A MIG inference job's page shows its own slice's utilisation and memory, scraped from a
dcgm-exporter over HTTP (the hand-built fixture, relabelled to this test's node and pod); NVML's
"not measured" is shown as such; the cluster page colours slices by their own reading."""

import json
import threading
from datetime import timedelta
from functools import partial
from http.server import SimpleHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest
from django.utils import timezone

from agents.dcgm import DcgmHttpTelemetry
from agents.node_agent.collector import collect
from agents.services import node_heartbeat
from agents.slices import job_of_pod
from agents.telemetry import reading_from_report
from scheduling.models import GpuSample, MigInstance, MigSample, Node, Placement
from tests.agents.fake_nvml import FakeNvml, load_snapshot
from tests.ui.conftest import make_job
from ui import selectors

pytestmark = pytest.mark.django_db
FIXTURE = Path(__file__).parents[1] / "agents" / "fixtures" / "dcgm_h100_mig_pods.prom"


class _Quiet(SimpleHTTPRequestHandler):
    def log_message(self, *args):
        pass


@pytest.fixture
def inference(users, teams, cluster):
    """alpha's inference job on the 3g.40gb slice of h100-t1's MIG GPU 7 (slot 4)."""
    instance = MigInstance.objects.get(gpu__node=cluster["h100"], gpu__index=7, profile="3g.40gb")
    job = make_job(teams["alpha"], users["lead"], "alpha-ranker", kind="inference", gpus=0, gpu_memory_gb=30,
                   status="running", started_at=timezone.now() - timedelta(hours=1))
    Placement.objects.create(job=job, gpu=instance.gpu, mig_instance=instance, mig_profile="3g.40gb",
                             memory_gb=instance.memory_gb, started_at=job.started_at)
    return job, instance


def _exporter_text(job) -> str:
    """The fixture's GPU 0 as this node's GPU 7, its 3g.40gb slice held by the job's pod."""
    return (FIXTURE.read_text().replace('gpu="0"', 'gpu="7"').replace("gpu-h100-05", "h100-t1")
            .replace('namespace="search",pod="search-41-1-0"', f'namespace="alpha",pod="alpha-{job.pk}-1-0"'))


@pytest.fixture
def exporter(tmp_path, inference):
    (tmp_path / "metrics").write_text(_exporter_text(inference[0]))
    server = ThreadingHTTPServer(("127.0.0.1", 0), partial(_Quiet, directory=str(tmp_path)))
    threading.Thread(target=server.serve_forever, daemon=True).start()
    yield f"http://127.0.0.1:{server.server_address[1]}/metrics"
    server.shutdown()
    server.server_close()


def _poll(node, telemetry_reading, at):
    node_heartbeat(node=node, reading=telemetry_reading, at=at)


def test_the_job_page_shows_its_slice_from_dcgm_exporter(clients, cluster, inference, exporter):
    job, instance = inference
    node = Node.objects.get(name="h100-t1")
    readings = DcgmHttpTelemetry(timeout_s=5).read([("h100-t1", exporter)])
    at = timezone.now() - timedelta(minutes=5)
    _poll(node, readings["h100-t1"], at)
    instance.refresh_from_db()
    assert instance.utilization == pytest.approx(0.812) and instance.memory_used_gb == pytest.approx(30412 / 1024)
    assert MigSample.objects.filter(mig_instance=instance, at=at).count() == 1
    node.refresh_from_db()
    assert node.telemetry_at == at
    # The 1g.10gb row: two readings of that profile on GPU 7, neither held by a job here -> left out.
    assert MigInstance.objects.get(gpu__node=node, gpu__index=7, profile="1g.10gb").measured_at is None

    assert selectors.team_utilisation_series(job.team)["y"].count(81.2) == 1  # the team chart counts the slice
    page = clients["lead"].get(f"/jobs/{job.pk}/")
    body = page.content.decode()
    assert page.status_code == 200
    assert "81% · 29.7/39.5 GiB" in body
    series = json.loads(body.split('id="gpu-series" type="application/json">')[1].split("</script>")[0])
    assert [(line["name"], line["util"], line["unmeasured"]) for line in series] == [
        ("h100-t1/gpu7 3g.40gb@4", [81.2], False)]


def test_nvml_slices_show_not_measured_never_zero(clients, cluster, inference):
    job, instance = inference
    node = Node.objects.get(name="h100-t1")
    report = collect(FakeNvml(load_snapshot("nvml_h100_nvswitch_8gpu.json")), "h100-t1").to_dict()
    report["gpus"][7]["mig_instances"][4].update(profile="3g.40gb", placement_start=4)  # this node's layout
    at = timezone.now() - timedelta(minutes=2)
    _poll(node, reading_from_report("h100-t1", report, at.timestamp()), at)
    instance.refresh_from_db()
    assert instance.measured_at == at and instance.utilization is None
    # GPU 6 went into MIG mode: recorded although NVML gives it no utilisation, and no GPU sample.
    six = node.gpus.get(index=6)
    assert six.mig_enabled and six.layout_changed_at == at and not GpuSample.objects.filter(gpu=six).exists()
    assert MigSample.objects.get(mig_instance=instance).utilization is None
    body = clients["lead"].get(f"/jobs/{job.pk}/").content.decode()
    assert "not measured · " in body and "utilisation not measured" in body
    assert "0% · " not in body
    cluster_page = clients["lead"].get("/cluster/").content.decode()
    assert "3g.40gb @ slot 4: alpha: #" in cluster_page and "not measured" in cluster_page


def test_the_cluster_page_colours_a_measured_slice(clients, cluster, inference, exporter):
    node = Node.objects.get(name="h100-t1")
    _poll(node, DcgmHttpTelemetry().read([("h100-t1", exporter)])["h100-t1"], timezone.now())
    body = clients["staff"].get("/cluster/").content.decode()
    assert "3g.40gb @ slot 4: alpha: #" in body and "81% · 29.7/39.5 GiB" in body
    assert "per MIG slice" in body
    nodes = clients["staff"].get("/api/v1/cluster/").json()["results"]
    cells = [cell for node in nodes if node["name"] == "h100-t1" for cell in node["cells"]]
    segments = [seg for cell in cells for seg in cell["segments"]]
    assert [(seg["profile"], seg["utilisation"], seg["memory_used_gb"]) for seg in segments] == [
        ("1g.10gb", None, None), ("3g.40gb", 81.2, pytest.approx(29.7, abs=0.01))]


@pytest.mark.parametrize(("pod", "job"), [("alpha/alpha-12-1-0", 12), ("a-b/a-b-7-2-1", 7), ("alpha/beta-12-1-0", None),
                                          ("ml/triton-7d9f-x2", None), ("alpha/alpha-12-1", None), ("nons", None)])
def test_job_of_pod(pod, job):
    assert job_of_pod(pod) == job


def test_the_simulated_cluster_reports_a_mig_pods_slice_like_dcgm_exporter(clients, tmp_path, inference):
    """The demo's backend: a running MIG pod's slice gets its own utilisation and memory, found by its pod."""
    from agents.backends.base import BindRequest
    from agents.backends.simulated import SimNode, SimulatedBackend

    job, instance = inference
    sim = SimulatedBackend(tmp_path / "cluster.json")
    sim.ensure_node(SimNode(name="h100-t1", gpu_model="H100-80GB", gpu_count=8, gpu_memory_mib=81920))
    sim.bind(BindRequest(job_id=str(job.pk), pod_name=f"alpha-{job.pk}-1-0", namespace="alpha", project="main",
                         job_kind="inference", image="demo", command=(), node_name="h100-t1", mig_profile="3g.40gb"))
    reading = sim.read([("h100-t1", "")])["h100-t1"]
    assert [(s.profile, s.pods) for s in reading.slices] == [("3g.40gb", (f"alpha/alpha-{job.pk}-1-0",))]
    node_heartbeat(node=Node.objects.get(name="h100-t1"), reading=reading, at=timezone.now())
    instance.refresh_from_db()
    assert 0.4 <= instance.utilization <= 0.85 and instance.memory_used_gb == 28.0
    assert "% · 28.0/39.5 GiB" in clients["lead"].get(f"/jobs/{job.pk}/").content.decode()
    # The simulator does not know GPU 7 is in MIG mode and reads it 0 %: not stored as the GPU's.
    assert not GpuSample.objects.filter(gpu=instance.gpu).exists()
    assert GpuSample.objects.filter(gpu__node__name="h100-t1", gpu__index=0).exists()


def test_the_demo_history_measures_each_held_slice(inference):
    from ui.demo_workload import _measured_slices

    _job, instance = inference
    _measured_slices(timezone.now())
    instance.refresh_from_db()
    samples = MigSample.objects.filter(mig_instance=instance)
    assert samples.count() >= 4 and all(0.3 <= s.utilization <= 0.75 for s in samples)
    assert instance.measured_at is not None and instance.memory_used_gb == pytest.approx(27.6, abs=0.1)
