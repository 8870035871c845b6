"""SIGTERM means "save now and exit" (the checkpoint contract): the handler only records that it came.

A signal handler runs between two bytecodes of the training loop, maybe inside a write or while a
lock is held, so it does no I/O, takes no lock and logs nothing: it sets an attribute, and the loop
reads it at its next step.
"""

from __future__ import annotations

import signal
import threading
import time
from types import FrameType
from typing import Any


class StopSignal:
    """Whether SIGTERM (or another of `signals`) has come, and when (monotonic clock)."""

    def __init__(self) -> None:
        self.received: int | None = None
        self.at: float | None = None
        self._previous: dict[int, Any] = {}

    @property
    def requested(self) -> bool:
        return self.received is not None

    def _handle(self, signum: int, frame: FrameType | None) -> None:
        if self.received is None:  # the first one counts; a second SIGTERM changes nothing
            self.received, self.at = signum, time.monotonic()

    def install(self, signals: tuple[int, ...] = (signal.SIGTERM,)) -> StopSignal:
        """Catch the signals from now on. Python lets only the main thread install handlers."""
        if threading.current_thread() is not threading.main_thread():
            raise RuntimeError("tessera_checkpoint: create the Checkpointer in the main thread "
                               "(Python only lets the main thread handle SIGTERM)")
        for signum in signals:
            self._previous[signum] = signal.signal(signum, self._handle)
        return self

    def uninstall(self) -> None:
        """Put the handlers back as they were (tests; a library that hands the process back)."""
        for signum, previous in self._previous.items():
            signal.signal(signum, previous)
        self._previous.clear()
