"""`simulate run` (a mixed inference + training cluster over time, through the real engine)
and `simulate generate` (scenario files). `add_run_parsers(subparsers)` registers both on an
argparse subparsers object; `python -m scheduling.simulator.run run|generate ...` works alone.
"""

from __future__ import annotations

import argparse
import dataclasses
import sys
from pathlib import Path

from . import output
from .knobs import add_knob_arguments, knobs_from_args
from .policies import known_policies
from .spec import SpecError, load_cluster, load_jobs

DEFAULT_POLICIES = "tessera,k8s-default,binpack,timeslice"


def parse_policies(text: str) -> list[str]:
    names = [n.strip() for n in text.split(",") if n.strip()]
    known = known_policies()
    for name in names:
        if name not in known:
            raise argparse.ArgumentTypeError(f"unknown policy {name!r}; known: {', '.join(sorted(known))}")
    if not names:
        raise argparse.ArgumentTypeError("no policies")
    return names


def add_run_parsers(subparsers) -> None:
    run = subparsers.add_parser("run", help="a mixed inference + training cluster over time")
    run.add_argument("--cluster", required=True, type=Path, help="cluster.json")
    run.add_argument("--workload", required=True, type=Path, help="jobs.csv")
    run.add_argument("--policies", type=parse_policies, default=parse_policies(DEFAULT_POLICIES))
    run.add_argument("--seed", type=int, default=1, help="seeds spot reclaims and the engine")
    run.add_argument("--json", type=Path, help="write the results here (atomically)")
    run.add_argument("--html", type=Path, help="write a self-contained page of charts here")
    add_knob_arguments(run)
    run.set_defaults(handler=cmd_run)
    gen = subparsers.add_parser("generate", help="write a cluster.json + jobs.csv scenario")
    gen.add_argument("--scenario", default="mixed", choices=("mixed",))
    gen.add_argument("--gpus", type=int, default=256)
    gen.add_argument("--hours", type=float, default=48.0)
    gen.add_argument("--seed", type=int, default=7)
    gen.add_argument("--out", required=True, type=Path, help="folder for cluster.json and jobs.csv")
    gen.set_defaults(handler=cmd_generate)


def _progress(horizon: float, label: str):
    """A tqdm bar over simulated hours on a terminal; nothing when output is piped."""
    if not sys.stderr.isatty():
        return None, None
    from tqdm import tqdm

    bar = tqdm(total=round(horizon / 3600, 1), unit="h", desc=label, leave=False)

    def update(now: float) -> None:
        done = round(now / 3600, 1)
        if done > bar.n:
            bar.update(done - bar.n)
    return bar, update


def cmd_run(args: argparse.Namespace) -> int:
    from .loop import run_policy

    spec = load_cluster(args.cluster)
    jobs = load_jobs(args.workload, {t.name for t in spec.teams} or None)
    horizon = max(j.submit_s for j in jobs)
    knobs = knobs_from_args(args)
    doc, series = {"experiment": "run", "cluster": str(args.cluster), "workload": str(args.workload),
                   "seed": args.seed, "knobs": dataclasses.asdict(knobs), "policies": {}}, {}
    for name in args.policies:
        bar, update = _progress(horizon, name)
        try:
            doc["policies"][name], series[name] = run_policy(spec, jobs, name, args.seed, knobs, progress=update)
        finally:
            if bar is not None:
                bar.close()
    print(output.format_table(doc))
    print()
    print(output.format_targets(doc))
    if args.json:
        output.write_json(args.json, doc)
    if args.html:
        output.write_html(args.html, doc, series)
    return 0


def cmd_generate(args: argparse.Namespace) -> int:
    from .generate import generate

    try:
        cluster, jobs = generate(args.scenario, args.gpus, args.hours, args.seed, args.out)
    except ValueError as exc:
        raise SpecError("generate", None, None, str(exc)) from None
    print(f"wrote {cluster} and {jobs}")
    return 0


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="simulate", description="Mixed-cluster experiments; "
                                     "no database or server needed.")
    add_run_parsers(parser.add_subparsers(dest="experiment", required=True))
    args = parser.parse_args(argv)
    try:
        return args.handler(args)
    except SpecError as exc:
        print(f"simulate: error: {exc}", file=sys.stderr)
        return 2
