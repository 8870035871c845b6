"""`simulate run` (a mixed inference + training cluster over time, through the real engine),
`simulate generate` (scenario files) and `simulate sweep` (every policy over scenario families).
`add_run_parsers(subparsers)` registers them on an argparse subparsers object;
`python -m scheduling.simulator.run run|generate|sweep ...` works alone.
"""

from __future__ import annotations

import argparse
import dataclasses
import sys
from pathlib import Path

from . import output
from .families import FAMILIES, Shape, family_shape, parse_gang_mix, parse_nodes, shape_with
from .knobs import add_knob_arguments, knobs_from_args
from .policies import known_policies
from .spec import SpecError, load_cluster, load_jobs

DEFAULT_POLICIES = "tessera,k8s-default,kueue,kueue-mig,volcano,binpack,timeslice"
SWEEP_POLICIES = DEFAULT_POLICIES


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
    gen.add_argument("--family", choices=tuple(FAMILIES), help="start from this family's shape")
    add_shape_arguments(gen)
    gen.add_argument("--seed", type=int, default=7)
    gen.add_argument("--out", required=True, type=Path, help="folder for cluster.json and jobs.csv")
    gen.set_defaults(handler=cmd_generate)
    sweep = subparsers.add_parser("sweep", help="every policy over scenario families and seeds: "
                                  "medians, worst cases, wins and losses")
    sweep.add_argument("--family", type=lambda t: [f.strip() for f in t.split(",") if f.strip()],
                       help=f"comma-separated, of {', '.join(FAMILIES)} (default: the split's)")
    sweep.add_argument("--split", choices=("reporting", "tuning"), default="reporting",
                       help="which seeds (and families) to use: families.REPORTING or TUNING")
    sweep.add_argument("--seeds", type=int, default=5, help="seeds per family")
    sweep.add_argument("--policies", type=parse_policies, default=parse_policies(SWEEP_POLICIES))
    sweep.add_argument("--gpus", type=int, help="override every family's GPU count")
    sweep.add_argument("--hours", type=float, help="override every family's hours")
    sweep.add_argument("--processes", type=int, default=1, help="parallel runs")
    sweep.add_argument("--json", type=Path, help="write every run and the summary here")
    add_knob_arguments(sweep)
    sweep.set_defaults(handler=cmd_sweep)


SHAPE_ARGUMENTS = (  # (option, type, help)
    ("--gpus", int, "cluster GPUs (multiple of 8)"),
    ("--hours", float, "window length"),
    ("--nodes", parse_nodes, "node mix MODEL/INTERCONNECT/TIER[=SHARE],...; the first takes the rest "
                             "(e.g. H100-80GB/nvswitch/reserved,A100-40GB/pcie/on-demand=0.25)"),
    ("--mig-capable-share", float, "share of each part's nodes whose GPUs can do MIG"),
    ("--mig-share", float, "share of reserved MIG-capable nodes that start in MIG mode"),
    ("--mps-share", float, "share of nodes whose device plugin runs MPS (from the first part, not in MIG mode)"),
    ("--mps-replicas", int, "MPS replicas per GPU on those nodes"),
    ("--spine-oversubscription", float, "cross-spine oversubscription (1 = none)"),
    ("--gang-mix", parse_gang_mix, "training sizes SIZE:WEIGHT,... (e.g. 1:0.3,8:0.5,64:0.2)"),
    ("--model-constraint-share", float, "share of training jobs that name GPU models"),
    ("--inference-share", float, "peak serving GPUs / cluster GPUs"),
    ("--load", float, "all demand inside the window / the cluster's GPU-hours (0.8-1.5 typical)"),
    ("--diurnal-amplitude", float, "serving swings between 1 - this and 1 of its peak"),
)


def add_shape_arguments(parser: argparse.ArgumentParser) -> None:
    defaults = Shape()
    group = parser.add_argument_group("scenario shape (default: the family's, else today's mixed)")
    for option, kind, help_text in SHAPE_ARGUMENTS:
        default = getattr(defaults, option[2:].replace("-", "_"))
        group.add_argument(option, type=_argument_type(kind), default=None,
                           help=f"{help_text} (default {default})" if not isinstance(default, tuple) else help_text)


def _argument_type(kind):
    def convert(text: str):
        try:
            return kind(text)
        except ValueError as exc:
            raise argparse.ArgumentTypeError(str(exc)) from None
    convert.__name__ = getattr(kind, "__name__", "value")
    return convert


def shape_from_args(args: argparse.Namespace) -> Shape:
    base = family_shape(args.family) if args.family else Shape()
    return shape_with(base, **{option[2:].replace("-", "_"): getattr(args, option[2:].replace("-", "_"))
                               for option, _, _ in SHAPE_ARGUMENTS})


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
    print(output.format_causes(doc, "idle_by_cause", "idle GPU-hours by cause"))
    print()
    print(output.format_causes(doc, "lost_by_cause", "lost GPU-hours by cause"))
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
        cluster, jobs = generate(args.scenario, shape_from_args(args), args.seed, args.out)
    except ValueError as exc:
        raise SpecError("generate", None, None, str(exc)) from None
    print(f"wrote {cluster} and {jobs}")
    return 0


def cmd_sweep(args: argparse.Namespace) -> int:
    from . import sweep

    try:
        families, seeds = sweep.split_plan(args.split, args.family, args.seeds)
        shapes = {f: shape_with(family_shape(f), gpus=args.gpus, hours=args.hours) for f in families}
    except ValueError as exc:
        raise SpecError("sweep", None, None, str(exc)) from None
    if args.seeds < 1 or args.processes < 1:
        raise SpecError("sweep", None, None, "--seeds and --processes must be at least 1")
    knobs = knobs_from_args(args)
    tasks = [sweep.Task(f, seed, p, shapes[f], knobs) for f in families for seed in seeds for p in args.policies]
    from tqdm import tqdm

    with tqdm(total=len(tasks), unit="run", desc="sweep") as bar:
        def done(result: dict) -> None:
            bar.set_postfix_str(f"{result['family']}/{result['seed']}/{result['policy']}")
            bar.update(1)
        results = sweep.run_sweep(tasks, args.processes, done)
    summary = sweep.summarise(results, args.policies)
    print(f"split {args.split}: families {', '.join(families)}; seeds {seeds[0]}-{seeds[-1]}")
    print(sweep.format_summary(summary, args.policies))
    if args.json:
        output.write_json(args.json, {"experiment": "sweep", "split": args.split, "seeds": seeds,
                                      "families": {f: {"description": FAMILIES[f][0],
                                                       "shape": dataclasses.asdict(shapes[f])} for f in families},
                                      "knobs": dataclasses.asdict(knobs), "runs": results, "summary": summary})
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
