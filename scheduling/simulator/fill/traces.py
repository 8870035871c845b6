"""Loading the Alibaba openb node and pod lists, with errors that name file, line and field.

The trace's terms do not allow shipping it, so it is always read from a path the user gives.
"""

from __future__ import annotations

import csv
from pathlib import Path
from typing import NamedTuple

from ...engine.fragment.shapes import MILLI, Request

TRACE_SOURCE = (
    "github.com/alibaba/clusterdata, folder cluster-trace-gpu-v2023/csv/ "
    "(the openb_node_list_*.csv and openb_pod_list_*.csv files)"
)
NODE_COLUMNS = ("sn", "cpu_milli", "memory_mib", "gpu", "model")
POD_COLUMNS = ("name", "cpu_milli", "memory_mib", "num_gpu", "gpu_milli")


class TraceError(ValueError):
    """Bad or missing input; the message names the file, line and field."""


class NodeSpec(NamedTuple):
    name: str
    cpu: int
    mem: int
    num_gpu: int
    model: str


class TraceTask(NamedTuple):
    name: str
    task: Request
    created: int | None = None  # creation_time, seconds; None when the list has no such column


def _open_rows(path: Path, required: tuple[str, ...]):
    if not path.is_file():
        raise TraceError(f"{path}: file not found. The Alibaba GPU trace is not shipped with "
                         f"Tessera; download it from {TRACE_SOURCE} and pass its path.")
    with path.open(newline="", encoding="utf-8") as handle:
        reader = csv.DictReader(handle)
        header = reader.fieldnames or []
        missing = [c for c in required if c not in header]
        if missing:
            raise TraceError(f"{path}:1: missing column(s) {', '.join(missing)} "
                             f"(header has: {', '.join(header) or 'nothing'})")
        for row in reader:
            if None in row or any(row[c] is None for c in required):
                raise TraceError(f"{path}:{reader.line_num}: wrong number of fields "
                                 f"(expected {len(header)})")
            yield reader.line_num, row


def _int_field(path: Path, line: int, row: dict, field: str, low: int = 0) -> int:
    text = row[field].strip()
    try:
        value = int(text)
    except ValueError:
        raise TraceError(f"{path}:{line}: field {field!r}: {text!r} is not an integer") from None
    if value < low:
        raise TraceError(f"{path}:{line}: field {field!r}: {value} is below {low}")
    return value


def load_nodes(path: str | Path) -> list[NodeSpec]:
    """GPU nodes only: the paper simulates the GPU node list; CPU-only rows are skipped."""
    path = Path(path)
    nodes = []
    for line, row in _open_rows(path, NODE_COLUMNS):
        num_gpu = _int_field(path, line, row, "gpu")
        if num_gpu == 0:
            continue
        model = row["model"].strip()
        if not model:
            raise TraceError(f"{path}:{line}: field 'model': empty on a node with GPUs")
        nodes.append(NodeSpec(row["sn"].strip(), _int_field(path, line, row, "cpu_milli"),
                              _int_field(path, line, row, "memory_mib"), num_gpu, model))
    if not nodes:
        raise TraceError(f"{path}: no GPU nodes")
    return nodes


def _task_from_row(path: Path, line: int, row: dict) -> Request:
    num_gpu = _int_field(path, line, row, "num_gpu")
    gpu_milli = _int_field(path, line, row, "gpu_milli")
    # As the artifact does: shares above one GPU are capped, CPU-only rows carry no share.
    gpu_milli = min(gpu_milli, MILLI) if num_gpu else 0
    if num_gpu and gpu_milli == 0:
        raise TraceError(f"{path}:{line}: field 'gpu_milli': 0 on a task asking for GPUs")
    spec_text = (row.get("gpu_spec") or "").strip()
    spec = frozenset(s for s in spec_text.split("|") if s) or None
    return Request(_int_field(path, line, row, "cpu_milli"),
                _int_field(path, line, row, "memory_mib"), num_gpu, gpu_milli, spec)


def _created(path: Path, line: int, row: dict) -> int | None:
    if "creation_time" not in row:
        return None  # the multigpu lists have no timestamps
    return _int_field(path, line, row, "creation_time")


def load_tasks(path: str | Path) -> list[TraceTask]:
    path = Path(path)
    tasks = [TraceTask(row["name"].strip(), _task_from_row(path, line, row),
                       _created(path, line, row))
             for line, row in _open_rows(path, POD_COLUMNS)]
    if not tasks:
        raise TraceError(f"{path}: no tasks")
    return tasks
