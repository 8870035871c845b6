"""Telling Tessera a checkpoint is saved: POST $TESSERA_CHECKPOINT_URL with the pod's token.

Answers (CONTRACTS.md, "Checkpoint channel"): 201 recorded, 200 the same again, 400 a bad field,
401 no token / unknown / run ended, 409 that request already confirmed with other values. A 5xx or
a connection that fails is retried with backoff until `deadline_s`; a 4xx is an answer, never
retried: the same body would get the same refusal.
"""

from __future__ import annotations

import json
import logging
import time
import urllib.error
import urllib.request
from dataclasses import asdict, dataclass
from datetime import datetime, timezone
from pathlib import Path
from typing import Callable

log = logging.getLogger("tessera_checkpoint")

PERIODIC = "periodic"  # the id of a checkpoint the job made on its own


@dataclass(frozen=True)
class Confirmation:
    """The body of the POST."""

    checkpoint_id: str
    step: int
    progress_s: float
    saved_at: str  # RFC 3339 with zone
    path: str = ""


@dataclass(frozen=True)
class Answer:
    """What the endpoint said: `status` 0 when it was never reached."""

    status: int
    body: str
    attempts: int

    @property
    def recorded(self) -> bool:
        return self.status in (200, 201)


def rfc3339(moment: datetime) -> str:
    return moment.astimezone(timezone.utc).isoformat(timespec="milliseconds").replace("+00:00", "Z")


def utc_now() -> str:
    return rfc3339(datetime.now(timezone.utc))


class Confirmer:
    """POSTs confirmations; reads the token file on each call (the kubelet may mount it late)."""

    def __init__(self, url: str, token_file: str | Path, *, deadline_s: float = 30.0, timeout_s: float = 10.0,
                 first_backoff_s: float = 0.5, sleep: Callable[[float], None] = time.sleep,
                 clock: Callable[[], float] = time.monotonic) -> None:
        self.url = url
        self.token_file = Path(token_file)
        self.deadline_s = deadline_s
        self.timeout_s = timeout_s
        self.first_backoff_s = first_backoff_s
        self._sleep = sleep
        self._clock = clock

    def confirm(self, confirmation: Confirmation, *, deadline_s: float | None = None) -> Answer:
        """POST it, retrying a 5xx or a failed connection until `deadline_s` (else the confirmer's)."""
        body = json.dumps(asdict(confirmation)).encode()
        give_up_at = self._clock() + (self.deadline_s if deadline_s is None else deadline_s)
        backoff, attempts = self.first_backoff_s, 0
        while True:
            attempts += 1
            status, text = self._post(body)
            if 0 < status < 500:
                return Answer(status, text, attempts)
            if self._clock() + backoff > give_up_at:
                return Answer(status, text, attempts)
            log.warning("checkpoint confirmation not delivered (%s), retrying in %.1f s",
                        text or status, backoff)
            self._sleep(backoff)
            backoff = min(backoff * 2, 8.0)

    def _post(self, body: bytes) -> tuple[int, str]:
        """(HTTP status, response text); status 0 for a failure before any answer."""
        try:
            token = self.token_file.read_text().strip()
        except OSError as problem:
            return 0, f"cannot read the checkpoint token: {problem}"
        request = urllib.request.Request(self.url, data=body, method="POST", headers={
            "Authorization": f"Bearer {token}", "Content-Type": "application/json",
            "Accept": "application/json"})
        try:
            with urllib.request.urlopen(request, timeout=self.timeout_s) as response:
                return response.status, response.read().decode("utf-8", "replace")
        except urllib.error.HTTPError as answer:
            return answer.code, answer.read().decode("utf-8", "replace")
        except (urllib.error.URLError, OSError) as problem:  # refused, reset, timed out, DNS
            return 0, str(getattr(problem, "reason", problem))


def describe(answer: Answer) -> str:
    """One line for the log: what the answer means for the job."""
    meaning: dict[int, str] = {
        201: "recorded", 200: "already recorded with the same values",
        400: "refused: a field is bad (a bug in the job or the SDK)",
        401: "refused: no token, an unknown one, or the run has ended",
        409: "refused: this request was already confirmed with other values"}
    text: str | None = meaning.get(answer.status)
    if text is None:
        text = "not delivered" if answer.status == 0 or answer.status >= 500 else "unexpected answer"
    return f"{answer.status} {text} after {answer.attempts} attempt(s): {answer.body[:300]}"
