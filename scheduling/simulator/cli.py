"""`simulate` command line: `fill` (the FGD paper's experiment), `run` (a mixed cluster over time)
and `generate` (scenario files for `run`).

Usable without Django: python -m scheduling.simulator.cli fill --nodes ... --trace ...
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

from . import report
from .fill import REGISTRY
from .fill.experiment import run_all
from .fill.prior import PRIORS, split_by_creation
from .fill.traces import TraceError, load_nodes, load_tasks
from .run import add_run_parsers
from .run.spec import SpecError

DEFAULT_POLICIES = "tessera,fgd,bestfit,gpupacking,gpuclustering,dotprod"


def parse_seeds(text: str) -> list[int]:
    """'42-51' or '1,2,5' or a mix: '1,3-5'."""
    seeds: list[int] = []
    try:
        for part in text.split(","):
            low, _, high = part.strip().partition("-")
            seeds.extend(range(int(low), int(high or low) + 1))
    except ValueError:
        raise argparse.ArgumentTypeError(f"bad seed list {text!r}; use e.g. 42-51") from None
    if not seeds:
        raise argparse.ArgumentTypeError("no seeds")
    return seeds


def parse_policies(text: str) -> list[str]:
    names = [n.strip() for n in text.split(",") if n.strip()]
    for name in names:
        try:
            REGISTRY.get(name)
        except KeyError as exc:
            raise argparse.ArgumentTypeError(str(exc.args[0])) from None
    return names


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="simulate", description="Trace-driven scheduling "
                                     "experiments; no database or server needed.")
    sub = parser.add_subparsers(dest="experiment", required=True)
    fill = sub.add_parser("fill", help="the FGD (ATC'23) fill experiment on the Alibaba trace")
    fill.add_argument("--nodes", required=True, type=Path, help="openb_node_list_gpu_node.csv")
    fill.add_argument("--trace", required=True, type=Path, help="an openb_pod_list_*.csv")
    fill.add_argument("--policies", type=parse_policies, default=parse_policies(DEFAULT_POLICIES))
    fill.add_argument("--seeds", type=parse_seeds, default=parse_seeds("42-51"))
    fill.add_argument("--prior", choices=PRIORS, default="online",
                      help="what policies that learn the workload (fgd, tessera) learn from: "
                           "the tasks arrived so far (online), the trace's earlier half by "
                           "creation_time, run on the later half (past-half), or the whole trace "
                           "(oracle, the paper's method)")
    fill.add_argument("--json", type=Path, help="write the results here (atomically)")
    fill.add_argument("--html", type=Path, help="write a self-contained page of charts here")
    fill.add_argument("--expected", type=Path, help="the paper's fgd-expected-results folder "
                      "(default: beside the trace's folder)")
    fill.add_argument("--processes", type=int, default=2, help="at most 2")
    fill.set_defaults(handler=cmd_fill)
    add_run_parsers(sub)
    return parser


def _progress(total: int):
    """A tqdm bar on a terminal; nothing when output is piped."""
    if not sys.stderr.isatty():
        return None, lambda result: None
    from tqdm import tqdm

    bar = tqdm(total=total, unit="run", desc="fill")
    return bar, lambda result: (bar.set_postfix_str(f"{result.policy}/{result.seed}"),
                                bar.update(1))


def cmd_fill(args: argparse.Namespace) -> int:
    nodes = load_nodes(args.nodes)
    trace = load_tasks(args.trace)
    if args.prior == "past-half":
        split_by_creation(trace)  # fails here, naming the problem, before any run
    started = time.perf_counter()
    bar, on_done = _progress(len(args.policies) * len(args.seeds))
    try:
        results = run_all(nodes, trace, args.policies, args.seeds, args.processes, on_done,
                          args.prior)
    finally:
        if bar is not None:
            bar.close()
    seconds = time.perf_counter() - started
    doc = report.build_document(args.trace.stem, args.seeds, args.policies, results, args.prior)
    expected = args.expected or report.find_expected_dir(args.trace)
    paper = report.load_paper_allocation(expected, args.trace.stem) if expected else {}
    if args.prior == "past-half":
        paper = {}  # the paper ran the whole trace; this run is its later half
    print(report.format_table(doc, paper, seconds))
    if not paper:
        print(f"(no paper results for {args.trace.stem}, prior {args.prior})")
    if args.json:
        report.write_json(args.json, doc)
    if args.html:
        report.write_html(args.html, doc, paper)
    return 0


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    try:
        return args.handler(args)
    except (TraceError, SpecError) as exc:
        print(f"simulate: error: {exc}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    sys.exit(main())
