"""Live/simulator parity (issue 18): one situation, held once as the simulator's state and once as
database rows, gives the engine the same snapshot, field by field, so what the simulator
measures is what the live cycle would decide.

The simulator runs a small scenario to a settled moment: a GPU repartitioned by hand, a MIG
service, a training job resumed from saved work, one preempted and waiting with its checkpoint,
a notebook that took its GPUs, and a gang over two nodes of another leaf. `mirror` writes the
rows the live system keeps for that state (what its services and agents record), the adapter
builds the live snapshot from them, and every field of every engine object must match once job
names are mapped to row ids. Only tessera's mode is covered: the simulator's time-slice shares
(`gpu_milli`) and nominations belong to baselines the live cycle does not run.
"""

from __future__ import annotations

import heapq
import math
from dataclasses import fields, is_dataclass, replace
from datetime import UTC, date, datetime
from decimal import Decimal

import pytest

from billing.models import Rate
from billing.services import usage_interval_close, usage_interval_open
from portal.models import BusinessUnit, Project, Team
from scheduling import engine
from scheduling.defaults import defaults_ensure
from scheduling.models import CapacityTier, Gpu, Job, MigInstance, NetworkSwitch, Node, Placement, PriorityClass
from scheduling.simulator.run.jobs import RUNNING, WAITING
from scheduling.simulator.run.knobs import Knobs
from scheduling.simulator.run.loop import Simulation
from scheduling.snapshot import build_snapshot
from tests.simulator_run.helpers import cluster_doc, group, job, load

pytestmark = pytest.mark.django_db

BASE = datetime(2026, 12, 1, tzinfo=UTC).timestamp()
AT = BASE + 3900  # every job has settled: no release, bind or repartition in flight
PRICE = 2.5
NO_STALL = Knobs(restart_min_s=0.0, restart_max_s=0.0)  # the live system learns a restart's length
#   only from the job's next checkpoint; with none the two agree to the second


def scenario(tmp_path) -> Simulation:
    doc = cluster_doc([group(prefix="h100-", mig_enabled_gpus=1), group(prefix="pair-", count=2, leaf="leaf-2"),
                       # the device plugin in MPS mode (GFD's labels on the live side): replicas only;
                       # L4s have no MIG, so the share goes there and nowhere else
                       group(prefix="mps-", gpus=2, leaf="leaf-3", gpu_model="L4", gpu_memory_gb=24,
                             interconnect="pcie", mig_capable=False, gpu_sharing="mps", gpu_replicas=4)],
                      prices_per_gpu_hour={"H100-80GB": {"reserved": PRICE, "on-demand": 6.9, "spot": 2.8},
                                           "L4": {"reserved": 0.5, "on-demand": 0.8, "spot": 0.3}})
    spec, jobs = load(tmp_path, doc, [
        job("serve", submit=BASE, duration=100_000, gpus=0, mem=30, kind="inference", priority="production"),
        job("embed", submit=BASE, duration=100_000, gpus=0, mem=5, kind="inference", priority="production",
            gpu_model="L4"),
        job("train", submit=BASE, duration=20_000, gpus=4, mem=80, checkpoint_interval_s=600, checkpoint_s=20),
        # Saving takes longer than the grace period: a stop rolls it back to its last checkpoint.
        job("resume", submit=BASE, duration=20_000, gpus=2, mem=80, checkpoint_interval_s=600, checkpoint_s=900),
        job("gang", submit=BASE, duration=20_000, gpus=16, mem=80),
        job("notebook", submit=BASE + 2500, duration=50_000, gpus=2, mem=80, kind="interactive",
            priority="interactive"),
        job("horizon", submit=BASE + 50_000, duration=10, gpus=1, mem=80),
    ])
    sim = Simulation(spec, jobs, "tessera", seed=1, knobs=NO_STALL)
    sim.backend.ledger = []  # every released member, for the ledger rows (fair share over time)
    # A repartition confirmed at +500 (what the loop does when mig-manager is done)...
    sim.push(BASE + 500, lambda now: sim.backend.set_layout("h100-01", 7, True, [("7g.80gb", 0)], now))
    # ...and "train" stopped at +1000 with time to save (a node drain, say): it resumes at once.
    sim.push(BASE + 1000, lambda now: sim.on_released(now, sim.jobs["train"], sim.jobs["train"].epoch, True))
    _run_until(sim, AT)
    return sim


def _run_until(sim: Simulation, until: float) -> None:
    """Simulation.run's loop, stopped at `until`."""
    while sim.events and sim.events[0][0] <= until:
        now = sim.events[0][0]
        while sim.events and sim.events[0][0] == now:
            _, _, handler, args = heapq.heappop(sim.events)
            handler(now, *args)
        if sim.dirty or (sim.tick_due and sim.worth_a_tick(now)):
            sim.cycle(now)
        sim.tick_due = False


def simulator_snapshot(sim: Simulation) -> engine.Snapshot:
    """What Simulation.cycle would give the engine at AT."""
    waiting = [j for j in sim.jobs.values() if j.state == WAITING]
    running = [view for j in sim.holding.values() for view in sim.backend.running_view(j, AT)]
    in_flight = list(sim.preempts.values()) + list(sim.repartitions.values())
    return sim.backend.snapshot(AT, sim.backend.admitted(waiting), running, in_flight, sim.nominations)


# --- the rows the live system keeps for the same state --------------------------------------------

def when(seconds: float | None) -> datetime | None:
    return None if seconds is None else datetime.fromtimestamp(seconds, tz=UTC)


def mirror(sim: Simulation) -> dict[str, str]:
    """Rows for the simulator's cluster and jobs; returns simulator job id -> row id."""
    defaults_ensure(CapacityTier, PriorityClass)
    spine = NetworkSwitch.objects.create(name="spine-1", kind="spine",
                                         oversubscription=sim.spec.spine_oversubscription)
    for name, info in sim.infos.items():
        _node_rows(sim, name, info, spine)
    unit = BusinessUnit.objects.create(name="labs")
    for t in sim.spec.teams:
        Team.objects.create(name=t.name, business_unit=unit, guaranteed_gpus=Decimal(str(t.guaranteed_gpus)),
                            burst_limit_gpus=Decimal(str(t.burst_limit_gpus)), weight=t.weight)
    return {sim_job.spec.job_id: str(_job_rows(sim, sim_job).pk) for sim_job in sim.jobs.values()}


def _node_rows(sim: Simulation, name: str, info, spine: NetworkSwitch) -> None:
    """The node, its GPUs with their MIG layouts and layout age, and its rate."""
    g = info.group
    leaf, _ = NetworkSwitch.objects.get_or_create(name=g.leaf, defaults={"kind": "leaf", "parent": spine})
    tier = CapacityTier.objects.get(name=g.tier)
    Rate.objects.get_or_create(gpu_model=g.gpu_model, tier=tier, valid_from=date(2026, 1, 1),
                               defaults={"price_per_gpu_hour": Decimal(str(info.price))})
    node = Node.objects.create(name=name, tier=tier, leaf_switch=leaf, gpu_model=g.gpu_model,
                               interconnect=g.interconnect, cpu_cores=int(g.cpu_cores), memory_gb=int(g.memory_gb),
                               nics=g.nics, nic_gbps=round(g.nic_gb_s / 0.12),
                               # as the inventory poll reads GFD's sharing labels
                               gpu_sharing=g.gpu_sharing, gpu_replicas=g.gpu_replicas)
    for index in range(g.gpus_per_node):
        layout = sim.backend.layouts[name].get(index)
        gpu = Gpu.objects.create(node=node, index=index, uuid=f"{name}-gpu{index}", model=g.gpu_model,
                                 memory_gb=g.gpu_memory_gb, mig_capable=g.mig_capable,
                                 mig_enabled=layout is not None,
                                 layout_changed_at=when(sim.backend.changed_at[name].get(index)))
        for start, (profile, _job) in sorted((layout or {}).items()):
            MigInstance.for_profile(gpu, profile, start).save()


def _job_rows(sim: Simulation, sim_job) -> Job:
    s = sim_job.spec
    team = Team.objects.get(name=s.team)
    saved, saved_at = _checkpoint(sim_job)
    first = min((m.since for m in sim_job.bound.values()), default=None)
    row = Job.objects.create(
        team=team, project=Project.objects.get_or_create(team=team, name=s.project)[0], name=s.job_id, kind=s.kind,
        priority_class=PriorityClass.objects.get(name=s.priority), gpus=s.gpus, gpu_memory_gb=s.gpu_mem_gb,
        gpu_models="|".join(s.gpu_models), cpu_cores=s.cpu_cores, memory_gb=4.0 * sim_job.members,
        checkpoint_interval_s=s.checkpoint_interval_s, expected_runtime_s=s.duration_s, preemptible=s.preemptible,
        status=_status(sim_job), progress_s=saved, last_checkpoint_at=when(saved_at), started_at=when(first),
        borrowed=any(m.borrowed for m in sim_job.bound.values()))
    Job.objects.filter(pk=row.pk).update(submitted_at=when(s.submit_s))  # auto_now_add on create
    # What billing's ledger holds (billing/services.py): past runs' placements, ended, then the
    # current ones, each with its usage interval (fair share over time reads them).
    past = [(placed, ended) for job_id, placed, ended in sim.backend.ledger if job_id == s.job_id]
    for placed, ended in past + [(placed, None) for placed in sim_job.bound.values()]:
        for alloc in placed.allocations:
            gpu = Gpu.objects.get(node__name=placed.node, index=alloc.gpu_index)
            instance = None if alloc.mig_start is None or ended is not None else \
                gpu.mig_instances.get(start_slot=alloc.mig_start)
            placement = Placement.objects.create(
                job=row, gpu=gpu, mig_instance=instance, mig_profile=alloc.mig_profile or "",
                share_milli=min(alloc.milli, 1000), memory_gb=alloc.memory_gb, started_at=when(placed.since),
                ended_at=when(ended), end_reason="preempted" if ended is not None else "")
            usage_interval_open(placement=placement, at=when(placed.since))
            if ended is not None:
                usage_interval_close(placement=placement, at=when(ended), reason="preempted")
    return row


def _status(sim_job) -> str:
    assert sim_job.state in (RUNNING, WAITING), f"{sim_job.spec.job_id} is {sim_job.state}: not a settled moment"
    if sim_job.state == RUNNING:
        return Job.Status.RUNNING
    return Job.Status.PREEMPTED if sim_job.ran_before else Job.Status.PENDING


def _checkpoint(sim_job) -> tuple[float, float | None]:
    """(progress_s, last_checkpoint_at) as the checkpoint API leaves them: the work the last
    confirmed checkpoint saved and when. A waiting job keeps what it saved (a rolled-back
    run's last periodic checkpoint, or what it saved when told to stop)."""
    if sim_job.state == RUNNING and sim_job.stateful and sim_job.spec.checkpoint_interval_s:
        return sim_job.last_checkpoint(AT)
    return sim_job.done_s if sim_job.stateful else 0.0, None


# --- comparing --------------------------------------------------------------------------------------

def renamed(value, ids: dict[str, str]):
    """The simulator's snapshot with job names replaced by row ids, in the live adapter's order."""
    if isinstance(value, engine.Job):
        return replace(value, id=ids[value.id])
    if isinstance(value, engine.MigInstance) and value.job_id is not None:
        return replace(value, job_id=ids[value.job_id])
    if is_dataclass(value):
        return replace(value, **{f.name: renamed(getattr(value, f.name), ids) for f in fields(value)})
    if isinstance(value, tuple):
        return tuple(renamed(item, ids) for item in value)
    return value


def in_order(snapshot: engine.Snapshot) -> engine.Snapshot:
    return replace(snapshot, nodes=tuple(sorted(snapshot.nodes, key=lambda n: n.name)),
                   pending=tuple(sorted(snapshot.pending, key=lambda j: int(j.id))),
                   running=tuple(sorted(snapshot.running, key=lambda r: (int(r.job.id), r.member))),
                   queues=tuple(sorted(snapshot.queues, key=lambda q: q.team)))


def differences(sim, live, path: str) -> list[str]:
    if is_dataclass(sim):
        if type(sim) is not type(live):
            return [f"{path}: simulator {type(sim).__name__}, live {type(live).__name__}"]
        return [d for f in fields(sim) for d in differences(getattr(sim, f.name), getattr(live, f.name),
                                                            f"{path}.{f.name}")]
    if isinstance(sim, tuple) and isinstance(live, tuple):
        if len(sim) != len(live):
            return [f"{path}: simulator has {len(sim)}, live {len(live)}: {sim!r} / {live!r}"]
        return [d for i, (a, b) in enumerate(zip(sim, live, strict=True)) for d in differences(a, b, f"{path}[{i}]")]
    if ".usage_history.team_gpu_s" in path and isinstance(sim, float) and isinstance(live, float):
        # The ledger keeps a MIG instance's GPU fraction to 6 places (3/7 -> 0.428571).
        return [] if math.isclose(sim, live, rel_tol=1e-6) else [f"{path}: simulator {sim!r}, live {live!r}"]
    return [] if sim == live else [f"{path}: simulator {sim!r}, live {live!r}"]


@pytest.fixture
def both(tmp_path):
    sim = scenario(tmp_path)
    ids = mirror(sim)
    return in_order(renamed(simulator_snapshot(sim), ids)), in_order(build_snapshot(when(AT))), ids


def test_the_scenario_holds_what_the_comparison_needs(both):
    simulated, _live, ids = both
    running = {r.job.id: r for r in simulated.running}
    pending = {j.id: j for j in simulated.pending}
    assert set(running) == {ids["serve"], ids["embed"], ids["train"], ids["notebook"], ids["gang"]}
    assert set(pending) == {ids["resume"]}
    gang = [r for r in simulated.running if r.job.id == ids["gang"]]
    assert sorted(r.node for r in gang) == ["pair-01", "pair-02"] and sorted(r.member for r in gang) == [0, 1]
    assert running[ids["serve"]].allocations[0].mig_profile is not None
    # An MPS replica: the node's sharing mode and replicas reach the engine from both sides.
    assert running[ids["embed"]].node == "mps-01" and running[ids["embed"]].allocations[0].milli < 1000
    mps = next(n for n in simulated.nodes if n.name == "mps-01")
    assert (mps.sharing, mps.share_replicas) == ("mps", 4)
    gpus = {g.index: g for g in next(n for n in simulated.nodes if n.name == "h100-01").gpus}
    assert gpus[7].layout_changed_at == BASE + 500 and gpus[7].mig_enabled
    # Resumed and preempted jobs: less runtime left than they asked for, a checkpoint in this run.
    assert running[ids["train"]].job.expected_runtime_s < 20_000
    assert running[ids["train"]].job.last_checkpoint_at > running[ids["train"]].started_at
    assert pending[ids["resume"]].expected_runtime_s < 20_000
    assert simulated.in_flight == ()
    # Fair share over time: the ledger holds a past run ("train" stopped at +1000) and open ones.
    assert {team for team, _ in simulated.usage_history.team_gpu_s} and simulated.usage_history.since == BASE


def test_the_live_snapshot_carries_every_field_the_simulator_gives_the_engine(both):
    simulated, live, _ids = both
    assert differences(simulated, live, "snapshot") == []


def test_both_snapshots_lead_the_engine_to_the_same_plan(both):
    simulated, live, _ids = both
    plans = [replace(engine.schedule(snapshot, "tessera"), timings={}) for snapshot in (simulated, live)]
    assert plans[0] == plans[1]
    assert {info.eta for info in plans[0].pending.values()} != {None}  # ETAs read the runtimes left
