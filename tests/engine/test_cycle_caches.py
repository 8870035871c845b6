"""The steady cycle's shortcuts (bench/engine_cycle.py, README "Engine cycle at scale") give the
answers of the plain computations they replace, on the bench's own cluster over a sequence of
cycles: the release curve, the free units per model, the reservation candidates, the earliest
GPUs and a gang's sweep, the per-job caches, the no-slot memory, the caches kept between cycles
(MIG layout checks), the running members loaded inline, the job order's skipped heap entries and
PendingInfo made without its __init__."""

from __future__ import annotations

import heapq
from dataclasses import replace

import pytest

from bench.engine_cycle import build_snapshot
from scheduling.engine import nominations, schedule, state
from scheduling.engine.actions import common, evict, reserve
from scheduling.engine.actions.allocate import allocate
from scheduling.engine.actions.common import min_units
from scheduling.engine.actions.repartition import _free_and_idle_mig
from scheduling.engine.mig import canonical_model
from scheduling.engine.placement import allowed_models, as_whole
from scheduling.engine.placement.slices import find_slice
from scheduling.engine.plan import PendingInfo, pending_info
from scheduling.engine.policies import get_policy
from scheduling.engine.reasons import WaitingReason
from scheduling.engine.replay import apply_plan
from scheduling.engine.reservations import Reservation
from scheduling.engine.session import Session
from scheduling.engine.state import Member, NodeState
from scheduling.engine.supply import gpu_free_units, model_supply, release_curve
from scheduling.engine.tiers import tier_order
from scheduling.engine.types import Allocation
from tests.engine import builders


def _cycles(nodes: int = 48, seed: int = 3) -> list:
    """Each cycle's snapshot of the bench's run, until one plans nothing (the steady state)."""
    snapshot = build_snapshot(nodes, 10 * nodes, seed)
    out = []
    for _ in range(8):
        out.append(snapshot)
        plan = schedule(snapshot, "tessera")
        if not plan.binds and not plan.repartitions and not plan.preemptions:
            break
        snapshot = apply_plan(snapshot, plan, now=snapshot.now + 60)
    return out


@pytest.fixture(scope="module")
def cycles() -> list:
    return _cycles()


def _session(snapshot, policy: str = "tessera") -> Session:
    session = Session(snapshot, get_policy(policy).features)
    nominations.load(session)
    return session


def _without_timings(plan):
    return replace(plan, timings={})


def test_release_curve_is_the_merge_of_each_models_ends(cycles):
    for snapshot in cycles:
        session = _session(snapshot)
        supply = model_supply(session)
        for models in {allowed_models(session, j) for j in snapshot.pending}:
            ends = list(heapq.merge(*(supply[m].ends for m in models)))
            cumulative, running = [], 0.0
            for _, units in ends:
                running += units
                cumulative.append(running)
            free, total, times, freed = release_curve(session, models)
            assert times == [end for end, _ in ends] and freed == cumulative
            assert free == sum(supply[m].free for m in models) and total == sum(supply[m].total for m in models)


def test_free_units_per_model_are_the_sum_over_gpus_in_node_order(cycles):
    for snapshot in cycles:
        session = _session(snapshot)
        expected: dict[str, float] = {}
        for node in session.nodes.values():
            for gpu in node.gpus:
                expected[node.model] = expected.get(node.model, 0.0) + gpu_free_units(gpu)
        assert {m: s.free for m, s in model_supply(session).items()} == expected  # the same floats


def _plain_free_times(session, node):
    out = []
    for gpu in node.gpus if node.ready and node.offers_whole else ():
        if gpu.mig_enabled or not gpu.healthy or gpu.settling:
            continue
        users = [gpu.whole_job] if gpu.whole_job else [job_id for job_id, _ in gpu.shares]
        at = max((reserve._end(session, u) for u in users), default=session.now)
        if at < reserve.INF:
            out.append((at, gpu.index, gpu))
    return sorted(out, key=lambda e: (e[0], e[1]))


def _plain_candidates(session, job, taken):
    models, tiers = set(allowed_models(session, job)), tier_order(job, session.features.tiers)
    out = {}
    for node in session.nodes.values():
        if node.model in models and node.tier in tiers and reserve._host_members(node, job, 1):
            out[node.name] = [e for e in _plain_free_times(session, node) if e[2].key not in taken]
    return out


def _plain_earliest(session, job):
    times = _plain_candidates(session, job, session.book.taken)
    tiers = tier_order(job, session.features.tiers)
    total, best = (job.gpus or 1) * job.gang_size, None
    for name, free in times.items():
        node = session.nodes[name]
        if len(free) < total or reserve._host_members(node, job, job.gang_size) < job.gang_size:
            continue
        key = (free[total - 1][0], tiers.index(node.tier), name)
        if best is None or key < best[0]:
            best = (key, [g for _, _, g in free[:total]])
    return (best[0][0], best[1]) if best else None


def test_reservation_candidates_and_earliest_gpus_match_a_plain_scan(cycles):
    for snapshot in cycles:
        session = _session(snapshot)
        whole = [j for j in session.waiting() if as_whole(session, j)][:40]
        some_gpus = {gpu.key for node in list(session.nodes.values())[::5] for gpu in node.gpus[:3]}
        for job in whole:
            for taken in (set(), some_gpus):
                assert reserve._candidates(session, job, taken) == _plain_candidates(session, job, taken)
            if reserve.gang_nodes(session, job) == 1:
                assert reserve.earliest_gpus(session, job) == _plain_earliest(session, job)


def test_per_job_caches_answer_for_that_job_object_only(cycles):
    session = _session(cycles[0])
    job = next(j for j in session.waiting() if j.gpus == 0)
    assert allowed_models(session, job) and min_units(session, job) < 1
    other = replace(job, gpus=2, gpu_memory_gb=0)  # the same id, another request
    assert min_units(session, other) == 2.0
    assert allowed_models(session, other) == allowed_models(session, replace(job, id="fresh", gpus=2,
                                                                             gpu_memory_gb=0))


def test_plans_are_the_same_with_caches_kept_between_cycles_or_cleared(cycles):
    """MIG layout checks, profile names and layouts are kept between cycles (state.py): a cycle run with
    them warm plans what one run cold does, cycle after cycle."""
    for snapshot in cycles:
        state._PROFILES.clear()
        state._LAYOUTS.clear()
        cold = schedule(snapshot, "tessera")
        warm = schedule(snapshot, "tessera")
        assert _without_timings(warm) == _without_timings(cold)


def test_a_full_book_still_fixes_the_fair_shares_before_anything_is_placed(cycles):
    """The walk for blocked heads stops once the book is full, but not before a head's admission
    has worked out the cycle's fair shares: worked out later, after placements, they would differ."""
    session = _session(cycles[-1])
    for i in range(session.features.max_reservations):  # full from the start, as nominations can fill it
        session.book.add(Reservation(f"held-{i}", "team-0", 0, session.now, []))
    assert session.deserved is None
    reserve.reserve_heads(session)
    fresh = _session(cycles[-1])
    common.deserved(fresh)
    assert session.deserved == fresh.deserved


def _plain_load(snapshot, policy: str) -> Session:
    """A session loaded with occupy() for every running member, as before _load_running."""
    original = Session._load_running

    def plain(self, runs):
        for run in runs:
            self.occupy(Member(run.job.id, run.job.team, run.job, run.node, run.allocations,
                               run.borrowed, run.started_at, run.member), reindex=False)
    Session._load_running = plain
    try:
        return _session(snapshot, policy)
    finally:
        Session._load_running = original


def _gpu_view(gpu):
    return (gpu.key, gpu.whole_job, {s: (i[0], i[1], i[2]) for s, i in gpu.instances.items()}, gpu.busy,
            gpu.used_mask, gpu.compute_used, dict(gpu.shares), gpu.milli_used, gpu.mem_used, gpu.healthy,
            gpu.layout_errors, gpu.mig_key, gpu.share_key, gpu.idle_shapes)


@pytest.mark.parametrize("policy", ["tessera", "kueue"])  # kueue: a replica counts as one GPU
def test_loading_running_members_inline_is_occupy_for_each(cycles, policy):
    """The same GPUs, members, units, use and decayed entry (the same floats), and indexes in
    the same order."""
    for snapshot in cycles[1:]:
        fast, plain = _session(snapshot, policy), _plain_load(snapshot, policy)
        assert [_gpu_view(g) for n in fast.nodes.values() for g in n.gpus] == \
            [_gpu_view(g) for n in plain.nodes.values() for g in n.gpus]
        assert dict(fast.usage) == dict(plain.usage) and dict(fast.entry) == dict(plain.entry)
        assert fast.occupancy == plain.occupancy
        assert {j: [(m.node, m.units, m.allocations) for m in ms] for j, ms in fast.members.items()} == \
            {j: [(m.node, m.units, m.allocations) for m in ms] for j, ms in plain.members.items()}
        for index in ("whole", "mig", "share"):
            assert [(o, b, list(d)) for o, by in getattr(fast, index).items() for b, d in by.items()] == \
                [(o, b, list(d)) for o, by in getattr(plain, index).items() for b, d in by.items()]
        assert [(k, list(d)) for k, d in fast.idle.items()] == [(k, list(d)) for k, d in plain.idle.items()]


def _plain_ordered(session, jobs):
    """common.ordered without fair history as it was: the heap entry built after every job."""
    in_team = common.team_key if session.features.team_order else common.overall_key
    queues: dict = {}
    for job in sorted(jobs, key=in_team, reverse=True):
        queues.setdefault(job.team, []).append(job)
    weights = {team: max(session.queue(team).weight, 1e-9) for team in queues}
    heap = [(-q[-1].priority, 0.0, session.usage.get(t, 0.0) / weights[t], t) for t, q in queues.items()]
    heapq.heapify(heap)
    while heap:
        team = heapq.heappop(heap)[-1]
        line = queues[team]
        while line:
            yield line.pop()
            if line and heap:
                entry = (-line[-1].priority, 0.0, session.usage.get(team, 0.0) / weights[team], team)
                if heap[0] < entry:
                    heapq.heappush(heap, entry)
                    break


@pytest.mark.parametrize("every", [0, 1, 7])
def test_job_order_builds_a_teams_entry_again_only_when_it_could_differ(cycles, every):
    """The order of the waiting jobs, with a job given units every `every` jobs (a placement)
    while the order is walked, or none: the same as the plain walk's."""
    for snapshot in cycles:
        orders = []
        for walk in (common.ordered, _plain_ordered):
            session = _session(snapshot)
            out = []
            for i, job in enumerate(walk(session, session.waiting())):
                out.append(job.id)
                if every and i % every == 0:
                    session.usage[job.team] += 1.0
            orders.append(out)
        assert orders[0] == orders[1]


def test_pending_info_made_without_its_init_is_the_same_object():
    fast = pending_info("job-1", WaitingReason.FAIR_SHARE, "text", None, 3, 7)
    plain = PendingInfo("job-1", WaitingReason.FAIR_SHARE, "text", None, 3, 7)
    assert fast == plain and repr(fast) == repr(plain) and hash(fast) == hash(plain)
    assert type(fast) is PendingInfo and vars(fast) == vars(plain)


def test_a_mig_gpus_instances_come_from_its_layout_as_add_instance_would(cycles):
    """Each instance's profile, user and created flag, the memory-slice mask, the compute slices
    and the busy count of every MIG GPU, from the layout cache, as the plain adds give them."""
    checked = 0
    for snapshot in cycles:
        for node in snapshot.nodes:
            for gpu in NodeState(node, canonical_model(node.gpu_model)).gpus:
                if not gpu.mig_enabled or gpu.layout_errors:
                    continue
                expected, mask, compute, busy = {}, 0, 0, 0
                for inst in gpu.gpu.mig_instances:
                    profile = gpu.mig_geometry.resolve(inst.profile)
                    expected[inst.start] = [profile, inst.job_id, False]
                    mask |= profile.mask_at(inst.start)
                    compute += profile.compute_slices
                    busy += inst.job_id is not None
                assert (gpu.instances, gpu.used_mask, gpu.compute_used, gpu.busy) == (expected, mask, compute, busy)
                assert list(gpu.instances) == list(expected)
                checked += 1
    assert checked


def _plain_runners(session):
    """evict.stoppable_runners as two plain sorts: by class, then job id."""
    firsts = [ms[0] for ms in session.members.values()
              if ms[0].job is not None and not any(m.new for m in ms)]
    return sorted(firsts, key=lambda m: (m.job.priority, m.job_id))


def test_stoppable_runners_and_victim_sources_match_plain_filters(cycles):
    """The runners by class then job id, built per class; each action's victim sources (preemptible,
    borrowed for reclaim; settled ones for all but production) in one pass: the same lists,
    before and after a cycle's placements add members that may not be stopped."""
    checked = 0
    for snapshot in cycles:
        session = _session(snapshot)
        for placed in (False, True):
            if placed:
                allocate(session)
            runners = evict.stoppable_runners(session)
            assert runners == _plain_runners(session)
            settled = session.now - session.features.min_runtime_s
            for borrowed_only in (True, False):
                ours = [m for m in runners if m.known_job.preemptible and (m.borrowed or not borrowed_only)]
                old = [m for m in ours if m.started_at <= settled]
                assert evict._victim_sources(session, borrowed_only) == {
                    True: (ours, [m.known_job.priority for m in ours]),
                    False: (old, [m.known_job.priority for m in old])}
            checked += len(runners)
    assert checked


def test_repartitions_free_and_idle_mig_gpus_per_node_match_the_properties(cycles):
    """whole_free and idle inlined in one pass over a node's GPUs: the same count and list, with
    reservations masking GPUs (after allocate, the book at its lowest level) or not."""
    for snapshot in cycles:
        session = _session(snapshot)
        for masked in (False, True):
            if masked:
                allocate(session)
                session.book.level(float("-inf"))
            for node in session.nodes.values():
                plain = (node, sum(1 for g in node.gpus if g.whole_free),
                         [g for g in node.gpus if g.mig_enabled and g.idle])
                assert _free_and_idle_mig(node) == plain


def _plain_sweep(session, job, names, times):
    """The earliest time these nodes host every member, walking every GPU's free time in order."""
    count, members, placed = job.gpus or 1, job.gang_size, 0
    freed = dict.fromkeys(names, 0)
    host = {n: reserve._host_members(session.nodes[n], job, members) for n in names}
    for at, name in sorted((at, n) for n in names for at, _, _ in times[n]):
        before = min(freed[name] // count, host[name])
        freed[name] += 1
        placed += min(freed[name] // count, host[name]) - before
        if placed >= members:
            return at
    return None


def test_a_gangs_reservation_sweep_matches_walking_every_gpu(cycles):
    checked = 0
    for snapshot in cycles:
        session = _session(snapshot)
        for job in session.waiting():
            if not as_whole(session, job):
                continue
            gang = replace(job, gang_size=3)  # the bench's gangs are few: make some of every size
            times = reserve._candidates(session, gang, set())
            names = sorted(times)
            for group in (names, names[::2], names[:5]):
                assert reserve._sweep(session, gang, group, times) == _plain_sweep(session, gang, group, times)
                checked += 1
    assert checked > 100


class _Forgetful(dict):
    """A no-slot memory that remembers nothing: every search runs in full."""

    def __setitem__(self, key, value):
        pass


@pytest.mark.parametrize("policy", ["tessera", "kueue-mig", "volcano", "k8s-default"])
def test_plans_are_the_same_without_the_no_slot_memory(cycles, policy, monkeypatch):
    """placement.slices remembers a (tier, model) search that found no MIG slot or share until
    capacity comes back (session.releases); without that memory every plan is the same."""
    remembered = [_without_timings(schedule(snapshot, policy)) for snapshot in cycles]
    real_init = Session.__init__

    def forgetful_init(self, *args, **kwargs):
        real_init(self, *args, **kwargs)
        self.no_slot = _Forgetful()

    monkeypatch.setattr(Session, "__init__", forgetful_init)
    assert [_without_timings(schedule(snapshot, policy)) for snapshot in cycles] == remembered


def test_a_search_that_found_no_slot_runs_again_once_capacity_comes_back():
    # One H100 in MIG mode, its seven 1g.10gb instances all serving: no slot for a 9 GB job,
    # and none bigger. Once one instance's server stops, the same search finds that instance.
    servers = [builders.running(builders.inference(f"srv-{s}", mem=9.0), "n1", allocations=(
        Allocation(gpu_index=0, milli=143, memory_gb=10.0, mig_profile="1g.10gb", mig_start=s),))
        for s in range(7)]
    layout = {0: [("1g.10gb", s, f"srv-{s}") for s in range(7)]}
    session = _session(builders.snap([builders.node("n1", gpus=1, layouts=layout)], [], servers))
    job = builders.inference("new", mem=9.0)
    models = allowed_models(session, job)
    assert find_slice(session, job, models) is None
    assert find_slice(session, job, models) is None  # answered from the no-slot memory
    session.release(session.members["srv-3"][0])
    node_state, allocation = find_slice(session, job, models)
    assert (node_state.name, allocation.mig_profile, allocation.mig_start) == ("n1", "1g.10gb", 3)
