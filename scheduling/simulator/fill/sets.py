"""Which openb traces and seeds may tune tessera, and which report it (issue 12).

Its weights (STRAND_WEIGHT, RESERVE_WEIGHT, HOLE_WEIGHT) and every variant in
docs/designs/tessera-fill.md were chosen on the default and gpuspec10/20/25 traces with the paper's
seeds 42-51: that is the tuning set, and figures from it are not evidence. The README's fill table
comes from the reporting set: the other eight traces with published paper results, on seeds no
tuning run has used. The seven carried traces without paper results are in neither.
"""

from __future__ import annotations

from typing import NamedTuple


class Split(NamedTuple):
    traces: tuple[str, ...]  # openb_pod_list_<name>.csv
    seeds: tuple[int, ...]


TUNING = Split(("default", "gpuspec10", "gpuspec20", "gpuspec25"), tuple(range(42, 52)))
REPORTING = Split(("cpu050", "cpu100", "cpu200", "gpushare40", "gpushare60", "gpushare100",
                   "multigpu20", "multigpu30"), tuple(range(101, 111)))
SPLITS = {"tuning": TUNING, "reporting": REPORTING}


def trace_file(name: str) -> str:
    return f"openb_pod_list_{name}.csv"
