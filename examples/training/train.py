"""A training loop that Tessera can preempt and resume, CPU only (no PyTorch needed).

The model is a line fitted by SGD in plain Python, so the example runs anywhere and is exactly
reproducible: resumed after any number of preemptions, it ends with the very same weights as a
run never interrupted. The checkpoint lines are the three of tessera_checkpoint; with PyTorch,
save and load would be tessera_checkpoint.torch.save_state / resume.

    pip install ./sdk
    python examples/training/train.py --dir /ckpt --steps 2000

In a Tessera pod it watches the checkpoint request and SIGTERM and confirms what it saves; outside
one it still saves every --every-steps and on SIGTERM, and resumes from the latest checkpoint.
"""

from __future__ import annotations

import argparse
import json
import logging
import time
from pathlib import Path

from tessera_checkpoint import Checkpointer


def train_step(state: dict[str, float], step: int, lr: float = 0.05) -> None:
    """One SGD step on the point of this step: y = 3x + 1 with a little deterministic noise."""
    x = (step % 17) / 17
    y = 3 * x + 1 + ((step * 7919) % 13 - 6) / 100
    error = state["w"] * x + state["b"] - y
    state["w"] -= lr * error * x
    state["b"] -= lr * error


def save(state: dict[str, float], path: str) -> None:
    partial = Path(path + ".partial")
    partial.write_text(json.dumps(state))
    partial.replace(path)  # whole or absent: the manifest names it only after this


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--dir", required=True, help="checkpoint folder (a volume that outlives the pod)")
    parser.add_argument("--steps", type=int, default=2000)
    parser.add_argument("--every-steps", type=int, default=None, help="also save on our own this often")
    parser.add_argument("--step-time", type=float, default=0.0, help="seconds each step takes (a stand-in for work)")
    args = parser.parse_args()
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(name)s %(message)s")

    state = {"w": 0.0, "b": 0.0}
    ckpt = Checkpointer.from_env(dir=args.dir, every_steps=args.every_steps)
    start = ckpt.resume(load=lambda path: state.update(json.loads(Path(path).read_text())))
    print(f"start {start}", flush=True)
    for step in range(start + 1, args.steps + 1):
        train_step(state, step)
        time.sleep(args.step_time)
        print(f"step {step}", flush=True)
        if ckpt.should_save(step):
            save(state, ckpt.path_for(step, ".json"))
            ckpt.saved(step, ckpt.path_for(step, ".json"))  # exits here after SIGTERM
    print(f"done {json.dumps(state)}", flush=True)


if __name__ == "__main__":
    main()
