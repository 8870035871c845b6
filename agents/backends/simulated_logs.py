"""What a simulated pod prints, for the job page's log panel in the demo.

Made up from the pod's own state, so it agrees with everything else the demo shows: one line per
minute of work done so far (a training step with a falling loss, a serving request summary,
a notebook kernel's heartbeat), a line when a checkpoint was saved, and the exit when it ended.
The same pod at the same moment always prints the same lines.
"""

from __future__ import annotations

import math
import random
import zlib
from datetime import UTC, datetime

LINE_EVERY_S = 60.0  # seconds of work between two lines
STEP_S = 2.0  # seconds of work per training step


def step_at(progress_s: float) -> int:
    """The training step a simulated job has reached after `progress_s` seconds of work: the log's
    lines and the checkpoints the pod confirms count steps the same way."""
    return int(progress_s // STEP_S)


def pod_log(pod: dict, now: float, speed: float, tail_lines: int, limit_bytes: int) -> str:
    """The last `tail_lines` lines (at most `limit_bytes`), as `kubectl logs --tail --limit-bytes` gives them."""
    until = max(pod["started_at"], pod["ended_at"] if pod["ended_at"] is not None else now)
    done_s = max(0.0, until - pod["started_at"]) * speed
    count = int(done_s // LINE_EVERY_S)
    first = max(0, count - tail_lines)
    lines = [_started(pod)] if first == 0 else []
    lines += [_line(pod, index, speed) for index in range(first, count)]
    if pod["phase"] in ("Succeeded", "Failed"):
        lines.append(f"{_stamp(until)} exiting: {pod['reason'] or pod['phase']} (exit code {pod['exit_code']})")
    lines = "\n".join(lines).split("\n")  # a checkpoint line comes with its step's
    text = "\n".join(lines[-tail_lines:]) + "\n" if lines != [""] else ""
    return text.encode()[-limit_bytes:].decode(errors="ignore") if limit_bytes else text


def _stamp(at: float) -> str:
    return datetime.fromtimestamp(at, UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def _started(pod: dict) -> str:
    where = f"MIG {pod['mig_profile']}" if pod.get("mig_profile") else f"GPUs {pod['gpus']}"
    resumed = f", resuming from {pod['resume_s']:.0f} s of work" if pod["resume_s"] else ""
    return f"{_stamp(pod['started_at'])} starting {pod['name']} on {pod['node']} ({where}){resumed}"


def _line(pod: dict, index: int, speed: float) -> str:
    at = pod["started_at"] + (index + 1) * LINE_EVERY_S / speed
    rng = random.Random(zlib.crc32(f"{pod['name']}/{index}".encode()))
    kind = pod.get("kind", "training")
    if kind == "inference":
        latency = rng.lognormvariate(math.log(120), 0.35)
        return (f"{_stamp(at)} served {rng.randint(180, 260)} requests in the last minute, "
                f"p50 {latency:.0f} ms, p99 {latency * rng.uniform(2.2, 3.5):.0f} ms, errors 0")
    if kind == "interactive":
        return f"{_stamp(at)} kernel alive, {rng.randint(0, 3)} cells run in the last minute"
    step = step_at(pod["resume_s"] + (index + 1) * LINE_EVERY_S)
    loss = 2.1 * math.exp(-step / 4000) + 0.9 + rng.uniform(-0.03, 0.03)
    line = f"{_stamp(at)} step {step} loss {loss:.4f} lr 3.0e-04 samples/s {rng.uniform(380, 420):.1f}"
    if (index + 1) % 15 == 0:
        line += f"\n{_stamp(at)} checkpoint saved at step {step}"
    return line
