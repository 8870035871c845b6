"""Checkpointing for training jobs that Tessera schedules (CONTRACTS.md, "Checkpoint channel").

    from tessera_checkpoint import Checkpointer

    ckpt = Checkpointer.from_env(dir="/ckpt")
    start = ckpt.resume(load=restore)              # steps already done
    for step in range(start + 1, total + 1):
        train_one_step()
        if ckpt.should_save(step): save(ckpt.path_for(step)); ckpt.saved(step, ckpt.path_for(step))

Standard library only. Hooks: `tessera_checkpoint.torch` (plain PyTorch loops, torch.distributed),
`tessera_checkpoint.lightning` (a Lightning callback), `tessera_checkpoint.hf` (a Hugging Face
TrainerCallback); each needs its library and says so when it is missing.
"""

from tessera_checkpoint.checkpointer import Checkpointer
from tessera_checkpoint.confirm import PERIODIC, Answer, Confirmation, Confirmer
from tessera_checkpoint.coordination import Coordinator, Solo
from tessera_checkpoint.manifest import Saved, latest
from tessera_checkpoint.podinfo import RequestWatcher, parse_annotations
from tessera_checkpoint.stop import StopSignal

__version__ = "0.1.0"
__all__ = ["PERIODIC", "Answer", "Checkpointer", "Confirmation", "Confirmer", "Coordinator", "RequestWatcher",
           "Saved", "Solo", "StopSignal", "latest", "parse_annotations"]
