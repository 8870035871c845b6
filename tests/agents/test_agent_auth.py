"""Who may read a node agent's report, with a fake TokenReview (tests/kube/test_agent_tokenreview.py
asks the real API server): the allowed ServiceAccount only, clear 401/403/503 answers, reviews cached."""

import json
import threading
import urllib.error
import urllib.request

import pytest

from agents.node_agent import auth
from agents.node_agent.__main__ import DEFAULT_LISTEN, _args
from agents.node_agent.server import make_server
from agents.telemetry import AgentHttpTelemetry, token_file

POLLER = "system:serviceaccount:tessera-system:tessera-backend"
TOKENS = {"poller-token": POLLER, "stranger-token": "system:serviceaccount:vision:default"}


class FakeReviewer:
    """The API server's side of a TokenReview, counting the questions asked."""

    def __init__(self) -> None:
        self.asked: list[str] = []
        self.down = False

    def __call__(self, token: str) -> auth.Review:
        self.asked.append(token)
        if self.down:
            raise auth.ReviewUnavailable("connection refused")
        if token in TOKENS:
            return auth.Review(authenticated=True, username=TOKENS[token])
        return auth.Review(authenticated=False, error="invalid bearer token")


class Clock:
    now = 1000.0

    def __call__(self) -> float:
        return self.now


@pytest.fixture
def reviewer():
    return FakeReviewer()


@pytest.fixture
def clock():
    return Clock()


@pytest.fixture
def tokens(reviewer, clock):
    return auth.ServiceAccountTokens(reviewer, "tessera-system:tessera-backend", ttl_s=10, clock=clock)


@pytest.mark.parametrize(
    ("header", "status"),
    [
        ("Bearer poller-token", 200),
        ("bearer poller-token", 200),
        ("Bearer stranger-token", 403),
        ("Bearer garbage", 401),
        ("Basic cG9sbGVyLXRva2Vu", 401),
        ("", 401),
        ("Bearer ", 401),
    ],
)
def test_only_the_allowed_serviceaccount_gets_through(tokens, header, status):
    assert tokens.check(header).status == status


def test_the_answers_say_why(tokens):
    assert "no bearer token" in tokens.check("").error
    assert "does not accept this token" in tokens.check("Bearer garbage").error
    assert tokens.check("Bearer stranger-token").error == (
        "forbidden: system:serviceaccount:vision:default may not read node reports"
    )


def test_reviews_are_cached_for_a_few_seconds_then_asked_again(tokens, reviewer, clock):
    for _ in range(3):
        assert tokens.check("Bearer poller-token").status == 200
        assert tokens.check("Bearer garbage").status == 401
    assert reviewer.asked == ["poller-token", "garbage"]
    clock.now += 10.5
    assert tokens.check("Bearer poller-token").status == 200
    assert reviewer.asked == ["poller-token", "garbage", "poller-token"]


def test_an_unreachable_api_server_is_a_503_and_is_not_cached(tokens, reviewer):
    reviewer.down = True
    verdict = tokens.check("Bearer poller-token")
    assert verdict.status == 503 and "API server" in verdict.error
    reviewer.down = False
    assert tokens.check("Bearer poller-token").status == 200
    assert reviewer.asked == ["poller-token", "poller-token"]


def test_many_made_up_tokens_do_not_grow_the_cache(tokens):
    for number in range(auth.CACHE_MAX + 10):
        tokens.check(f"Bearer made-up-{number}")
    assert len(tokens._cache) <= auth.CACHE_MAX


@pytest.mark.parametrize("allowed", ["tessera-backend", ":tessera-backend", "tessera-system:", "a:b:c"])
def test_the_allowed_serviceaccount_must_be_namespace_and_name(allowed, reviewer):
    with pytest.raises(ValueError, match="NAMESPACE:NAME"):
        auth.ServiceAccountTokens(reviewer, allowed)


def test_the_dev_only_static_token_needs_debug_or_an_explicit_allowance():
    assert auth.dev_auth_refusal(auth.SERVICEACCOUNT, debug=False, allowed=False) == ""
    assert auth.ALLOW_DEV_ENV in auth.dev_auth_refusal(auth.DEV_STATIC_TOKEN, debug=False, allowed=False)
    assert auth.dev_auth_refusal(auth.DEV_STATIC_TOKEN, debug=True, allowed=False) == ""
    assert auth.dev_auth_refusal(auth.DEV_STATIC_TOKEN, debug=False, allowed=True) == ""


def test_the_agent_command_line(monkeypatch, tmp_path, capsys):
    for name in (
        "TESSERA_AGENT_LISTEN",
        "TESSERA_AGENT_AUTH",
        "TESSERA_AGENT_ALLOWED_SERVICEACCOUNT",
        "DEBUG",
        auth.ALLOW_DEV_ENV,
    ):
        monkeypatch.delenv(name, raising=False)
    assert not DEFAULT_LISTEN.endswith(":9400")  # dcgm-exporter's port
    args = _args([])
    assert (args.auth, args.allow_serviceaccount, args.audience) == (
        "serviceaccount",
        "tessera-system:tessera-backend",
        "tessera-node-agent",
    )
    monkeypatch.setenv("TESSERA_AGENT_ALLOWED_SERVICEACCOUNT", "ops:poller")
    assert _args([]).allow_serviceaccount == "ops:poller"
    for refused in (
        ["--allow-serviceaccount", "poller"],
        ["--auth", "dev-static-token"],
        ["--auth", "dev-static-token", "--token-file", str(tmp_path / "token")],
    ):
        with pytest.raises(SystemExit):
            _args(refused)
    assert "TESSERA_ALLOW_DEV_AGENT_AUTH" in capsys.readouterr().err
    monkeypatch.setenv("DEBUG", "1")
    assert _args(["--auth", "dev-static-token", "--token-file", "t"]).auth == "dev-static-token"


def _serve(checker):
    report = {"gpus": [{"index": 0, "utilisation_pct": 50, "memory_used_mib": 1024}]}
    server = make_server(("127.0.0.1", 0), checker, lambda: report)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    return server, f"http://127.0.0.1:{server.server_address[1]}"


def _get(url, token):
    request = urllib.request.Request(f"{url}/v1/report", headers={"Authorization": f"Bearer {token}"})
    try:
        with urllib.request.urlopen(request, timeout=5) as response:
            return response.status, json.loads(response.read())
    except urllib.error.HTTPError as error:
        return error.code, json.loads(error.read())


def test_over_http_the_poller_reads_and_others_are_told_why(tokens, reviewer, tmp_path):
    server, url = _serve(tokens)
    try:
        path = tmp_path / "token"
        path.write_text("poller-token\n")
        assert set(AgentHttpTelemetry(token_file(str(path))).read([("gpu-01", url)])) == {"gpu-01"}
        assert _get(url, "stranger-token")[0] == 403
        status, body = _get(url, "garbage")
        assert status == 401 and "does not accept this token" in body["error"]
        reviewer.down = True
        assert _get(url, "new-token")[0] == 503
        path.write_text("stranger-token")  # a rotated file is read again at the next poll
        assert AgentHttpTelemetry(token_file(str(path))).read([("gpu-01", url)]) == {}
    finally:
        server.shutdown()
        server.server_close()


def test_without_its_token_file_the_poller_reads_nothing_and_says_so(tmp_path, caplog):
    telemetry = AgentHttpTelemetry(token_file(str(tmp_path / "missing")))
    assert telemetry.read([("gpu-01", "http://127.0.0.1:9")]) == {}
    assert "cannot read the token" in caplog.text
    assert telemetry.read([("gpu-01", "")]) == {}  # no agent to ask: no token needed
