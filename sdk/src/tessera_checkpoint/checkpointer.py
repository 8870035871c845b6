"""The three lines a training loop uses:

    ckpt = Checkpointer.from_env(dir="/ckpt")
    start = ckpt.resume(load=lambda path: restore(path))   # steps already done; 0 on a fresh start
    ...  # after each step, with the number of steps done:
    if ckpt.should_save(step): save(ckpt.path_for(step)); ckpt.saved(step, ckpt.path_for(step))

`should_save` is true when Tessera asked (a new checkpoint-request annotation), when SIGTERM came
(then `saved` exits the process once the checkpoint is confirmed), or when the job's own period
(`every_steps`, `every_s`) is due. `saved` records the checkpoint in the manifest and confirms it to
Tessera with its step, training time and request id.
"""

from __future__ import annotations

import logging
import os
import time
from collections.abc import Mapping
from pathlib import Path
from typing import Callable

from tessera_checkpoint import manifest
from tessera_checkpoint.confirm import PERIODIC, Answer, Confirmation, Confirmer, describe, utc_now
from tessera_checkpoint.coordination import Coordinator, Solo
from tessera_checkpoint.podinfo import RequestWatcher
from tessera_checkpoint.stop import StopSignal

log = logging.getLogger("tessera_checkpoint")

# After SIGTERM the pod has its save time + 15 s (CONTRACTS.md): the confirmation gets at most 10 s
# of retries, so that the process still exits before the kubelet's SIGKILL.
STOPPING_CONFIRM_S = 10.0
CHANNEL_DIR = "/var/run/tessera"  # where a native pod's owner mounts its channel volume


def channel_env(env: Mapping[str, str]) -> dict[str, str]:
    """The environment, with what a native pod's channel volume says where the environment says
    nothing (CONTRACTS.md, "Native pods"): a pod Tessera did not create gets no variables, but its
    owner mounts one volume at $TESSERA_CHANNEL_DIR (default /var/run/tessera) holding `annotations`
    (downward API) and, once Tessera has bound the job, `url` and `token` (its Secret)."""
    found = dict(env)
    channel = Path(env.get("TESSERA_CHANNEL_DIR") or CHANNEL_DIR)
    if not found.get("TESSERA_PODINFO_DIR") and (channel / "annotations").exists():
        found["TESSERA_PODINFO_DIR"] = str(channel)
    url_file = channel / "url"
    if not (found.get("TESSERA_CHECKPOINT_URL") and found.get("TESSERA_CHECKPOINT_TOKEN_FILE")) and url_file.is_file():
        found["TESSERA_CHECKPOINT_URL"] = url_file.read_text().strip()
        found["TESSERA_CHECKPOINT_TOKEN_FILE"] = str(channel / "token")
    return found


class Checkpointer:
    def __init__(self, directory: str | Path, *, watcher: RequestWatcher | None = None,
                 confirmer: Confirmer | None = None, stop: StopSignal | None = None,
                 coordinator: Coordinator | None = None, every_steps: int | None = None,
                 every_s: float | None = None, exit_on_stop: bool = True,
                 clock: Callable[[], float] = time.monotonic) -> None:
        if every_steps is not None and every_steps < 1:
            raise ValueError("every_steps must be at least 1")
        self.directory = Path(directory)
        self.directory.mkdir(parents=True, exist_ok=True)  # path_for's paths must be writable as given
        self.watcher, self.confirmer = watcher, confirmer
        self.stop = stop or StopSignal()
        self.coordinator: Coordinator = coordinator or Solo()
        self.every_steps, self.every_s, self.exit_on_stop = every_steps, every_s, exit_on_stop
        self.latest: manifest.Saved | None = manifest.latest(self.directory)
        self.last_answer: Answer | None = None
        self._clock = clock
        self._base_progress_s = self.latest.progress_s if self.latest else 0.0
        self._run_started = clock()
        self._last_saved_step: int | None = self.latest.step if self.latest else None
        self._last_saved_at = self._run_started
        self._pending: str | None = None  # a request id not yet answered
        self._stopping = False

    @classmethod
    def from_env(cls, dir: str | Path, *, env: Mapping[str, str] | None = None, handle_sigterm: bool = True,
                 coordinator: Coordinator | None = None, every_steps: int | None = None,
                 every_s: float | None = None, exit_on_stop: bool = True) -> Checkpointer:
        """A Checkpointer wired as Tessera sets up a pod (TESSERA_PODINFO_DIR, TESSERA_CHECKPOINT_URL,
        TESSERA_CHECKPOINT_TOKEN_FILE), or as a native pod's channel volume says (`channel_env`).
        Outside Tessera neither is there: no requests are watched and nothing is confirmed, but
        SIGTERM, the period and the manifest work the same."""
        env = channel_env(os.environ if env is None else env)
        watcher = confirmer = None
        if env.get("TESSERA_PODINFO_DIR"):
            # A restarted container still sees the last request: not new if a checkpoint answered it.
            answered = next((saved.checkpoint_id for saved in manifest.read(dir) if saved.checkpoint_id != PERIODIC),
                            None)
            watcher = RequestWatcher(Path(env["TESSERA_PODINFO_DIR"]) / "annotations", seen=answered)
        if env.get("TESSERA_CHECKPOINT_URL") and env.get("TESSERA_CHECKPOINT_TOKEN_FILE"):
            confirmer = Confirmer(env["TESSERA_CHECKPOINT_URL"], env["TESSERA_CHECKPOINT_TOKEN_FILE"])
        if coordinator is None:
            if env.get("WORLD_SIZE", "1") not in ("", "1"):
                log.warning("WORLD_SIZE is %s but no coordinator was given: ranks may decide to save at different "
                            "steps; pass coordinator=tessera_checkpoint.torch.distributed()", env["WORLD_SIZE"])
            coordinator = Solo(env)
        stop = StopSignal().install() if handle_sigterm else StopSignal()
        return cls(dir, watcher=watcher, confirmer=confirmer, stop=stop, coordinator=coordinator,
                   every_steps=every_steps, every_s=every_s, exit_on_stop=exit_on_stop)

    # -- restart ------------------------------------------------------------------------------------

    def resume(self, load: Callable[[str], object] | None = None) -> int:
        """The number of steps the latest checkpoint holds (0 without one); `load(path)` restores it."""
        self._run_started = self._last_saved_at = self._clock()
        if self.latest is None:
            return 0
        if load is not None:
            load(self.latest.path)
        log.info("resuming from %s: step %d, %.0f s of training", self.latest.path, self.latest.step,
                 self.latest.progress_s)
        return self.latest.step

    def path_for(self, step: int, suffix: str = ".pt") -> str:
        """A checkpoint's path in the directory: step-00001200.pt (sorted by name = by step)."""
        return str(self.directory / f"step-{step:08d}{suffix}")

    def progress_s(self) -> float:
        """Training seconds over all runs: the checkpoint's, plus this run's."""
        return self._base_progress_s + (self._clock() - self._run_started)

    @property
    def stopping(self) -> bool:
        """SIGTERM came (on any rank, once agreed at a `should_save`): save if needed, then exit."""
        return self._stopping or self.stop.requested

    # -- the loop -----------------------------------------------------------------------------------

    def should_save(self, step: int) -> bool:
        """Whether to save now, `step` steps done. Every rank calls it at every step."""
        request = self.watcher.poll() if self.watcher else None
        if request is not None:
            log.info("checkpoint requested: %s (%s)", request, self.watcher.reason if self.watcher else "")
            self._pending = request
        nothing_new = step == self._last_saved_step
        wanted = not nothing_new and (self._pending is not None or self.stop.requested or self._due(step))
        save, stop = self.coordinator.agree([wanted, self.stop.requested])
        self._stopping = self._stopping or stop
        if stop and not save and self.exit_on_stop:
            self._exit(step)  # SIGTERM with this very step already saved: nothing to add
        return save

    def _due(self, step: int) -> bool:
        by_steps = self.every_steps is not None and step % self.every_steps == 0
        by_time = self.every_s is not None and self._clock() - self._last_saved_at >= self.every_s
        return by_steps or by_time

    def saved(self, step: int, path: str | Path) -> Answer | None:
        """The checkpoint of `step` is written (by this rank): record and confirm it. Every rank calls
        it; the leader confirms after all have. Exits the process when stopping (`exit_on_stop`)."""
        self.coordinator.barrier()
        checkpoint_id = self._pending or PERIODIC
        entry = manifest.Saved(step=step, progress_s=round(self.progress_s(), 3), path=str(path),
                               saved_at=utc_now(), checkpoint_id=checkpoint_id)
        answer = None
        if self.coordinator.is_leader:
            manifest.record(self.directory, entry)
            answer = self._confirm(entry)
        self.latest, self.last_answer = entry, answer
        self._pending, self._last_saved_step, self._last_saved_at = None, step, self._clock()
        if self.stopping and self.exit_on_stop:
            self._exit(step)
        return answer

    def _confirm(self, entry: manifest.Saved) -> Answer | None:
        if self.confirmer is None:
            return None
        answer = self.confirmer.confirm(Confirmation(
            checkpoint_id=entry.checkpoint_id, step=entry.step, progress_s=entry.progress_s,
            saved_at=entry.saved_at, path=entry.path),
            deadline_s=min(STOPPING_CONFIRM_S, self.confirmer.deadline_s) if self.stopping else None)
        level = logging.INFO if answer.recorded else logging.WARNING
        log.log(level, "checkpoint %s (step %d) confirmation: %s", entry.checkpoint_id, entry.step, describe(answer))
        return answer

    def _exit(self, step: int) -> None:
        self.coordinator.barrier()
        log.info("stopping after SIGTERM; checkpoint of step %s is saved", step)
        raise SystemExit(0)
