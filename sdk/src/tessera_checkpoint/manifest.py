"""Which checkpoint to restart from: a small JSON manifest beside the checkpoints.

The loop names a checkpoint in the manifest only after it is written (`Checkpointer.saved`), and
the manifest is replaced atomically (write, fsync, rename), so a pod killed mid-save restarts from
the previous complete checkpoint, never from a half-written one. A few entries are kept, so that a
checkpoint file deleted by hand (or lost with a node's disk) falls back to the one before it.
"""

from __future__ import annotations

import json
import logging
import os
from dataclasses import asdict, dataclass
from pathlib import Path

log = logging.getLogger("tessera_checkpoint")

MANIFEST = "tessera-checkpoints.json"
KEEP = 10


@dataclass(frozen=True)
class Saved:
    """One checkpoint: the step done, the training seconds over all runs, where it is, which
    request it answered ("periodic" for the job's own)."""

    step: int
    progress_s: float
    path: str
    saved_at: str
    checkpoint_id: str


def read(directory: str | Path) -> list[Saved]:
    """The manifest's entries, newest first; [] when there is none or it cannot be read."""
    path = Path(directory) / MANIFEST
    try:
        entries = json.loads(path.read_text())["checkpoints"]
        return [Saved(**entry) for entry in entries]
    except FileNotFoundError:
        return []
    except (OSError, ValueError, KeyError, TypeError) as problem:
        log.warning("ignoring the unreadable checkpoint manifest %s: %s", path, problem)
        return []


def latest(directory: str | Path) -> Saved | None:
    """The newest checkpoint whose file (or folder) still exists."""
    for saved in read(directory):
        if Path(saved.path).exists():
            return saved
        log.warning("checkpoint %s of step %d is gone; trying an older one", saved.path, saved.step)
    return None


def record(directory: str | Path, saved: Saved) -> None:
    """Put `saved` first in the manifest (replacing an entry of the same step), atomically."""
    folder = Path(directory)
    folder.mkdir(parents=True, exist_ok=True)
    entries = [saved] + [old for old in read(folder) if old.step != saved.step]
    text = json.dumps({"checkpoints": [asdict(entry) for entry in entries[:KEEP]]}, indent=1)
    atomic_write(folder / MANIFEST, text.encode())


def atomic_write(path: Path, data: bytes) -> None:
    """Write `data` to `path` so that a reader sees the old content or the new, whole."""
    partial = path.with_name(f".{path.name}.{os.getpid()}.partial")
    with open(partial, "wb") as out:
        out.write(data)
        out.flush()
        os.fsync(out.fileno())
    os.replace(partial, path)
    try:  # the rename itself is durable once the folder is synced (not possible everywhere)
        folder = os.open(path.parent, os.O_RDONLY)
    except OSError:
        return
    try:
        os.fsync(folder)
    except OSError:
        pass
    finally:
        os.close(folder)
