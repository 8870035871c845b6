"""The simulator's realism knobs: one frozen dataclass, every field a `simulate run` option
(`--period-s 15`), each with the help text that says what it models and where its default comes
from (docs/reference/simulator-defaults.md)."""

from __future__ import annotations

import argparse
from dataclasses import dataclass, field, fields


def _knob(default: float, help_text: str) -> float:
    return field(default=default, metadata={"help": help_text})


@dataclass(frozen=True)
class Knobs:
    period_s: float = _knob(30.0, "periodic cycle while something waits")
    recheck_s: float = _knob(300.0, "an unchanged state is re-planned only this often")
    grace_s: float = _knob(30.0, "a preempted pod's termination grace period")
    stop_s: float = _knob(5.0, "a pod that does not checkpoint exits this fast")
    mig_reconfig_s: float = _knob(120.0, "mig-manager applying a new layout to a node: its GPU pods "
                                         "stop and it takes no new ones for this long")
    restart_min_s: float = _knob(60.0, "a job that ran before restarts (pod start, checkpoint or "
                                       "weights restore) in a time drawn log-uniformly from here...")
    restart_max_s: float = _knob(600.0, "...to here")
    oom_after_s: float = _knob(30.0, "a pod that does not fit loads this long, then OOMs")
    backoff_s: float = _knob(10.0, "crash-loop back-off, doubling...")
    backoff_max_s: float = _knob(300.0, "...up to this")
    scale_down_s: float = _knob(600.0, "an empty on-demand/spot node is billed this long before "
                                       "the autoscaler removes it (cluster-autoscaler default)")


DEFAULT_KNOBS = Knobs()


def add_knob_arguments(parser: argparse.ArgumentParser) -> None:
    group = parser.add_argument_group("realism knobs (seconds; docs/reference/simulator-defaults.md)")
    for f in fields(Knobs):
        group.add_argument("--" + f.name.replace("_", "-"), dest=f"knob_{f.name}", type=_seconds,
                           default=f.default, metavar="S", help=f"{f.metadata['help']} (default {f.default:g})")


def knobs_from_args(args: argparse.Namespace) -> Knobs:
    return Knobs(**{f.name: getattr(args, f"knob_{f.name}") for f in fields(Knobs)})


def _seconds(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a number of seconds") from None
    if not value >= 0 or value == float("inf"):
        raise argparse.ArgumentTypeError(f"{text} is out of range (seconds >= 0)")
    return value

