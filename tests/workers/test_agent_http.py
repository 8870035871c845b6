"""poll_agents against a real node agent over HTTP (recorded NVML answers behind it)."""

import threading
from datetime import timedelta

import pytest
from django.utils import timezone

from agents.backends.simulated import SimNode
from agents.node_agent.auth import StaticToken
from agents.node_agent.collector import collect
from agents.node_agent.server import make_server
from agents.services import agents_poll
from agents.telemetry import AgentHttpTelemetry
from scheduling.models import Gpu, GpuSample, Node
from tests.agents.fake_nvml import FakeNvml, load_snapshot

pytestmark = pytest.mark.django_db
TOKEN = "agent-token-for-tests"


@pytest.fixture
def agent_node(cluster, settings):
    """Node r-01 of the worker tests' cluster, with a node agent answering for it on loopback."""
    settings.TESSERA_POLL_INTERVAL_S, settings.TESSERA_LOST_AFTER_MISSED = 15, 2  # lost after 30 s of silence
    snapshot = load_snapshot("nvml_a100_pcie_4gpu.json")
    server = make_server(("127.0.0.1", 0), StaticToken(TOKEN), lambda: collect(FakeNvml(snapshot), "r-01").to_dict())
    threading.Thread(target=server.serve_forever, daemon=True).start()
    node = Node.objects.get(name="r-01")
    node.agent_url = f"http://127.0.0.1:{server.server_address[1]}"
    node.save(update_fields=["agent_url"])
    cluster.ensure_node(SimNode(name="r-01", gpu_model="A100-80GB", gpu_count=4, gpu_memory_mib=81920,
                                tier="reserved"))
    yield node, server
    server.shutdown()
    server.server_close()


def test_a_polled_agent_is_a_heartbeat_and_utilisation_samples(cluster, agent_node):
    node, _ = agent_node
    now = timezone.now()
    result = agents_poll(backend=cluster, telemetry=AgentHttpTelemetry(lambda: TOKEN), now=now)
    assert "r-01" in result["answered"]
    node.refresh_from_db()
    assert node.last_heartbeat == now and node.state == "ready"
    samples = GpuSample.objects.filter(gpu__node=node)
    assert samples.count() == Gpu.objects.filter(node=node).count()
    assert all(0 <= s.utilization <= 1 for s in samples)


def test_a_wrong_token_or_a_silent_agent_is_a_missed_heartbeat_until_the_node_is_lost(cluster, agent_node):
    node, server = agent_node
    start = timezone.now()
    agents_poll(backend=cluster, telemetry=AgentHttpTelemetry(lambda: TOKEN), now=start)
    wrong = agents_poll(backend=cluster, telemetry=AgentHttpTelemetry(lambda: "not-the-token"),
                        now=start + timedelta(seconds=15))
    assert "r-01" not in wrong["answered"] and "r-01" not in wrong["lost"]
    server.shutdown()
    server.server_close()
    later = start + timedelta(seconds=15 * 3)
    result = agents_poll(backend=cluster, telemetry=AgentHttpTelemetry(lambda: TOKEN, timeout_s=1), now=later)
    assert "r-01" in result["lost"]
    node.refresh_from_db()
    assert node.state == "lost" and node.last_heartbeat == start

