"""A PyTorch Lightning callback: saves through the Trainer when Tessera asks or SIGTERM comes.

    from tessera_checkpoint.lightning import TesseraCheckpoint
    tessera = TesseraCheckpoint(dir="/ckpt")
    trainer = Trainer(callbacks=[tessera], ...)
    trainer.fit(model, ckpt_path=tessera.resume_path())

Lightning (2.x) also hears SIGTERM: it ends `fit` with SIGTERMException, a SystemExit, at the end of
the batch (or epoch) in which the signal came, after the callbacks' batch-end hooks. So the
callback saves at that batch end, and the process exits; a SIGTERM that comes after the batch-end
hooks is saved from `on_exception`, before the exception leaves `fit`.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any

from tessera_checkpoint._optional import require
from tessera_checkpoint.checkpointer import Checkpointer

_pl: Any = require("tessera_checkpoint.lightning", ("lightning.pytorch", "lightning"),
                   ("pytorch_lightning", "pytorch-lightning"))


class StrategyCoordinator:
    """Ranks agree through the Trainer's strategy (Lightning's own collectives)."""

    def __init__(self, trainer: Any) -> None:
        self.trainer = trainer
        self.is_leader = bool(trainer.is_global_zero)

    def agree(self, flags: Sequence[bool]) -> list[bool]:
        return [bool(self.trainer.strategy.reduce_boolean_decision(flag, all=False)) for flag in flags]

    def barrier(self) -> None:
        self.trainer.strategy.barrier("tessera_checkpoint")


class TesseraCheckpoint(_pl.Callback):
    def __init__(self, dir: str | Path | None = None, *, checkpointer: Checkpointer | None = None,
                 every_steps: int | None = None, every_s: float | None = None) -> None:
        super().__init__()
        if checkpointer is None and dir is None:
            raise ValueError("give the checkpoint folder (dir=...) or a Checkpointer")
        self.ckpt = checkpointer or Checkpointer.from_env(dir=dir or "", every_steps=every_steps, every_s=every_s,
                                                          exit_on_stop=False)

    def resume_path(self) -> str | None:
        """The checkpoint to pass as trainer.fit(ckpt_path=...); None for a fresh start."""
        return self.ckpt.latest.path if self.ckpt.latest else None

    def setup(self, trainer: Any, pl_module: Any, stage: str) -> None:
        if trainer.world_size > 1:
            self.ckpt.coordinator = StrategyCoordinator(trainer)

    def on_train_batch_end(self, trainer: Any, pl_module: Any, outputs: Any, batch: Any, batch_idx: int) -> None:
        self._checkpoint(trainer)
        if self.ckpt.stopping:
            trainer.should_stop = True

    def on_exception(self, trainer: Any, pl_module: Any, exception: BaseException) -> None:
        if self.ckpt.stop.requested:  # Lightning's SIGTERMException: save the step in hand unless saved
            self._checkpoint(trainer)

    def _checkpoint(self, trainer: Any) -> None:
        step = int(trainer.global_step)
        if self.ckpt.should_save(step):
            path = self.ckpt.path_for(step, ".ckpt")
            trainer.save_checkpoint(path)  # every rank calls it; Lightning writes from rank 0
            self.ckpt.saved(step, path)
