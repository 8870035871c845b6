"""Agreement between the ranks of a multi-process job.

Every rank must decide to save at the same step (a sharded save is a collective: a rank that does
not join hangs the others), and rank 0 confirms once, after every rank has saved. One process
agrees with itself; `tessera_checkpoint.torch.distributed()` agrees over torch.distributed.
"""

from __future__ import annotations

import os
from collections.abc import Mapping, Sequence
from typing import Protocol


class Coordinator(Protocol):
    """How ranks agree; `is_leader` is the one rank that writes the manifest and confirms."""

    is_leader: bool

    def agree(self, flags: Sequence[bool]) -> list[bool]:
        """Each flag OR-ed over all ranks (every rank calls this at the same step)."""
        ...

    def barrier(self) -> None:
        """Return once every rank has got here."""
        ...


class Solo:
    """A single process, or ranks that do not share decisions: each decides alone.

    The leader is RANK 0 (as torchrun sets it) or the only process."""

    def __init__(self, env: Mapping[str, str] | None = None) -> None:
        env = os.environ if env is None else env
        self.is_leader = env.get("RANK", "0") in ("", "0")

    def agree(self, flags: Sequence[bool]) -> list[bool]:
        return list(flags)

    def barrier(self) -> None:
        return None
