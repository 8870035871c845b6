"""The README's fill table: every fill policy on a split's traces and seeds, per prior, with the
LP lower bound on what any policy could reach.

    .venv/bin/python bench/fill_table.py --traces ../shared/traces/alibaba-gpu-v2023 \
        [--split reporting] [--seeds 101-105] [--policies ...] [--past-half] [--json fill-table.json]

For each trace and seed: the policies (all seven by default) with the online prior, fgd and
tessera also with the oracle prior (and, with --past-half, with the past-half prior where the trace has creation
times), and bench/fill_floor.py's lp bound for that seed's arrival sequence. Policies that learn
no prior give the same result under every prior (tests/simulator/test_prior.py), so they run
once. Figures are unallocated GPU % at 100% arrived: the median over seeds, the worst in brackets.
A last table gives the paper's own published figures for the same traces (its seeds 42-51).
"""

from __future__ import annotations

import argparse
import json
import multiprocessing
import statistics
import sys
import time
from functools import cache
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from bench.fill_floor import seed_bounds  # noqa: E402
from scheduling.simulator import report  # noqa: E402
from scheduling.simulator.cli import DEFAULT_POLICIES, parse_policies, parse_seeds  # noqa: E402
from scheduling.simulator.fill.experiment import run_one  # noqa: E402
from scheduling.simulator.fill.prior import split_by_creation  # noqa: E402
from scheduling.simulator.fill.sets import SPLITS, trace_file  # noqa: E402
from scheduling.simulator.fill.traces import load_nodes, load_tasks  # noqa: E402

POLICIES = DEFAULT_POLICIES.split(",")
LEARNING = ("tessera", "fgd")  # the policies that use a workload prior; always run
NODE_FILE = "openb_node_list_gpu_node.csv"


@cache
def _inputs(folder: str, trace: str):
    return load_nodes(Path(folder) / NODE_FILE), load_tasks(Path(folder) / trace_file(trace))


def run_cell(job: tuple[str, str, int, bool, tuple[str, ...], bool]) -> dict:
    """Everything for one (trace, seed): {column: unallocated %}."""
    folder, trace, seed, past_half, policies, oracle = job
    nodes, tasks = _inputs(folder, trace)
    out: dict = {"trace": trace, "seed": seed}
    for policy in policies:
        out[f"{policy}/online"] = 100 - run_one(nodes, tasks, policy, seed, "online").allocation_rate[100]
    for policy in LEARNING if oracle else ():
        out[f"{policy}/oracle"] = 100 - run_one(nodes, tasks, policy, seed, "oracle").allocation_rate[100]
        if past_half and all(t.created is not None for t in tasks):
            out[f"{policy}/past-half"] = 100 - run_one(nodes, tasks, policy, seed,
                                                       "past-half").allocation_rate[100]
    out["bound"] = seed_bounds(nodes, tasks, seed, 95.0, lp_only=True)["lp"]
    if past_half and "fgd/past-half" in out:
        out["bound/past-half"] = seed_bounds(nodes, split_by_creation(tasks)[1], seed, 95.0,
                                             lp_only=True)["lp"]
    return out


def _cell(values: list[float], worst=max) -> str:
    return f"{statistics.median(values):.2f} ({worst(values):.2f})" if values else "–"


def tables(rows: list[dict], traces: list[str], paper_dir: Path | None = None) -> str:
    by_trace = {t: [r for r in rows if r["trace"] == t] for t in traces}
    policies = [p for p in POLICIES if any(f"{p}/online" in r for r in rows)]

    def col(t: str, key: str) -> list[float]:
        return [r[key] for r in by_trace[t] if key in r]

    head = ["trace", *policies, "LP bound", "tessera − bound", "tessera < fgd"]
    lines = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    for t in traces:
        gaps = [r["tessera/online"] - r["bound"] for r in by_trace[t]]
        wins = sum(r["tessera/online"] < r["fgd/online"] for r in by_trace[t])
        lines.append("| " + " | ".join([t, *(_cell(col(t, f"{p}/online")) for p in policies),
                                         _cell(col(t, "bound")), _cell(gaps),
                                         f"{wins}/{len(by_trace[t])}"]) + " |")
    if not any("fgd/oracle" in r for r in rows):  # --online-only: the table above says it all
        lines.append("\nunallocated GPU % at 100% arrived, median over seeds (worst)")
        return "\n".join(lines + (["", _paper_table(paper_dir, traces)] if paper_dir else []))
    priors = ["oracle", "online"] + (["past-half"] if any("fgd/past-half" in r for r in rows) else [])
    later = ["LP bound, later half"] if "past-half" in priors else []
    head = ["trace"] + [f"{p} {q}" for q in priors for p in LEARNING] + [
        f"margin {q}" for q in priors] + later
    lines += ["", "| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    for t in traces:
        cells = [_cell(col(t, f"{p}/{q}")) for q in priors for p in LEARNING]
        margins = [_cell([r[f"fgd/{q}"] - r[f"tessera/{q}"] for r in by_trace[t]
                          if f"fgd/{q}" in r], min) for q in priors]
        bound = [_cell(col(t, "bound/past-half"))] if later else []
        lines.append("| " + " | ".join([t, *cells, *margins, *bound]) + " |")
    lines.append("\nunallocated GPU % at 100% arrived, median over seeds (worst); margin = fgd − "
                 "tessera (worst = the smallest; negative: fgd leads)")
    if paper_dir:
        lines += ["", _paper_table(paper_dir, traces)]
    return "\n".join(lines)


def _paper_table(paper_dir: Path, traces: list[str]) -> str:
    """The paper's published unallocated % at 100% arrived (mean of its seeds 42-51)."""
    names = list(report.PAPER_LABELS)[::-1]
    lines = ["| trace (paper, published) | " + " | ".join(names) + " |", "|" + "---|" * (len(names) + 1)]
    for t in traces:
        paper = report.load_paper_allocation(paper_dir, Path(trace_file(t)).stem)
        lines.append("| " + " | ".join([t, *(f"{100 - paper[n]['100']:.2f}" if n in paper else "–"
                                              for n in names)]) + " |")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--traces", required=True, type=Path, help="the alibaba-gpu-v2023 folder")
    ap.add_argument("--split", choices=sorted(SPLITS), default="reporting")
    ap.add_argument("--seeds", type=parse_seeds, help="default: the split's seeds")
    ap.add_argument("--policies", type=parse_policies, default=POLICIES,
                    help="the policies to run online (tessera and fgd always run)")
    ap.add_argument("--past-half", action="store_true", help="also the past-half prior")
    ap.add_argument("--online-only", action="store_true", help="no oracle (nor past-half) runs")
    ap.add_argument("--all-traces", action="store_true",
                    help="every openb pod list in --traces instead of the split's (seeds: the split's)")
    ap.add_argument("--processes", type=int, default=2)
    ap.add_argument("--json", type=Path, help="write every per-seed figure here")
    ap.add_argument("--from-json", type=Path, help="print the tables of an earlier --json, run nothing")
    ap.add_argument("--resume", action="store_true", help="keep the rows --json already has, run the rest")
    args = ap.parse_args(argv)
    if args.from_json:
        doc = json.loads(args.from_json.read_text())
        traces = list(dict.fromkeys(r["trace"] for r in doc["rows"]))
        print(tables(doc["rows"], sorted(traces),
                     report.find_expected_dir(args.traces / NODE_FILE)))
        return 0
    split = SPLITS[args.split]
    if args.all_traces:
        names = sorted(p.stem.removeprefix("openb_pod_list_") for p in args.traces.glob(trace_file("*")))
        split = split._replace(traces=tuple(names))
    seeds = args.seeds or list(split.seeds)
    if args.split == "reporting" and set(seeds) & set(SPLITS["tuning"].seeds):
        ap.error("reporting seeds overlap the tuning seeds")
    policies = tuple(dict.fromkeys([*LEARNING, *args.policies]))
    # Seed by seed, so a stopped run has every trace at its first seeds.
    jobs = [(str(args.traces), t, s, args.past_half and not args.online_only, policies, not args.online_only)
            for s in seeds for t in split.traces]
    started, rows = time.perf_counter(), []
    if args.resume and args.json and args.json.is_file():
        rows = json.loads(args.json.read_text())["rows"]
        done = {(r["trace"], r["seed"]) for r in rows}
        jobs = [j for j in jobs if (j[1], j[2]) not in done]
    total = len(jobs) + len(rows)
    with multiprocessing.Pool(max(1, min(args.processes, 2))) as pool:
        for row in pool.imap_unordered(run_cell, jobs):
            rows.append(row)
            print(f"[{len(rows)}/{total} {time.perf_counter() - started:.0f} s] "
                  f"{row['trace']} seed {row['seed']}", file=sys.stderr, flush=True)
            if args.json:  # after every cell, so a stopped run keeps what it did
                report.write_atomic(args.json, json.dumps(
                    {"split": args.split, "seeds": seeds, "rows": rows}, indent=1) + "\n")
    print(f"fill table, {args.split} set: {len(split.traces)} traces, seeds {seeds[0]}-{seeds[-1]} "
          f"({len(seeds)}), {time.perf_counter() - started:.0f} s\n")
    print(tables(rows, list(split.traces), report.find_expected_dir(args.traces / NODE_FILE)))
    return 0


if __name__ == "__main__":
    sys.exit(main())
