"""The node agent's TokenReview check (agents/node_agent/auth.py) against the real API server v1.20.

Two ServiceAccounts, the poller and a stranger, get tokens from the API server itself: TokenRequest
with the agents' audience (what deploy/worker.yaml's projected volume holds) and the token Secret
the controller-manager's token controller writes (a legacy token, bound to no audience). The agent
reviews them with its own ServiceAccount's token and deploy/rbac.yaml's rights, and serves its
report over real HTTP: the poller reads it, the stranger is 403, garbage and unbound tokens 401.
"""

from __future__ import annotations

import base64
import json
import threading
import time
import urllib.error
import urllib.request

import pytest
from kubernetes import client
from kubernetes.client.exceptions import ApiException

from agents.node_agent.auth import AUDIENCE, ServiceAccountTokens, kube_reviewer
from agents.node_agent.server import make_server
from agents.telemetry import AgentHttpTelemetry, token_file

NAMESPACE = "tessera-system"
POLLER, STRANGER, AGENT = "agent-test-poller", "agent-test-stranger", "tessera-node-agent"  # AGENT: rbac.yaml's
REPORT = {"gpus": [{"index": 0, "utilisation_pct": 40, "memory_used_mib": 2048}]}


def bound_token(core: client.CoreV1Api, name: str, audiences: list[str]) -> str:
    """A TokenRequest token; no audiences: the API server's own (what any request to it needs)."""
    request = client.AuthenticationV1TokenRequest(
        spec=client.V1TokenRequestSpec(audiences=audiences, expiration_seconds=600)
    )
    return core.create_namespaced_service_account_token(name, NAMESPACE, request).status.token


def legacy_token(core: client.CoreV1Api, name: str, timeout: float = 60.0) -> str:
    """The token Secret the token controller writes for a ServiceAccount (v1.20 mounts these)."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        for reference in core.read_namespaced_service_account(name, NAMESPACE).secrets or []:
            secret = core.read_namespaced_secret(reference.name, NAMESPACE)
            if secret.type == "kubernetes.io/service-account-token" and (secret.data or {}).get("token"):
                return base64.b64decode(secret.data["token"]).decode()
        time.sleep(0.2)
    raise AssertionError(f"no token Secret for {name} after {timeout:.0f} s")


@pytest.fixture(scope="module")
def accounts(control_plane):
    with control_plane.admin_client() as admin:
        core = client.CoreV1Api(admin)
        for name in (POLLER, STRANGER):
            core.create_namespaced_service_account(NAMESPACE, {"metadata": {"name": name}})
        yield core
        for name in (POLLER, STRANGER):
            try:
                core.delete_namespaced_service_account(name, NAMESPACE)
            except ApiException as error:
                if error.status != 404:
                    raise


def serve(plane, agent_token: str, ttl_s: float = 10.0):
    """An agent on loopback that reviews with `agent_token` and allows the poller only."""
    api_client = client.ApiClient(plane.configuration(agent_token))
    checker = ServiceAccountTokens(kube_reviewer(api_client), f"{NAMESPACE}:{POLLER}", ttl_s=ttl_s)
    server = make_server(("127.0.0.1", 0), checker, lambda: REPORT)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    return server, f"http://127.0.0.1:{server.server_address[1]}"


@pytest.fixture(scope="module")
def agent(control_plane, accounts):
    """The agent as deploy/ runs it: its ServiceAccount's mounted (token Secret) token."""
    server, url = serve(control_plane, legacy_token(accounts, AGENT))
    yield url
    server.shutdown()
    server.server_close()


def get(url: str, token: str) -> tuple[int, dict]:
    request = urllib.request.Request(f"{url}/v1/report", headers={"Authorization": f"Bearer {token}"})
    try:
        with urllib.request.urlopen(request, timeout=10) as response:
            return response.status, json.loads(response.read())
    except urllib.error.HTTPError as error:
        return error.code, json.loads(error.read())


def test_the_poller_reads_the_report_with_its_projected_style_token(agent, accounts, tmp_path):
    path = tmp_path / "token"
    path.write_text(bound_token(accounts, POLLER, [AUDIENCE]))
    readings = AgentHttpTelemetry(token_file(str(path))).read([("gpu-01", agent)])
    assert [(g.index, g.utilisation) for g in readings["gpu-01"].gpus] == [(0, 0.4)]


def test_another_serviceaccount_is_forbidden_and_garbage_unauthorized(agent, accounts):
    status, body = get(agent, bound_token(accounts, STRANGER, [AUDIENCE]))
    assert (status, body) == (
        403,
        {"error": f"forbidden: system:serviceaccount:{NAMESPACE}:{STRANGER} may not read node reports"},
    )
    for garbage in ("garbage", "eyJhbGciOiJSUzI1NiJ9.e30.c2lnbmF0dXJl", "x" * 4000):
        status, body = get(agent, garbage)
        assert status == 401 and "does not accept this token" in body["error"], garbage[:20]


def test_the_pollers_tokens_for_other_audiences_are_refused(agent, accounts):
    """A token for the API server (a TokenRequest's default, a legacy Secret's) would let an agent
    that saw it act on the cluster as the poller: the agent refuses it, so the workers never send one."""
    for token in (bound_token(accounts, POLLER, []), legacy_token(accounts, POLLER)):
        assert get(agent, token)[0] == 401


def test_a_token_seen_on_the_wire_opens_no_cluster_api(control_plane, accounts):
    stolen = bound_token(accounts, POLLER, [AUDIENCE])
    with client.ApiClient(control_plane.configuration(stolen)) as api_client, pytest.raises(ApiException) as refused:
        client.CoreV1Api(api_client).list_namespaced_pod(NAMESPACE)
    assert refused.value.status == 401


def test_an_agent_whose_own_token_may_not_review_answers_503(control_plane, accounts):
    """The stranger has no TokenReview right: the agent cannot tell who calls, and says so."""
    server, url = serve(control_plane, legacy_token(accounts, STRANGER))
    try:
        status, body = get(url, bound_token(accounts, POLLER, [AUDIENCE]))
        assert status == 503 and "API server" in body["error"]
    finally:
        server.shutdown()
        server.server_close()


def test_a_deleted_serviceaccounts_token_is_refused_once_the_caches_have_expired(control_plane, accounts):
    """Bound tokens die with their ServiceAccount. Ours caches reviews (ttl 0 here), the API server its
    own successes (10 s by default), so the refusal comes within those, not at once."""
    name = "agent-test-short-lived"
    accounts.create_namespaced_service_account(NAMESPACE, {"metadata": {"name": name}})
    token = bound_token(accounts, name, [AUDIENCE])
    api_client = client.ApiClient(control_plane.configuration(legacy_token(accounts, AGENT)))
    checker = ServiceAccountTokens(kube_reviewer(api_client), f"{NAMESPACE}:{name}", ttl_s=0)
    assert checker.check(f"Bearer {token}").status == 200
    accounts.delete_namespaced_service_account(name, NAMESPACE)
    deadline = time.monotonic() + 60
    while checker.check(f"Bearer {token}").status == 200 and time.monotonic() < deadline:
        time.sleep(0.5)
    assert checker.check(f"Bearer {token}").status == 401
