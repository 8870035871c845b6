"""Per-node agent tokens and the agent's port: a token read off one node's wire opens that node only."""

import threading

import pytest

from agents.node_agent.__main__ import DEFAULT_LISTEN, _args, agent_token
from agents.node_agent.credentials import node_token
from agents.node_agent.server import make_server
from agents.telemetry import AgentHttpTelemetry

SECRET = "cluster-secret-for-tests"


def test_each_node_gets_its_own_stable_token():
    assert node_token(SECRET, "gpu-01") == node_token(SECRET, "gpu-01")
    assert node_token(SECRET, "gpu-01") != node_token(SECRET, "gpu-02")
    assert node_token(SECRET, "gpu-01") != node_token("another-secret", "gpu-01")
    with pytest.raises(ValueError):
        node_token("", "gpu-01")


def test_the_default_port_is_not_dcgm_exporters_and_is_configurable(monkeypatch, tmp_path):
    assert not DEFAULT_LISTEN.endswith(":9400")
    monkeypatch.delenv("TESSERA_AGENT_LISTEN", raising=False)
    assert _args(["--once"]).listen == DEFAULT_LISTEN
    monkeypatch.setenv("TESSERA_AGENT_LISTEN", "0.0.0.0:9555")
    assert _args(["--once"]).listen == "0.0.0.0:9555"
    assert _args(["--once", "--listen", "127.0.0.1:9601"]).listen == "127.0.0.1:9601"


def test_per_node_mode_derives_the_token_from_the_secret_file(tmp_path):
    secret = tmp_path / "token"
    secret.write_text(SECRET + "\n")
    per_node = _args(["--token-file", str(secret), "--token-mode", "per-node", "--node-name", "gpu-07"])
    assert agent_token(per_node) == node_token(SECRET, "gpu-07")
    shared = _args(["--token-file", str(secret), "--node-name", "gpu-07"])
    assert agent_token(shared) == SECRET


@pytest.fixture
def two_agents():
    """Agents of gpu-01 and gpu-02 on loopback, each accepting only its own derived token."""
    servers, nodes = [], []
    for name in ("gpu-01", "gpu-02"):
        report = {"gpus": [{"index": 0, "utilisation_pct": 50, "memory_used_mib": 1024}]}
        server = make_server(("127.0.0.1", 0), node_token(SECRET, name), lambda report=report: report)
        threading.Thread(target=server.serve_forever, daemon=True).start()
        servers.append(server)
        nodes.append((name, f"http://127.0.0.1:{server.server_address[1]}"))
    yield nodes
    for server in servers:
        server.shutdown()
        server.server_close()


def test_the_poller_sends_each_node_its_own_token(two_agents):
    assert set(AgentHttpTelemetry(SECRET, per_node=True).read(two_agents)) == {"gpu-01", "gpu-02"}
    # The secret itself, or one node's token, is no key to the nodes.
    assert AgentHttpTelemetry(SECRET).read(two_agents) == {}
    stolen = node_token(SECRET, "gpu-01")
    assert set(AgentHttpTelemetry(stolen).read(two_agents)) == {"gpu-01"}
