"""examples/training/train.py preempted twice, for real: a checkpoint request through the annotations
file, SIGTERM mid-run, restarts from the checkpoint folder. No step is lost beyond the last
checkpoint, each run resumes exactly where the last one saved, and the final weights are those of
a run never interrupted. CPU only, standard library only (the SDK from sdk/src)."""

import importlib.util
import json
import os
import signal
import subprocess
import sys
import threading
import time

from tessera_checkpoint import latest
from tests.hygiene.repo import ROOT
from tests.sdk.loopback_endpoint import Endpoint

EXAMPLE = ROOT / "examples" / "training" / "train.py"
STEPS = 300


def reference_weights() -> dict:
    spec = importlib.util.spec_from_file_location("train_example", EXAMPLE)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    state = {"w": 0.0, "b": 0.0}
    for step in range(1, STEPS + 1):
        module.train_step(state, step)
    return state


class Run:
    """The example in a subprocess, its stdout lines collected as they come."""

    def __init__(self, env: dict, folder):
        self.lines: list[str] = []
        self.process = subprocess.Popen(
            [sys.executable, str(EXAMPLE), "--dir", str(folder), "--steps", str(STEPS), "--step-time", "0.01"],
            env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        self.reader = threading.Thread(target=self._read, daemon=True)
        self.reader.start()

    def _read(self):
        for line in self.process.stdout:
            self.lines.append(line.strip())

    def steps(self) -> list[int]:
        return [int(line.split()[1]) for line in self.lines if line.startswith("step ")]

    def wait_for(self, condition, limit_s=60.0):
        deadline = time.monotonic() + limit_s
        while not condition():
            assert self.process.poll() is None or condition(), f"exited early: {self.lines[-3:]}"
            assert time.monotonic() < deadline, f"timed out; last lines {self.lines[-3:]}"
            time.sleep(0.02)

    def finish(self, limit_s=60.0) -> int:
        code = self.process.wait(timeout=limit_s)
        self.reader.join(timeout=10)
        return code


def test_the_example_resumes_after_preemption_without_losing_a_step(tmp_path):
    podinfo, folder = tmp_path / "podinfo", tmp_path / "ckpt"
    podinfo.mkdir()
    (tmp_path / "token").write_text("pod-token")
    annotations = podinfo / "annotations"
    with Endpoint() as endpoint:
        env = {**os.environ, "PYTHONPATH": str(ROOT / "sdk" / "src"), "TESSERA_PODINFO_DIR": str(podinfo),
               "TESSERA_CHECKPOINT_URL": endpoint.url, "TESSERA_CHECKPOINT_TOKEN_FILE": str(tmp_path / "token")}
        # Run 1: Tessera asks for a checkpoint (interval), then preempts with SIGTERM.
        first = Run(env, folder)
        first.wait_for(lambda: len(first.steps()) >= 20)
        annotations.write_text('tessera.io/checkpoint-reason="interval"\ntessera.io/checkpoint-request="interval-7"\n')
        first.wait_for(lambda: len(endpoint.received) == 1)
        first.wait_for(lambda: first.steps()[-1] >= endpoint.received[0]["step"] + 10)
        first.process.send_signal(signal.SIGTERM)
        assert first.finish() == 0, first.process.stderr.read()
        asked, at_sigterm = endpoint.received
        assert asked["checkpoint_id"] == "interval-7" and at_sigterm["checkpoint_id"] == "periodic"
        assert at_sigterm["step"] == first.steps()[-1] > asked["step"]  # nothing trained after the last save
        assert latest(folder).step == at_sigterm["step"]

        # Run 2 (a new container; the old request still in the file): resumes, is preempted again.
        second = Run(env, folder)
        second.wait_for(lambda: len(second.steps()) >= 15)
        second.process.send_signal(signal.SIGTERM)
        assert second.finish() == 0
        assert second.lines[0] == f"start {at_sigterm['step']}"
        assert second.steps()[0] == at_sigterm["step"] + 1
        third_save = endpoint.received[2]
        assert len(endpoint.received) == 3, "interval-7 was answered already: not saved again"
        assert third_save["checkpoint_id"] == "periodic" and third_save["step"] == second.steps()[-1]
        assert third_save["progress_s"] > at_sigterm["progress_s"]  # training time adds up over runs

        # Run 3: resumes from run 2's checkpoint and finishes.
        third = Run(env, folder)
        assert third.finish() == 0
    assert third.lines[0] == f"start {third_save['step']}" and third.steps()[0] == third_save["step"] + 1
    trained = first.steps() + second.steps() + third.steps()
    assert trained == list(range(1, STEPS + 1)), "every step exactly once: none lost, none repeated"
    assert json.loads(third.lines[-1].removeprefix("done ")) == reference_weights()
