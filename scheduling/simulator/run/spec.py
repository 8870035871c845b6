"""cluster.json and jobs.csv: parsed into plain dataclasses, every bad value named by file,
line and field (SpecError), so a typo never turns into a silently different experiment."""

from __future__ import annotations

import csv
import io
import json
import re
from dataclasses import dataclass, field
from json.decoder import JSONObject
from json.scanner import py_make_scanner
from pathlib import Path

from scheduling.engine.mig import geometry_for
from scheduling.engine.types import INTERCONNECTS, JOB_KINDS, PRIORITY_CLASSES, SHARING_MODES, SHARING_NONE, TIERS

# NDR 400 Gb/s measures ≈48 GB/s of all-reduce bus bandwidth per NIC (docs/reference/performance-figures.md §3).
GB_S_PER_GBPS = 0.12


class SpecError(ValueError):
    """A bad input file: the message names the file, the line and the field."""

    def __init__(self, path, line: int | None, field_name: str | None, message: str):
        where = f"{path}" + (f":{line}" if line else "")
        what = f" field {field_name!r}:" if field_name else ""
        super().__init__(f"{where}:{what} {message}")


@dataclass(frozen=True)
class NodeGroup:
    name_prefix: str
    count: int
    gpu_model: str
    gpus_per_node: int
    interconnect: str
    cpu_cores: float
    memory_gb: float
    leaf: str
    spine: str
    tier: str
    mig_capable: bool
    mig_enabled_gpus: int  # GPUs per node that start in MIG mode (policies with MIG only)
    nic_gb_s: float
    nics: int
    gpu_memory_gb: float
    # The device plugin's sharing mode and replicas per GPU (engine Node.sharing): "none" unless the
    # spec says so, as on a plain GPU Operator install (docs/reference/gpu-sharing.md).
    gpu_sharing: str
    gpu_replicas: int


@dataclass(frozen=True)
class TeamSpec:
    name: str
    business_unit: str
    guaranteed_gpus: float
    burst_limit_gpus: float | None
    weight: float


@dataclass(frozen=True)
class ClusterSpec:
    groups: tuple[NodeGroup, ...]
    spine_oversubscription: float
    prices: dict[str, dict[str, float]]
    reclaims_per_node_hour: float
    notice_s: float
    replace_s: float
    teams: tuple[TeamSpec, ...]

    @property
    def gpus(self) -> int:
        return sum(g.count * g.gpus_per_node for g in self.groups)


@dataclass(frozen=True)
class JobSpec:
    job_id: str
    team: str
    project: str
    kind: str
    priority: str
    submit_s: float
    duration_s: float
    gpus: int
    gpu_mem_gb: float
    cpu_cores: float
    gpu_models: tuple[str, ...]
    checkpoint_interval_s: float | None
    checkpoint_s: float
    comm_fraction: float
    preemptible: bool
    gpu_need: float | None = None  # a serving replica's throughput need, reference GPUs (serving.py)
    accepts_no_isolation: bool = False  # its share may be time-sliced (engine Job.accepts_no_isolation)
    line: int = field(default=0, compare=False)


# --- JSON with line numbers -----------------------------------------------------------------

class _Located(dict):
    """A JSON object that remembers the line of each of its keys."""

    lines: dict[str, int]
    line: int


def _load_json(path: Path):
    text = _read(path)
    decoder = json.JSONDecoder()

    def parse_object(s_and_end, *args):
        s, start = s_and_end
        obj, end = JSONObject(s_and_end, *args)
        located = _Located(obj)
        located.line = s.count("\n", 0, start) + 1
        located.lines = {k: s.count("\n", 0, max(s.find(f'"{k}"', start, end), start)) + 1
                         for k in obj}
        return located, end

    decoder.parse_object = parse_object
    decoder.scan_once = py_make_scanner(decoder)
    try:
        return decoder.decode(text)
    except json.JSONDecodeError as exc:
        raise SpecError(path, exc.lineno, None, f"not valid JSON: {exc.msg}") from None


def _read(path: Path) -> str:
    try:
        return Path(path).read_text(encoding="utf-8")
    except OSError as exc:
        raise SpecError(path, None, None, f"cannot read: {exc.strerror}") from None


class _Fields:
    """Typed access to one JSON object's fields, with errors that name the line and field."""

    def __init__(self, path: Path, obj, context: str):
        if not isinstance(obj, dict):
            raise SpecError(path, getattr(obj, "line", None), context, "must be an object")
        self.path, self.obj, self.context = path, obj, context

    def _fail(self, key: str, message: str):
        line = getattr(self.obj, "lines", {}).get(key) or getattr(self.obj, "line", None)
        raise SpecError(self.path, line, f"{self.context}.{key}".lstrip("."), message)

    def get(self, key: str, kind, default=..., check=None, choices=None):
        if key not in self.obj or (self.obj[key] is None and default is not ...):
            if default is ...:
                self._fail(key, "is required")
            return default
        value = self.obj[key]
        ok = isinstance(value, kind) and not (kind is not bool and isinstance(value, bool))
        if not ok:
            self._fail(key, f"must be {getattr(kind, '__name__', kind)}, not {value!r}")
        if choices is not None and value not in choices:
            self._fail(key, f"must be one of {'|'.join(choices)}, not {value!r}")
        if check is not None and not check(value):
            self._fail(key, f"value {value!r} is out of range")
        return value


NUMBER = (int, float)


def load_cluster(path: str | Path) -> ClusterSpec:
    path = Path(path)
    doc = _Fields(path, _load_json(path), "")
    nodes = doc.get("nodes", list, check=bool)
    groups = tuple(_node_group(path, raw, f"nodes[{i}]") for i, raw in enumerate(nodes))
    prices = _prices(path, doc.get("prices_per_gpu_hour", dict), groups)
    spot = _Fields(path, doc.get("spot", dict, {}), "spot")
    teams = tuple(_team(path, raw, f"teams[{i}]")
                  for i, raw in enumerate(doc.get("teams", list, [])))
    _unique(path, [g.name_prefix for g in groups], "nodes", "name_prefix")
    _unique(path, [t.name for t in teams], "teams", "name")
    return ClusterSpec(
        groups=groups,
        spine_oversubscription=float(doc.get("spine_oversubscription", NUMBER, 1.0,
                                             lambda v: v >= 1)),
        prices=prices,
        reclaims_per_node_hour=float(spot.get("reclaims_per_node_hour", NUMBER, 0.0,
                                              lambda v: v >= 0)),
        notice_s=float(spot.get("notice_s", NUMBER, 120.0, lambda v: v >= 0)),
        replace_s=float(spot.get("replace_s", NUMBER, 1800.0, lambda v: v >= 0)),
        teams=teams,
    )


def _node_group(path: Path, raw, context: str) -> NodeGroup:
    f = _Fields(path, raw, context)
    model = f.get("gpu_model", str, check=bool)
    gpus = f.get("gpus_per_node", int, check=lambda v: 1 <= v <= 16)
    mig_capable = f.get("mig_capable", bool, False)
    if mig_capable and geometry_for(model) is None:
        f._fail("mig_capable", f"{model} has no MIG profiles in mig_profiles.json")
    mig_on = f.get("mig_enabled_gpus", int, 0, lambda v: 0 <= v <= gpus)
    if mig_on and not mig_capable:
        f._fail("mig_enabled_gpus", "needs mig_capable: true")
    sharing = f.get("gpu_sharing", str, SHARING_NONE, choices=SHARING_MODES)
    replicas = f.get("gpu_replicas", int, 1, lambda v: 1 <= v <= 100)
    if (sharing == SHARING_NONE) != (replicas == 1):
        f._fail("gpu_replicas", "is 1 exactly when gpu_sharing is none (the device plugin shares with 2 or more)")
    return NodeGroup(
        name_prefix=f.get("name_prefix", str, check=bool), count=f.get("count", int, check=lambda v: v >= 1),
        gpu_model=model, gpus_per_node=gpus,
        interconnect=f.get("interconnect", str, choices=INTERCONNECTS),
        cpu_cores=float(f.get("cpu_cores", NUMBER, check=lambda v: v > 0)),
        memory_gb=float(f.get("memory_gb", NUMBER, check=lambda v: v > 0)),
        leaf=f.get("leaf", str, check=bool), spine=f.get("spine", str, "spine-1", check=bool),
        tier=f.get("tier", str, choices=TIERS), mig_capable=mig_capable, mig_enabled_gpus=mig_on,
        nic_gb_s=float(f.get("nic_gbps", NUMBER, 400, lambda v: v > 0)) * GB_S_PER_GBPS,
        nics=f.get("nics", int, 8, lambda v: v >= 1),
        gpu_memory_gb=float(f.get("gpu_memory_gb", NUMBER, _model_memory(model) or ..., lambda v: v > 0)),
        gpu_sharing=sharing, gpu_replicas=replicas,
    )


def _model_memory(model: str) -> float | None:
    """GPU memory from the model name (H100-80GB -> 80), else from the MIG data."""
    match = re.search(r"(\d+)\s*GB", model, re.IGNORECASE)
    if match:
        return float(match[1])
    geometry = geometry_for(model)
    return geometry.memory_gb if geometry else None


def _prices(path: Path, raw: dict, groups) -> dict[str, dict[str, float]]:
    prices = {}
    for model, tiers in raw.items():
        f = _Fields(path, tiers, f"prices_per_gpu_hour.{model}")
        prices[model] = {t: float(f.get(t, NUMBER, 0.0, lambda v: v >= 0)) for t in TIERS if t in tiers}
        for extra in set(tiers) - set(TIERS):
            f._fail(extra, f"unknown tier; use {'|'.join(TIERS)}")
    top = _Fields(path, raw, "prices_per_gpu_hour")
    for g in groups:
        for tier in {g.tier, "on-demand"}:
            if tier not in prices.get(g.gpu_model, {}):
                top._fail(g.gpu_model, f"needs a {tier!r} price (nodes {g.name_prefix}*)")
    return prices


def _team(path: Path, raw, context: str) -> TeamSpec:
    f = _Fields(path, raw, context)
    guaranteed = float(f.get("guaranteed_gpus", NUMBER, 0.0, lambda v: v >= 0))
    burst = f.get("burst_limit_gpus", NUMBER, None, lambda v: v >= guaranteed)
    return TeamSpec(name=f.get("name", str, check=bool), business_unit=f.get("business_unit", str, ""),
                    guaranteed_gpus=guaranteed, burst_limit_gpus=None if burst is None else float(burst),
                    weight=float(f.get("weight", NUMBER, 1.0, lambda v: v > 0)))


def _unique(path: Path, names, context: str, key: str) -> None:
    seen = set()
    for name in names:
        if name in seen:
            raise SpecError(path, None, f"{context}.{key}", f"{name!r} appears twice")
        seen.add(name)


# --- jobs.csv -------------------------------------------------------------------------------

REQUIRED_COLUMNS = ("job_id", "team", "kind", "priority", "submit_s", "duration_s", "gpus", "gpu_mem_gb")
COLUMNS = REQUIRED_COLUMNS + ("project", "cpu_cores", "gpu_model", "checkpoint_interval_s",
                              "checkpoint_s", "comm_fraction", "preemptible", "gpu_need")


def jobs_csv(rows: list[dict]) -> str:
    """jobs.csv text from rows keyed by COLUMNS (a missing optional column is left empty): the one
    writer of the format, for the generator and for the portal's live what-if."""
    buffer = io.StringIO()
    writer = csv.DictWriter(buffer, fieldnames=list(COLUMNS), lineterminator="\n", restval="")
    writer.writeheader()
    writer.writerows(rows)
    return buffer.getvalue()


def load_jobs(path: str | Path, teams: set[str] | None = None) -> list[JobSpec]:
    """Every row of jobs.csv, sorted by submit time; `teams` (if given) must hold each team."""
    path = Path(path)
    _read(path)  # a clear error for a missing file
    with open(path, newline="", encoding="utf-8") as handle:
        reader = csv.DictReader(handle)
        header = [h.strip() for h in reader.fieldnames or []]
        for column in REQUIRED_COLUMNS:
            if column not in header:
                raise SpecError(path, 1, column, "column missing from the header row")
        reader.fieldnames = header
        jobs, seen = [], set()
        for row in reader:
            if not any((v or "").strip() for k, v in row.items() if k is not None):
                continue  # a blank line
            job = _job_row(path, reader.line_num, row, teams)
            if job.job_id in seen:
                raise SpecError(path, reader.line_num, "job_id", f"{job.job_id!r} appears twice")
            seen.add(job.job_id)
            jobs.append(job)
    if not jobs:
        raise SpecError(path, None, None, "no jobs")
    return sorted(jobs, key=lambda j: (j.submit_s, j.line))


def _job_row(path: Path, line: int, row: dict, teams) -> JobSpec:
    def cell(name: str) -> str:
        value = row.get(name)
        if value is None and None in row:
            raise SpecError(path, line, name, "row has more cells than the header")
        return (value or "").strip()

    def number(name: str, default=None, kind=float, low=0.0, high=None):
        text = cell(name)
        if not text:
            if default is None:
                raise SpecError(path, line, name, "is required")
            return default
        try:
            value = kind(text)
        except ValueError:
            raise SpecError(path, line, name, f"{text!r} is not a number") from None
        if value < low or (high is not None and value > high):
            raise SpecError(path, line, name, f"{text} is out of range")
        return value

    def choice(name: str, options) -> str:
        text = cell(name)
        if text not in options:
            raise SpecError(path, line, name, f"{text!r} is not one of {'|'.join(options)}")
        return text

    if None in row and row[None]:
        raise SpecError(path, line, None, "row has more cells than the header")
    job_id, team = cell("job_id"), cell("team")
    for name, value in (("job_id", job_id), ("team", team)):
        if not value:
            raise SpecError(path, line, name, "is required")
    if teams is not None and team not in teams:
        raise SpecError(path, line, "team", f"{team!r} is not a team of the cluster file")
    priority = choice("priority", tuple(PRIORITY_CLASSES))
    gpus = number("gpus", kind=int)
    memory = number("gpu_mem_gb", 0.0)
    if gpus == 0 and memory <= 0:
        raise SpecError(path, line, "gpu_mem_gb", "a sub-GPU job (gpus 0) needs its memory")
    interval = number("checkpoint_interval_s", -1.0)
    preemptible_text = cell("preemptible").lower()
    if preemptible_text not in ("", "true", "false"):
        raise SpecError(path, line, "preemptible", f"{preemptible_text!r} is not true|false")
    # Read when present, never written by jobs_csv: the generator's files stay byte for byte.
    isolation_text = cell("accepts_no_isolation").lower()
    if isolation_text not in ("", "true", "false"):
        raise SpecError(path, line, "accepts_no_isolation", f"{isolation_text!r} is not true|false")
    return JobSpec(
        job_id=job_id, team=team, project=cell("project"), kind=choice("kind", JOB_KINDS),
        priority=priority, submit_s=number("submit_s"), duration_s=number("duration_s", low=1.0),
        gpus=gpus, gpu_mem_gb=memory, cpu_cores=number("cpu_cores", 4.0),
        gpu_models=tuple(m.strip() for m in cell("gpu_model").split("|") if m.strip()),
        checkpoint_interval_s=interval if interval > 0 else None,
        checkpoint_s=number("checkpoint_s", 0.0), comm_fraction=number("comm_fraction", 0.0, high=1.0),
        preemptible=(preemptible_text == "true") if preemptible_text else priority != "production",
        gpu_need=number("gpu_need", -1.0) if cell("gpu_need") else None,
        accepts_no_isolation=isolation_text == "true",
        line=line,
    )
