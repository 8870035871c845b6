"""The Checkpointer's decisions: when to save, what id to confirm, where to resume, when to exit."""

import os
import signal

import pytest

from tessera_checkpoint import Checkpointer, Confirmer, RequestWatcher, StopSignal, latest
from tessera_checkpoint.manifest import MANIFEST
from tests.sdk.loopback_endpoint import Endpoint


class Clock:
    def __init__(self, now=100.0):
        self.now = now

    def __call__(self):
        return self.now


@pytest.fixture
def pod(tmp_path):
    """What Tessera mounts into a pod: the annotations file and the token."""
    (tmp_path / "podinfo").mkdir()
    (tmp_path / "token").write_text("tok")
    return tmp_path


def ask(pod, checkpoint_id):
    (pod / "podinfo" / "annotations").write_text(f'tessera.io/checkpoint-request="{checkpoint_id}"\n')


def make(pod, endpoint, clock=None, **options):
    clock = clock or Clock()
    return Checkpointer(pod / "ckpt", watcher=RequestWatcher(pod / "podinfo" / "annotations", interval_s=0),
                        confirmer=Confirmer(endpoint.url, pod / "token"), clock=clock, **options)


def save(ckpt, step):
    path = ckpt.path_for(step, ".json")
    with open(path, "w") as out:
        out.write(str(step))
    return ckpt.saved(step, path)


def test_a_request_is_saved_and_confirmed_with_its_id_step_and_training_time(pod):
    clock = Clock()
    with Endpoint() as endpoint:
        ckpt = make(pod, endpoint, clock)
        assert ckpt.resume() == 0
        assert not ckpt.should_save(1)
        ask(pod, "interval-7")
        clock.now += 42.5
        assert ckpt.should_save(2)
        answer = save(ckpt, 2)
        assert not ckpt.should_save(3)  # answered: not asked again
    assert answer.status == 201
    [body] = endpoint.received
    assert body | {"saved_at": None} == {"checkpoint_id": "interval-7", "step": 2, "progress_s": 42.5,
                                         "path": str(pod / "ckpt" / "step-00000002.json"), "saved_at": None}
    assert body["saved_at"].endswith("Z")
    assert latest(pod / "ckpt").checkpoint_id == "interval-7"


def test_its_own_checkpoints_are_periodic_and_resume_adds_up_training_time(pod):
    clock = Clock()
    with Endpoint() as endpoint:
        first = make(pod, endpoint, clock, every_steps=10)
        first.resume()
        assert [step for step in range(1, 25) if first.should_save(step)] == [10, 20]
        clock.now += 100
        save(first, 20)
        clock.now += 500  # work after the checkpoint: lost with the pod
        second = make(pod, endpoint, clock, every_s=60)
        loaded = []
        assert second.resume(load=loaded.append) == 20
        assert loaded == [str(pod / "ckpt" / "step-00000020.json")]
        clock.now += 60
        assert second.should_save(21)
        save(second, 21)
    assert [(b["checkpoint_id"], b["step"], b["progress_s"]) for b in endpoint.received] == [
        ("periodic", 20, 100.0), ("periodic", 21, 160.0)]


def test_sigterm_saves_the_step_in_hand_confirms_the_pending_request_and_exits(pod):
    stop = StopSignal().install()
    try:
        with Endpoint() as endpoint:
            ckpt = make(pod, endpoint, stop=stop)
            ask(pod, "preempt-9")
            os.kill(os.getpid(), signal.SIGTERM)  # Tessera asked, then deleted the pod
            assert stop.requested and ckpt.stopping
            assert ckpt.should_save(5)
            with pytest.raises(SystemExit) as exited:
                save(ckpt, 5)
    finally:
        stop.uninstall()
    assert exited.value.code == 0
    assert [(b["checkpoint_id"], b["step"]) for b in endpoint.received] == [("preempt-9", 5)]


def test_sigterm_right_after_a_save_exits_without_saving_again(pod):
    with Endpoint() as endpoint:
        ckpt = make(pod, endpoint)
        ask(pod, "preempt-9")
        assert ckpt.should_save(5)
        save(ckpt, 5)
        ckpt.stop._handle(signal.SIGTERM, None)
        with pytest.raises(SystemExit):
            ckpt.should_save(5)
    assert len(endpoint.received) == 1


def test_without_exit_on_stop_the_loop_is_told_to_stop(pod):
    with Endpoint() as endpoint:
        ckpt = make(pod, endpoint, exit_on_stop=False)
        ckpt.stop._handle(signal.SIGTERM, None)
        assert ckpt.should_save(3) and ckpt.stopping
        save(ckpt, 3)  # returns: the caller stops
        assert not ckpt.should_save(3)


def test_a_refused_confirmation_does_not_stop_training(pod):
    with Endpoint([(409, '{"detail": "already confirmed"}')]) as endpoint:
        ckpt = make(pod, endpoint)
        ask(pod, "interval-7")
        assert ckpt.should_save(1)
        assert save(ckpt, 1).status == 409
        assert ckpt.last_answer.status == 409


def test_the_latest_checkpoint_falls_back_when_its_file_is_gone(pod):
    ckpt = Checkpointer(pod / "ckpt", clock=Clock())
    for step in (10, 20):
        save(ckpt, step)
    os.remove(ckpt.path_for(20, ".json"))
    assert Checkpointer(pod / "ckpt").resume() == 10
    (pod / "ckpt" / MANIFEST).write_text("{not json")
    assert Checkpointer(pod / "ckpt").resume() == 0


class Ranks:
    """Two ranks' flags, as an all-reduce would combine them: this rank and a stand-in other."""

    def __init__(self, leader, other=(False, False)):
        self.is_leader, self.other, self.barriers = leader, other, 0

    def agree(self, flags):
        return [mine or theirs for mine, theirs in zip(flags, self.other, strict=True)]

    def barrier(self):
        self.barriers += 1


def test_ranks_save_when_any_rank_is_asked_and_only_the_leader_confirms(pod):
    with Endpoint() as endpoint:
        follower = make(pod, endpoint, coordinator=Ranks(leader=False, other=(True, False)))
        assert follower.should_save(4)  # the other rank saw the request first
        save(follower, 4)
        assert endpoint.received == [] and follower.coordinator.barriers == 1
        leader = make(pod, endpoint, coordinator=Ranks(leader=True))
        ask(pod, "interval-3")
        assert leader.should_save(5)
        save(leader, 5)
    assert [(b["checkpoint_id"], b["step"]) for b in endpoint.received] == [("interval-3", 5)]


def test_from_env_wires_what_tessera_mounts(pod):
    env = {"TESSERA_PODINFO_DIR": str(pod / "podinfo"), "TESSERA_CHECKPOINT_URL": "http://127.0.0.1:9/",
           "TESSERA_CHECKPOINT_TOKEN_FILE": str(pod / "token"), "RANK": "1"}
    ckpt = Checkpointer.from_env(pod / "ckpt", env=env, handle_sigterm=False)
    assert ckpt.watcher.path == pod / "podinfo" / "annotations"
    assert ckpt.confirmer.url == "http://127.0.0.1:9/" and not ckpt.coordinator.is_leader
    bare = Checkpointer.from_env(pod / "ckpt", env={}, handle_sigterm=False)
    assert bare.watcher is None and bare.confirmer is None and bare.coordinator.is_leader


def test_from_env_finds_a_native_pods_channel_volume(pod):
    """A pod Tessera did not create has no TESSERA_* variables: its owner mounts one volume with the
    annotations (downward API) and Tessera's Secret (url, token) (CONTRACTS.md, "Native pods")."""
    channel = pod / "channel"
    channel.mkdir()
    (channel / "annotations").write_text("")
    only_annotations = Checkpointer.from_env(pod / "ckpt", env={"TESSERA_CHANNEL_DIR": str(channel)},
                                             handle_sigterm=False)
    assert only_annotations.watcher.path == channel / "annotations" and only_annotations.confirmer is None
    (channel / "url").write_text("http://tessera.example/api/v1/checkpoints/\n")
    (channel / "token").write_text("tok\n")
    ckpt = Checkpointer.from_env(pod / "ckpt", env={"TESSERA_CHANNEL_DIR": str(channel)}, handle_sigterm=False)
    assert ckpt.confirmer.url == "http://tessera.example/api/v1/checkpoints/"
    assert ckpt.confirmer.token_file == channel / "token"
    explicit = {"TESSERA_CHANNEL_DIR": str(channel), "TESSERA_CHECKPOINT_URL": "http://127.0.0.1:9/",
                "TESSERA_CHECKPOINT_TOKEN_FILE": str(pod / "token")}
    assert Checkpointer.from_env(pod / "ckpt", env=explicit, handle_sigterm=False).confirmer.url == "http://127.0.0.1:9/"


def test_the_signal_handler_only_sets_a_flag(monkeypatch):
    stop = StopSignal()
    monkeypatch.setattr("builtins.open", None)  # any I/O in the handler would raise
    stop._handle(signal.SIGTERM, None)
    stop._handle(signal.SIGINT, None)
    assert stop.received == signal.SIGTERM and stop.at is not None


def test_after_sigterm_a_confirmation_gives_up_in_time_for_a_clean_exit(pod):
    sleeps = []
    clock = Clock()

    def sleep(seconds):
        sleeps.append(seconds)
        clock.now += seconds

    down = Confirmer("http://127.0.0.1:9/", pod / "token", sleep=sleep, clock=clock)  # port 9: refused
    ckpt = Checkpointer(pod / "ckpt", confirmer=down, clock=clock)
    ckpt.stop._handle(signal.SIGTERM, None)
    assert ckpt.should_save(1)
    with pytest.raises(SystemExit):
        save(ckpt, 1)
    assert sum(sleeps) <= 10 and ckpt.last_answer.status == 0  # the grace leaves 15 s after the save
    sleeps.clear()
    running = Checkpointer(pod / "other", confirmer=down, clock=clock, every_steps=1)
    assert running.should_save(1)
    assert save(running, 1).status == 0 and 10 < sum(sleeps) <= 30  # while training: up to 30 s
