"""Confirmations against a real HTTP server on loopback: each answer of the contract, and retries."""

import socket

import pytest

from tessera_checkpoint.confirm import Confirmation, Confirmer, describe
from tests.sdk.loopback_endpoint import Endpoint

SAVED = Confirmation(checkpoint_id="interval-7", step=1200, progress_s=3600.5, saved_at="2026-12-04T12:00:00.000Z",
                     path="/ckpt/step-00001200.pt")


class NoWait:
    """A clock that moves only when the confirmer sleeps, so retries take no real time."""

    def __init__(self):
        self.now, self.sleeps = 0.0, []

    def clock(self):
        return self.now

    def sleep(self, seconds):
        self.sleeps.append(seconds)
        self.now += seconds


@pytest.fixture
def token(tmp_path):
    path = tmp_path / "token"
    path.write_text("pod-token-123\n")  # a Secret's file may end in a newline
    return path


def confirmer(url, token, **options):
    wait = NoWait()
    return Confirmer(url, token, sleep=wait.sleep, clock=wait.clock, **options), wait


def test_it_posts_the_contract_body_with_the_pods_token(token):
    with Endpoint() as endpoint:
        answer = confirmer(endpoint.url, token)[0].confirm(SAVED)
    assert (answer.status, answer.attempts, answer.recorded) == (201, 1, True)
    assert endpoint.received == [{"checkpoint_id": "interval-7", "step": 1200, "progress_s": 3600.5,
                                  "saved_at": "2026-12-04T12:00:00.000Z", "path": "/ckpt/step-00001200.pt"}]
    assert endpoint.headers[0]["Authorization"] == "Bearer pod-token-123"
    assert endpoint.headers[0]["Content-Type"] == "application/json"


@pytest.mark.parametrize("status, recorded, meaning", [
    (200, True, "already recorded"), (400, False, "a field is bad"), (401, False, "run has ended"),
    (409, False, "already confirmed with other values")])
def test_an_answer_below_500_is_final_and_never_retried(token, status, recorded, meaning):
    with Endpoint([(status, '{"detail": "x"}')]) as endpoint:
        answer, wait = confirmer(endpoint.url, token)
        answer = answer.confirm(SAVED)
    assert (answer.status, answer.attempts, answer.recorded) == (status, 1, recorded)
    assert len(endpoint.received) == 1 and wait.sleeps == []
    assert meaning in describe(answer)


def test_a_5xx_is_retried_with_backoff_until_it_is_recorded(token):
    with Endpoint([(503, "busy"), (500, "oops")]) as endpoint:
        answer, wait = confirmer(endpoint.url, token)
        answer = answer.confirm(SAVED)
    assert (answer.status, answer.attempts) == (201, 3)
    assert wait.sleeps == [0.5, 1.0]
    assert endpoint.received == [endpoint.received[0]] * 3  # the very same body each time


def test_it_gives_up_on_a_server_down_at_its_deadline(token):
    with socket.socket() as unused:
        unused.bind(("127.0.0.1", 0))
        url = f"http://127.0.0.1:{unused.getsockname()[1]}/"  # bound, not listening: refused
        answer, wait = confirmer(url, token, deadline_s=10)
        answer = answer.confirm(SAVED)
    assert answer.status == 0 and answer.attempts == 5 and wait.sleeps == [0.5, 1.0, 2.0, 4.0]  # 8 more would pass 10
    assert "not delivered" in describe(answer)


def test_a_missing_token_file_is_reported_not_raised(tmp_path):
    answer = confirmer("http://127.0.0.1:9/", tmp_path / "absent", deadline_s=0)[0].confirm(SAVED)
    assert answer.status == 0 and "cannot read the checkpoint token" in answer.body
