"""Each node's dcgm-exporter URL from its exporter pod (agents/backends/k8s_exporters.py), as the
client reads pods; tests/kube/test_dcgm_discovery.py does it against the real API server."""

import threading
from datetime import UTC, datetime
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest
from kubernetes import client

from agents.backends.k8s_exporters import exporter_url, exporter_urls_from_pods
from agents.dcgm import DcgmHttpTelemetry

MIG = (Path(__file__).parent / "fixtures" / "dcgm_h100_mig.prom").read_text()


def exporter_pod(
    node="gpu-01",
    ip="10.0.3.7",
    *,
    phase="Running",
    ready="True",
    ports=(("metrics", 9400),),
    created=datetime(2026, 12, 1, tzinfo=UTC),
):
    return client.V1Pod(
        metadata=client.V1ObjectMeta(name=f"nvidia-dcgm-exporter-{node}", creation_timestamp=created),
        spec=client.V1PodSpec(
            node_name=node,
            containers=[
                client.V1Container(
                    name="nvidia-dcgm-exporter",
                    ports=[client.V1ContainerPort(name=n, container_port=p) for n, p in ports],
                )
            ],
        ),
        status=client.V1PodStatus(
            phase=phase, pod_ip=ip, conditions=[client.V1PodCondition(type="Ready", status=ready)]
        ),
    )


def test_a_ready_exporter_pod_is_scraped_at_its_ip_and_metrics_port():
    assert exporter_url(exporter_pod()) == "http://10.0.3.7:9400/metrics"
    assert exporter_url(exporter_pod(ports=(("http", 8080), ("metrics", 9500)))) == "http://10.0.3.7:9500/metrics"
    assert exporter_url(exporter_pod(ports=())) == "http://10.0.3.7:9400/metrics"  # dcgm-exporter's default
    assert exporter_url(exporter_pod(ip="fd00::7")) == "http://[fd00::7]:9400/metrics"


@pytest.mark.parametrize(
    "pod",
    [
        exporter_pod(phase="Pending"),
        exporter_pod(ready="False"),
        exporter_pod(ip=None),
        exporter_pod(node=None),
    ],
)
def test_an_exporter_that_cannot_be_scraped_yet_gives_no_url(pod):
    assert exporter_url(pod) is None


def test_each_node_gets_its_own_exporter_and_the_newer_of_two():
    pods = [
        exporter_pod("gpu-02", "10.0.4.2", created=datetime(2026, 12, 2, tzinfo=UTC)),
        exporter_pod("gpu-01", "10.0.3.8", created=datetime(2026, 12, 3, tzinfo=UTC)),  # the replacement
        exporter_pod("gpu-01", "10.0.3.7"),
        exporter_pod("gpu-03", "10.0.5.1", ready="False"),
    ]
    assert exporter_urls_from_pods(pods) == {
        "gpu-01": "http://10.0.3.8:9400/metrics",
        "gpu-02": "http://10.0.4.2:9400/metrics",
    }


class _Exporter(BaseHTTPRequestHandler):
    def do_GET(self):  # noqa: N802
        body = MIG.encode() if self.path == "/metrics" else b""
        self.send_response(200 if body else 404)
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, *args):
        pass


@pytest.fixture
def exporter():
    server = ThreadingHTTPServer(("127.0.0.1", 0), _Exporter)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    yield f"http://127.0.0.1:{server.server_address[1]}/metrics"
    server.shutdown()
    server.server_close()


def test_a_node_without_a_typed_url_is_scraped_where_discovery_found_it(exporter):
    asked = []

    def discover():
        asked.append(1)
        return {"gpu-01": exporter, "gpu-02": "http://127.0.0.1:9/metrics"}

    telemetry = DcgmHttpTelemetry(timeout_s=2, discover=discover)
    readings = telemetry.read([("gpu-01", ""), ("gpu-02", ""), ("gpu-03", "")])
    assert set(readings) == {"gpu-01"} and len(readings["gpu-01"].slices) == 2  # the fixture's MIG GPU
    # A typed URL wins (an operator's override); with every node typed, the cluster is not asked.
    assert set(telemetry.read([("gpu-02", exporter)])) == {"gpu-02"}
    assert asked == [1]
