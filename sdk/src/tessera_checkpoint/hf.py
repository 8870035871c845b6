"""A Hugging Face `Trainer` callback: asks the Trainer to save when Tessera asks or SIGTERM comes,
and confirms every checkpoint the Trainer saves (its own schedule's too, as "periodic").

    from tessera_checkpoint.hf import TesseraCallback
    tessera = TesseraCallback(dir=args.output_dir)
    trainer = Trainer(..., args=args, callbacks=[tessera])
    trainer.train(resume_from_checkpoint=tessera.resume_path())
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

from tessera_checkpoint._optional import require
from tessera_checkpoint.checkpointer import Checkpointer

_transformers: Any = require("tessera_checkpoint.hf", ("transformers", "transformers"))


class TesseraCallback(_transformers.TrainerCallback):
    def __init__(self, dir: str | Path, *, checkpointer: Checkpointer | None = None) -> None:
        self.ckpt = checkpointer or Checkpointer.from_env(dir=dir, exit_on_stop=False)

    def resume_path(self) -> str | None:
        """The checkpoint-N folder to pass as trainer.train(resume_from_checkpoint=...), or None."""
        return self.ckpt.latest.path if self.ckpt.latest else None

    def on_train_begin(self, args: Any, state: Any, control: Any, **kwargs: Any) -> None:
        if int(os.environ.get("WORLD_SIZE", "1")) > 1:  # the Trainer has set up torch.distributed by now
            from tessera_checkpoint.torch import distributed
            self.ckpt.coordinator = distributed()

    def on_step_end(self, args: Any, state: Any, control: Any, **kwargs: Any) -> Any:
        if self.ckpt.should_save(int(state.global_step)):
            control.should_save = True
        if self.ckpt.stopping:
            control.should_training_stop = True
        return control

    def on_save(self, args: Any, state: Any, control: Any, **kwargs: Any) -> Any:
        step = int(state.global_step)
        self.ckpt.saved(step, os.path.join(args.output_dir, f"checkpoint-{step}"))  # the Trainer's own name
        return control
