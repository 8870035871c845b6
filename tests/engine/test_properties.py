"""Property tests: random clusters and job streams, run for a few cycles, invariants hold."""

from collections import defaultdict

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from scheduling.engine import geometry_for, layout_errors, schedule
from scheduling.engine.policies import get_policy
from scheduling.engine.replay import apply_plan
from tests.engine.builders import MEMORY, NOW, job, node, snap

MODELS = ["H100-80GB", "A100-SXM4-40GB", "A30-24GB", "T4", "H200-141GB"]
CLASSES = ["production", "interactive", "training", "best-effort"]
TEAMS = ["a", "b", "c"]


@st.composite
def clusters(draw):
    nodes = []
    for i in range(draw(st.integers(1, 5))):
        model = draw(st.sampled_from(MODELS))
        gpus = draw(st.sampled_from([2, 4, 8]))
        mig = draw(st.sets(st.integers(0, gpus - 1))) if geometry_for(model) else ()
        nodes.append(node(f"n{i}", model=model, gpus=gpus, mig=mig,
                          tier=draw(st.sampled_from(["reserved", "on-demand", "spot"])),
                          leaf=f"l{draw(st.integers(0, 2))}",
                          interconnect=draw(st.sampled_from(["nvswitch", "nvlink-pairs",
                                                             "pcie"])),
                          cpu=draw(st.sampled_from([16, 64, 128]))))
    return nodes


@st.composite
def jobs(draw, prefix):
    out = []
    for i in range(draw(st.integers(1, 14))):
        cls = draw(st.sampled_from(CLASSES))
        fractional = draw(st.booleans())
        gpus = 0 if fractional else draw(st.sampled_from([1, 1, 2, 4, 8]))
        mem = draw(st.floats(1, 90)) if fractional else draw(st.sampled_from([0, 20, 60]))
        out.append(job(f"{prefix}{i}", team=draw(st.sampled_from(TEAMS)), cls=cls, gpus=gpus,
                       mem=round(mem, 1), gang_size=draw(st.sampled_from([1, 1, 2, 3])),
                       cpu_cores=draw(st.sampled_from([1, 8])),
                       checkpoint_interval_s=draw(st.sampled_from([None, 600])),
                       submitted_at=NOW - i))
    return out


queues = st.lists(st.tuples(st.sampled_from(TEAMS), st.sampled_from([0, 2, 8]),
                            st.sampled_from([None, 4, 16])),
                  unique_by=lambda q: q[0], max_size=3)


def check_gpus(snapshot):
    """No MIG overlap or invalid slot; no GPU over-committed in share or memory."""
    use = defaultdict(list)
    for run in snapshot.running:
        for alloc in run.allocations:
            use[(run.node, alloc.gpu_index)].append((run, alloc))
    for n in snapshot.nodes:
        for gpu in n.gpus:
            held = use[(n.name, gpu.index)]
            geometry = geometry_for(n.gpu_model)
            if gpu.mig_enabled:
                layout = [(i.profile, i.start) for i in gpu.mig_instances]
                assert layout_errors(geometry, layout) == []
                starts = [a.mig_start for _, a in held]
                assert all(a.mig_profile for _, a in held)
                assert len(starts) == len(set(starts))
                continue
            whole = [a for _, a in held if a.milli >= 1000]
            assert len(whole) <= 1 and (not whole or len(held) == 1)
            assert sum(a.milli for _, a in held) <= 1000
            assert sum(a.memory_gb for _, a in held if a.milli < 1000) <= gpu.memory_gb + 1e-6


def check_plan(before, plan, policy):
    nodes = {n.name: n for n in before.nodes}
    pending = {j.id: j for j in before.pending}
    members = defaultdict(int)
    for bind in plan.binds:
        j = pending[bind.job_id]
        members[j.id] += 1
        n = nodes[bind.node]
        if policy == "tessera" and (j.production or (j.gang_size > 1 and not j.checkpoints)):
            assert n.tier != "spot"
        for alloc in bind.allocations:
            if alloc.mig_profile:
                assert geometry_for(n.gpu_model).resolve(alloc.mig_profile).memory_gb >= \
                    j.gpu_memory_gb
            elif alloc.milli < 1000:
                assert alloc.memory_gb >= j.gpu_memory_gb
            else:
                assert MEMORY[n.gpu_model] >= j.gpu_memory_gb or policy == "k8s-default"
    if policy != "k8s-default":
        assert all(members[j] == pending[j].gang_size for j in members)
    if policy == "tessera":
        _check_quota(before, plan)
        _check_victims(before, plan, get_policy(policy).features.production_wins)


def _check_quota(before, plan):
    """Work marked within quota never exceeds the guarantee."""
    guaranteed = {q.team: q.guaranteed_gpus for q in before.queues}
    inside = defaultdict(float)
    for run in before.running:
        if not run.borrowed:
            inside[run.job.team] += _units(before, run.node, run.allocations)
    for bind in plan.binds:
        if not bind.borrowed:
            inside[bind.team] += _units(before, bind.node, bind.allocations)
    for team, units in inside.items():
        assert units <= guaranteed.get(team, 0.0) + 1e-6


def _units(snapshot, node_name, allocations):
    model = next(n.gpu_model for n in snapshot.nodes if n.name == node_name)
    total = 0.0
    for a in allocations:
        if a.mig_profile:
            g = geometry_for(model)
            total += g.gpu_fraction(g.resolve(a.mig_profile))
        else:
            total += min(a.milli, 1000) / 1000
    return total


def _check_victims(before, plan, production_wins):
    """No preemption of another team's within-quota job for a burst: only production inference
    takes it, within its own guarantee, or beyond it where the policy lets production win (f7e5444),
    and then only from a lower class."""
    runs = {r.job.id: r for r in before.running}
    jobs = {j.id: j for j in before.pending}
    usage = defaultdict(float)
    for r in before.running:
        usage[r.job.team] += _units(before, r.node, r.allocations)
    guaranteed = {q.team: q.guaranteed_gpus for q in before.queues}
    for p in plan.preemptions:
        victim, preemptor = runs[p.job_id], jobs[p.for_job_id]
        if p.reason == "consolidate":  # a move, not a loss: only jobs that restart cheaply
            assert victim.job.checkpoints and victim.job.preemptible and not victim.job.production
            assert victim.job.priority <= preemptor.priority
            continue
        if victim.job.team != preemptor.team and not victim.borrowed:
            need = preemptor.total_gpus or 0.0
            assert preemptor.production
            if production_wins:
                assert victim.job.priority < preemptor.priority
                continue
            assert usage[preemptor.team] + need <= guaranteed.get(preemptor.team, 0) + 1e-6 \
                or preemptor.fractional


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(clusters(), jobs("j"), jobs("k"), queues, st.sampled_from(["tessera", "k8s-default",
                                                                   "binpack", "tessera-consolidate"]))
def test_invariants_hold_over_cycles(cluster, first, second, qs, policy):
    state = snap(cluster, first, queues=qs)
    for cycle in range(3):
        plan = schedule(state, policy)
        check_plan(state, plan, policy)
        state = apply_plan(state, plan, now=state.now + 60)
        check_gpus(state)
        assert set(plan.pending) == {j.id for j in state.pending} - \
            {p.job_id for p in plan.preemptions}
        if cycle == 0:
            state = snap(state.nodes, state.pending + tuple(second), state.running,
                         state.queues, now=state.now)
