"""Fill experiment output: the JSON document, the printed table and the HTML charts."""

from __future__ import annotations

import csv
import json
import os
import tempfile
from collections import defaultdict
from pathlib import Path

from .fill.experiment import RunResult
from .fill.metrics import mean_over_runs

# The artifact's policy labels in fgd-expected-results/, by our names.
PAPER_LABELS = {"random": "01-Random", "dotprod": "02-DotProd", "gpuclustering": "03-GpuClustering",
                "gpupacking": "04-GpuPacking", "bestfit": "05-BestFit", "fgd": "06-FGD"}
EXPECTED_FILE = "analysis_allo_discrete.csv"


def build_document(trace_stem: str, seeds: list[int], policies: list[str],
                   results: list[RunResult], prior: str = "online") -> dict:
    by_policy: dict[str, list[RunResult]] = defaultdict(list)
    for r in results:
        by_policy[r.policy].append(r)
    doc_policies = {}
    for name in policies:
        runs = sorted(by_policy[name], key=lambda r: r.seed)
        doc_policies[name] = {
            "allocation_rate": _str_keys(mean_over_runs(r.allocation_rate for r in runs)),
            "frag_ratio": _str_keys(mean_over_runs(r.frag_ratio for r in runs)),
        }
    return {"experiment": "fill", "trace": trace_stem, "prior": prior, "seeds": seeds,
            "policies": doc_policies}


def _str_keys(values: dict[int, float]) -> dict[str, float]:
    return {str(k): v for k, v in sorted(values.items())}


def write_atomic(path: str | Path, text: str) -> None:
    """Write beside the target and rename, so a reader never sees half a file."""
    path = Path(path)
    fd, tmp = tempfile.mkstemp(dir=path.parent or ".", prefix=f".{path.name}.", suffix=".tmp")
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as handle:
            handle.write(text)
        umask = os.umask(0)
        os.umask(umask)
        os.chmod(tmp, 0o666 & ~umask)  # mkstemp makes it private; give it the usual mode
        os.replace(tmp, path)
    except BaseException:
        os.unlink(tmp)
        raise


def find_expected_dir(trace_path: Path) -> Path | None:
    """The paper's results sit beside the trace folder in ../shared/traces/."""
    candidate = trace_path.resolve().parent.parent / "fgd-expected-results"
    return candidate if (candidate / EXPECTED_FILE).is_file() else None


def load_paper_allocation(expected_dir: Path, trace_stem: str) -> dict[str, dict[str, float]]:
    """Mean over the paper's seeds of the allocation rate per arrived %, by our policy name."""
    rows: dict[str, list[dict[str, float]]] = defaultdict(list)
    with (expected_dir / EXPECTED_FILE).open(newline="") as handle:
        for row in csv.DictReader(handle):
            if row["workload"] != trace_stem:
                continue
            values = {k: float(v) for k, v in row.items() if k.isdigit() and v not in ("", None)}
            rows[row["sc_policy"]].append(values)
    out = {}
    for name, label in PAPER_LABELS.items():
        if rows.get(label):
            means = mean_over_runs({int(k): v for k, v in r.items()} for r in rows[label])
            out[name] = _str_keys(means)
    return out


def format_table(doc: dict, paper: dict[str, dict[str, float]], seconds: float) -> str:
    """Unallocated GPU % at 100% arrived per policy, beside the paper's figure where it has one."""
    lines = [f"fill experiment on {doc['trace']}, prior {doc['prior']} ({len(doc['seeds'])} seeds, "
             f"{seconds:.1f} s)",
             f"{'policy':<14}{'alloc@90':>9}{'alloc@100':>10}{'alloc@130':>10}"
             f"{'unalloc@100':>12}{'paper':>8}{'diff':>7}"]
    for name, metrics in doc["policies"].items():
        alloc = metrics["allocation_rate"]
        ours = alloc.get("100")
        theirs = paper.get(name, {}).get("100")
        unalloc = f"{100 - ours:.2f}" if ours is not None else "-"
        paper_txt = f"{100 - theirs:.2f}" if theirs is not None else "-"
        diff = f"{ours - theirs:+.2f}" if ours is not None and theirs is not None else ""
        lines.append(f"{name:<14}{_fmt(alloc.get('90')):>9}{_fmt(ours):>10}"
                     f"{_fmt(alloc.get('130')):>10}{unalloc:>12}{paper_txt:>8}{diff:>7}")
    lines.append("unalloc = 100 - allocation rate at 100% arrived; paper = the artifact's "
                 "expected results (mean over its 10 seeds); diff = our alloc - paper's")
    return "\n".join(lines)


def _fmt(value: float | None) -> str:
    return f"{value:.2f}" if value is not None else "-"


def write_json(path: str | Path, doc: dict) -> None:
    write_atomic(path, json.dumps(doc, indent=1) + "\n")


def write_html(path: str | Path, doc: dict, paper: dict[str, dict[str, float]]) -> None:
    """A self-contained page (plotly.js inlined) so it opens offline."""
    import plotly.graph_objects as go

    fig = go.Figure()
    for name, metrics in doc["policies"].items():
        alloc = metrics["allocation_rate"]
        fig.add_trace(go.Scatter(x=[int(k) for k in alloc], y=list(alloc.values()),
                                 mode="lines", name=name))
    for name, alloc in paper.items():
        fig.add_trace(go.Scatter(x=[int(k) for k in alloc], y=list(alloc.values()),
                                 mode="lines", name=f"paper {name}", visible="legendonly",
                                 line={"dash": "dot"}))
    fig.update_layout(title=f"GPU allocation rate vs arrived GPU request ({doc['trace']}, "
                            f"{len(doc['seeds'])} seeds)",
                      xaxis_title="arrived GPU request (% of capacity)",
                      yaxis_title="GPU allocation rate (%)")
    write_atomic(path, fig.to_html(include_plotlyjs=True, full_html=True))
