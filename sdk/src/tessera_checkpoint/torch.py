"""A plain PyTorch loop, and ranks that agree over torch.distributed.

    import tessera_checkpoint.torch as tc
    ckpt = Checkpointer.from_env(dir="/ckpt", coordinator=tc.distributed())
    start = tc.resume(ckpt, model=model, optimizer=optimizer)
    for step in range(start + 1, total + 1):
        ...
        tc.checkpoint_step(ckpt, step, model=model, optimizer=optimizer)
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from tessera_checkpoint._optional import require
from tessera_checkpoint.checkpointer import Checkpointer
from tessera_checkpoint.coordination import Coordinator, Solo

torch: Any = require("tessera_checkpoint.torch", ("torch", "torch"))


def save_state(path: str | Path, **objects: Any) -> None:
    """torch.save each object's state_dict() (or the object itself: a step, an RNG state) under its
    name, into a temporary file renamed into place, so `path` is whole or absent."""
    state = {name: obj.state_dict() if hasattr(obj, "state_dict") else obj for name, obj in objects.items()}
    target = Path(path)
    target.parent.mkdir(parents=True, exist_ok=True)
    partial = target.with_name(f".{target.name}.{os.getpid()}.partial")
    torch.save(state, partial)
    os.replace(partial, target)


def load_state(path: str | Path, map_location: Any = "cpu", **objects: Any) -> dict[str, Any]:
    """Load a save_state file: each named object gets its load_state_dict(); the whole dict is returned."""
    state: dict[str, Any] = torch.load(path, map_location=map_location)
    for name, obj in objects.items():
        if name not in state:
            raise KeyError(f"checkpoint {path} has no {name!r} (it has {sorted(state)})")
        obj.load_state_dict(state[name])
    return state


def resume(ckpt: Checkpointer, **objects: Any) -> int:
    """Restore the objects from the latest checkpoint; the number of steps it holds (0 without one)."""
    return ckpt.resume(load=lambda path: load_state(path, **objects))


def checkpoint_step(ckpt: Checkpointer, step: int, *, every_rank: bool = False, **objects: Any) -> bool:
    """Save and confirm when due; True if it saved. Data-parallel ranks hold the same state, so only
    the leader writes unless `every_rank` (a sharded model: each rank then needs its own path)."""
    if not ckpt.should_save(step):
        return False
    rank = os.environ.get("RANK", "0")
    path = ckpt.path_for(step, f".rank{rank}.pt" if every_rank else ".pt")
    if every_rank or ckpt.coordinator.is_leader:
        save_state(path, **objects)
    ckpt.saved(step, path)
    return True


class TorchDistributed:
    """Ranks agree with one all-reduce (MAX) of the flags, on the device the backend needs."""

    def __init__(self, group: Any = None) -> None:
        self.group = group
        self.is_leader = torch.distributed.get_rank() == 0

    def _device(self) -> Any:
        if torch.distributed.get_backend(self.group) == "nccl":
            return torch.device("cuda", torch.cuda.current_device())
        return torch.device("cpu")

    def agree(self, flags: Sequence[bool]) -> list[bool]:
        tensor = torch.tensor([int(flag) for flag in flags], dtype=torch.int32, device=self._device())
        torch.distributed.all_reduce(tensor, op=torch.distributed.ReduceOp.MAX, group=self.group)
        return [bool(value) for value in tensor.tolist()]

    def barrier(self) -> None:
        torch.distributed.barrier(group=self.group)


def distributed(group: Any = None) -> Coordinator:
    """Agreement over torch.distributed once it is initialised; a single process otherwise."""
    if torch.distributed.is_available() and torch.distributed.is_initialized():
        return TorchDistributed(group)
    return Solo()
