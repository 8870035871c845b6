"""dcgm-exporter found from the cluster (agents/backends/k8s_exporters.py) on the real API server:
the test creates a pod labelled as the GPU Operator labels its exporters, on node gpu-01 of the
harness, with a status whose IP is loopback, where a small HTTP server answers a recorded scrape.
A poll with the backend's deploy/rbac.yaml rights reads gpu-01 there, though no agent_url was typed,
and follows the exporter when its pod is replaced; gpu-02, with no exporter, has no reading."""

from __future__ import annotations

import threading
from datetime import UTC, datetime
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest
from kubernetes import client
from kubernetes.client.exceptions import ApiException

from agents import services
from agents.backends.k8s_exporters import DCGM_SELECTOR, exporter_finder
from agents.backends.kubernetes import KubernetesBackend, KubernetesConfig
from agents.dcgm import DcgmHttpTelemetry
from scheduling.models import GpuSample, Node
from tests.kube.conftest import TEAM

pytestmark = pytest.mark.django_db(transaction=True)
OPERATOR = "gpu-operator"
SCRAPE = (Path(__file__).resolve().parents[1] / "agents" / "fixtures" / "dcgm_a100_whole.prom").read_text()


class _Exporter(BaseHTTPRequestHandler):
    def do_GET(self):  # noqa: N802 (http.server's naming)
        self.send_response(200 if self.path == "/metrics" else 404)
        self.end_headers()
        self.wfile.write(SCRAPE.encode() if self.path == "/metrics" else b"")

    def log_message(self, *args):
        pass


@pytest.fixture
def exporters():
    """Two exporters on loopback (the pod's old and new incarnation): their ports."""
    servers = [ThreadingHTTPServer(("127.0.0.1", 0), _Exporter) for _ in range(2)]
    for server in servers:
        threading.Thread(target=server.serve_forever, daemon=True).start()
    yield [server.server_address[1] for server in servers]
    for server in servers:
        server.shutdown()
        server.server_close()


@pytest.fixture
def exporter_pods(kube_admin):
    """Creates the GPU Operator's exporter pods on a node, Running and Ready at 127.0.0.1."""
    core, made = client.CoreV1Api(kube_admin), []

    def create(name: str, node: str, port: int, ready: bool = True) -> None:
        labels = dict(label.split("=") for label in DCGM_SELECTOR.split(","))
        core.create_namespaced_pod(
            OPERATOR,
            {
                "metadata": {"name": name, "labels": labels},
                "spec": {
                    "nodeName": node,
                    "tolerations": [{"operator": "Exists"}],
                    "containers": [
                        {
                            "name": "nvidia-dcgm-exporter",
                            "image": "nvcr.io/nvidia/k8s/dcgm-exporter:3.3.5",
                            # the harness keeps a pod running for this long (tests/kube/kubelet.py)
                            "env": [{"name": "TESSERA_RUNTIME_S", "value": "3600"}],
                            "ports": [{"name": "metrics", "containerPort": port}],
                        }
                    ],
                },
            },
        )
        made.append(name)
        now = datetime.now(UTC).isoformat().replace("+00:00", "Z")
        core.patch_namespaced_pod_status(
            name,
            OPERATOR,
            {
                "status": {
                    "phase": "Running",
                    "podIP": "127.0.0.1",
                    "podIPs": [{"ip": "127.0.0.1"}],
                    "startTime": now,
                    "conditions": [
                        {"type": "Ready", "status": "True" if ready else "False", "lastTransitionTime": now}
                    ],
                }
            },
        )

    yield create
    for name in made:
        try:
            core.delete_namespaced_pod(name, OPERATOR, grace_period_seconds=0)
        except ApiException as error:
            if error.status != 404:
                raise


@pytest.fixture
def backend(control_plane):
    api_client = control_plane.backend_client()
    yield api_client, KubernetesBackend(KubernetesConfig(api_client=api_client, namespaces=frozenset({TEAM})))
    api_client.close()


def test_a_node_is_read_at_its_exporter_pod_with_no_url_typed(
    gpu_cluster, exporter_pods, exporters, backend, kube_admin
):
    api_client, kube = backend
    telemetry = DcgmHttpTelemetry(discover=exporter_finder(client.CoreV1Api(api_client), namespace=OPERATOR))
    assert set(Node.objects.values_list("agent_url", flat=True)) == {""}
    exporter_pods("dcgm-exporter-gpu-01", "gpu-01", exporters[0])
    exporter_pods("dcgm-exporter-gpu-02", "gpu-02", exporters[1], ready=False)  # starting: not scraped yet

    services.agents_poll(backend=kube, telemetry=telemetry, sync_inventory=True)
    read = {node.name: node.telemetry_at is not None for node in Node.objects.all()}
    assert read == {"gpu-01": True, "gpu-02": False}
    samples = GpuSample.objects.filter(gpu__node__name="gpu-01")
    assert sorted(samples.values_list("gpu__index", "utilization")) == [(0, 0.97), (1, 0.0)]

    # The exporter is replaced (a new pod, another port): the next poll finds it there.
    client.CoreV1Api(kube_admin).delete_namespaced_pod("dcgm-exporter-gpu-01", OPERATOR, grace_period_seconds=0)
    assert telemetry.discover() == {}
    exporter_pods("dcgm-exporter-gpu-01-new", "gpu-01", exporters[1])
    assert telemetry.discover() == {"gpu-01": f"http://127.0.0.1:{exporters[1]}/metrics"}
    assert set(telemetry.read([("gpu-01", ""), ("gpu-02", "")])) == {"gpu-01"}
