"""The agent's HTTP side (token, routes) and its refusal to run without NVML."""

import json
import os
import subprocess
import sys
import threading
import urllib.error
import urllib.request

import pytest

from agents.node_agent import nvml as nvml_module
from agents.node_agent.auth import StaticToken
from agents.node_agent.collector import collect
from agents.node_agent.server import make_server, parse_listen
from tests.agents.fake_nvml import FakeNvml, load_snapshot

TOKEN = "s3cret-token"


def _serve(report):
    server = make_server(("127.0.0.1", 0), StaticToken(TOKEN), report)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    return server, f"http://127.0.0.1:{server.server_address[1]}"


@pytest.fixture
def agent():
    snapshot = load_snapshot("nvml_a100_pcie_4gpu.json")
    server, url = _serve(lambda: collect(FakeNvml(snapshot), "gpu-a100-07").to_dict())
    yield url
    server.shutdown()
    server.server_close()


def _get(url, token=None):
    request = urllib.request.Request(url)
    if token is not None:
        request.add_header("Authorization", f"Bearer {token}")
    try:
        with urllib.request.urlopen(request, timeout=5) as response:
            return response.status, json.loads(response.read())
    except urllib.error.HTTPError as error:
        return error.code, json.loads(error.read())


def test_it_serves_the_report_to_the_right_token(agent):
    status, body = _get(f"{agent}/v1/report", TOKEN)
    assert status == 200
    assert body["hostname"] == "gpu-a100-07"
    assert [g["name"] for g in body["gpus"]] == ["NVIDIA A100-PCIE-40GB"] * 4
    assert len(body["links"]) == 6


@pytest.mark.parametrize("token", [None, "", "wrong", TOKEN + "x", TOKEN[:-1]])
def test_it_refuses_a_missing_or_wrong_token(agent, token):
    status, body = _get(f"{agent}/v1/report", token)
    assert (status, body) == (401, {"error": "unauthorized"})


def test_unknown_paths_are_404_but_only_after_the_token(agent):
    assert _get(f"{agent}/v1/secrets")[0] == 401
    assert _get(f"{agent}/v1/secrets", TOKEN)[0] == 404


def test_a_failing_collection_is_a_500_not_a_dead_agent():
    def broken():
        raise RuntimeError("GPU fell off the bus")

    server, url = _serve(broken)
    try:
        assert _get(f"{url}/v1/report", TOKEN)[0] == 500
        assert _get(f"{url}/v1/report", TOKEN)[0] == 500  # still serving
    finally:
        server.shutdown()
        server.server_close()


def test_an_empty_static_token_is_refused_at_start():
    with pytest.raises(ValueError):
        StaticToken("")


def test_parse_listen():
    assert parse_listen("0.0.0.0:9400") == ("0.0.0.0", 9400)
    assert parse_listen(":9400") == ("0.0.0.0", 9400)
    assert parse_listen("[::1]:9400") == ("::1", 9400)
    with pytest.raises(ValueError):
        parse_listen("9400")


def test_without_nvml_the_agent_says_so_and_exits_non_zero(tmp_path):
    """This machine has no GPU driver: the agent must not invent GPUs."""
    token = tmp_path / "token"
    token.write_text(TOKEN)
    dev = ["--auth", "dev-static-token", "--token-file", str(token)]
    for flags in (["--once"], ["--listen", "127.0.0.1:0", *dev]):
        done = subprocess.run(
            [sys.executable, "-m", "agents.node_agent", *flags],
            capture_output=True, text=True, timeout=30, env={**os.environ, "DEBUG": "1"},
        )
        assert done.returncode == 2
        assert "no NVML on this machine" in done.stderr
        assert done.stdout == ""


def test_serving_needs_credentials_to_review_tokens_or_the_dev_token_file():
    environment = {k: v for k, v in os.environ.items() if k != "KUBERNETES_SERVICE_HOST"}
    done = subprocess.run([sys.executable, "-m", "agents.node_agent", "--listen", "127.0.0.1:0"],
                          capture_output=True, text=True, timeout=30, env=environment)
    assert done.returncode != 0 and "no credentials to review tokens with" in done.stderr
    done = subprocess.run([sys.executable, "-m", "agents.node_agent", "--auth", "dev-static-token"],
                          capture_output=True, text=True, timeout=30, env={**environment, "DEBUG": "1"})
    assert done.returncode != 0 and "--token-file" in done.stderr


# NVML calls that only read. Anything else (Set*, Reset, Create*, Destroy*) must not appear.
READ_ONLY = {"nvmlInit", "nvmlShutdown"}


def test_the_adapter_only_reads():
    import ast
    import inspect

    tree = ast.parse(inspect.getsource(nvml_module))
    called = {
        node.attr for node in ast.walk(tree)
        if isinstance(node, ast.Attribute) and node.attr.startswith("nvml")
    }
    assert called, "the adapter should call NVML"
    writes = {
        name for name in called
        if name not in READ_ONLY and not name.startswith(("nvmlSystemGet", "nvmlDeviceGet",
                                                         "nvmlGpuInstanceGet"))
    }
    assert writes == set()


def test_agents_code_imports_no_django():
    """The node agent runs on GPU nodes without Django; the backends plug into Celery tasks."""
    modules = ("agents.node_agent.__main__", "agents.dcgm", "agents.backends",
               "agents.backends.kubernetes")
    code = f"import sys; import {', '.join(modules)}; print('django' in sys.modules)"
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert (done.returncode, done.stdout.strip()) == (0, "False"), done.stderr
