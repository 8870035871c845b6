"""reclaim and preempt: pick running jobs to stop so that a waiting job can start later.

Victims, best first: borrowed before within-quota, then by the policy's `victim_order`: the
lowest class, then the least work lost since the last checkpoint (the baselines), or the least
GPU-seconds lost, then the lowest class, then the shortest runtime (tessera). A job within
another team's guarantee is never stopped to serve a burst; only production inference within
its own guarantee may take it, or with `production_wins` (tessera) production inference beyond
its guarantee too (DESIGN: "production inference always gets resources"; it never goes to spot,
so at a serving peak beyond the serving teams' guarantees nothing else frees room for it).
Borrowed victims still come first (victim_key). A job that (re)started less than
`min_runtime_s` ago is stopped only for production. The preemptor is not placed in this cycle:
it waits until the backend confirms the release. A gang that needs several nodes chooses victims
over the k cheapest nodes together (gang_victims.py). With `patient_stop_s` (tessera) a job not
production waits a while rather than stop victims that would lose much unsaved work.
"""

from __future__ import annotations

from bisect import bisect_left
from collections import defaultdict
from collections.abc import Callable, Mapping
from operator import attrgetter
from typing import TYPE_CHECKING

from ..nominations import nominate as hold_for
from ..placement import allowed_models, as_whole
from ..placement.slices import some_replica_holds
from ..plan import Preempt
from ..reasons import PreemptReason, WaitingReason
from .common import fair_ratio, min_units, ordered, refused, request_shape, within_guarantee
from .gang_victims import Cost, fits_now, freeable_gpus, gang_nodes, gang_victims, per_node_gpus, shortest_prefix

if TYPE_CHECKING:
    from ..session import RequestShape, Session, VictimKey
    from ..state import Member
    from ..types import Job

# Whether a running job may be stopped for a waiting one (the waiting job within its guarantee).
Eligible = Callable[["Member", "Job", bool], bool]


NODE_TRIES = 12


def reclaim(session: Session) -> None:
    def eligible(member: Member, job: Job, _within: bool) -> bool:
        victim = member.known_job
        return (member.borrowed and victim.team != job.team and victim.preemptible
                and (job.production or not victim.production))
    _evict_for(session, eligible, PreemptReason.RECLAIM, need_guarantee=True)


def preempt(session: Session) -> None:
    wins = session.features.production_wins

    def eligible(member: Member, job: Job, within: bool) -> bool:
        victim = member.known_job
        if not victim.preemptible or victim.priority >= job.priority:
            return False
        if victim.team == job.team or member.borrowed or session.features.priority_preemption:
            return True
        # Without `wins`, serving-heavy's peak (serving teams far beyond their guarantees, no
        # spot for production) left sub-GPU production waiting hours (p99 median 13,861 s;
        # docs/experiments/issue-18-log.md).
        return job.production and (within or wins)
    _evict_for(session, eligible, PreemptReason.PREEMPT, need_guarantee=False)


def _evict_for(session: Session, eligible: Eligible, reason: PreemptReason, need_guarantee: bool) -> None:
    """`need_guarantee` (reclaim): only borrowed victims, as `eligible` asks whatever the waiting
    job; each pool below is built from the runners it could take only."""
    attempts = session.features.preempt_attempts
    sources = _victim_sources(session, borrowed_only=need_guarantee)
    if not sources[True][0]:
        return
    failed: set[tuple[RequestShape, str, int]] = set()  # request shapes that found no victims this cycle

    def may_find(job: Job) -> bool:  # False: its pool below is empty whatever else it asks
        source, priorities = sources[job.production]
        return bool(source) and (need_guarantee or priorities[0] < job.priority)

    # Leaving out jobs that could find no victim changes no one's turn: nothing is placed here,
    # so the order of the others is the same (common.ordered).
    waiting = [job for job in undecided_waiting(session) if may_find(job)]
    # The pool depends on the job only through these, and on which runners are already stopping:
    # built once per kind of waiting job, not once per job (a scan of every runner each).
    pools: dict[tuple[int, bool, str, bool, int], list[Member]] = {}
    for job in ordered(session, waiting):
        if attempts <= 0:
            return
        key = (request_shape(session, job), job.team, job.priority)
        if key in failed:
            continue
        units = min_units(session, job)
        within = not session.features.quota or within_guarantee(session, job, units)
        if need_guarantee and not within:
            continue
        if not within and refused(session, job, units):
            continue
        pool_key = (job.priority, job.production, job.team, within, len(session.preempting))
        pool = pools.get(pool_key)
        if pool is None:
            source, priorities = sources[job.production]
            # Only a lower class can be preempted (reclaim also needs one: production aside, a
            # victim's class never matters less than its borrowing); skip the rest cheaply.
            lower = source if need_guarantee else source[:bisect_left(priorities, job.priority)]
            pool = pools[pool_key] = [m for m in lower if m.job_id not in session.preempting
                                      and eligible(m, job, within)]
        if not pool:
            continue
        attempts -= 1
        victims = (_most_over_first(session, job, pool) if need_guarantee
                   else _victims_under_reservations(session, job, pool, within_limit=True))
        if not victims and not need_guarantee and job.production and not as_whole(session, job):
            # no place within its burst limit can be freed: a whole GPU, over it by the excess
            victims = _victims_under_reservations(session, job, pool)
        if not victims:
            failed.add(key)
        elif not _waits_instead(session, job, victims):
            nominate(session, job, victims, reason)


def _victim_sources(session: Session, borrowed_only: bool) -> dict[bool, tuple[list[Member], list[int]]]:
    """The stoppable runners any waiting job could take (preemptible; borrowed for reclaim) and
    their classes (sorted), for production (True) and for the rest (False): only those that
    started over `min_runtime_s` ago. Thrash guard: a victim that just (re)started loses its
    restart cost again for nothing, so it is safe from everything but production for a while.
    One pass reading each job once: three passes through its property cost 20 ms a cycle."""
    settled = session.now - session.features.min_runtime_s
    runners: list[Member] = []
    classes: list[int] = []
    settled_runners: list[Member] = []
    settled_classes: list[int] = []
    for member in stoppable_runners(session):
        job = member.job
        if job is None or not job.preemptible or (borrowed_only and not member.borrowed):
            continue  # (stoppable runners all have a job)
        runners.append(member)
        classes.append(job.priority)
        if member.started_at <= settled:
            settled_runners.append(member)
            settled_classes.append(job.priority)
    return {True: (runners, classes), False: (settled_runners, settled_classes)}


def _waits_instead(session: Session, job: Job, victims: list[str]) -> bool:
    """Whether `job` waits rather than stop these victims: a job not production that has waited
    less than `patient_stop_s` stops no set losing more than `patient_max_lost_s` GPU-seconds of
    unsaved work (a job that never checkpoints loses all it ran); it is asked again each cycle,
    when the victims may have ended or saved, or cheaper ones appeared. Tuning split (issue 18,
    docs/experiments/issue-18-log.md): 16 GPU-h within 1 h cut lost work 1,098 -> 948 GPU-h
    summed, 2 of 20 scenarios changed, both higher in net utilisation (`light` 105 0.465 ->
    0.570); 8 GPU-h cut more lost work but stopped more jobs and lowered the worst scenario."""
    features = session.features
    return (features.patient_stop_s > 0 and not job.production
            and session.now - job.submitted_at < features.patient_stop_s
            and _disruption(session, victims)[1] > features.patient_max_lost_s)


def _most_over_first(session: Session, job: Job, pool: list[Member]) -> list[str] | None:
    """reclaim with fair_history: borrowed GPUs come back first from the teams most over their
    share over time; the next teams' join the pool only when those free too little (1, 2, 4...
    teams, so a cycle with many teams still tries only a few pools). The preference never buys
    disruption: a smaller pool's victims are taken only when they stop no more GPUs and lose no
    more work than the whole pool's cheapest. Without that bound a 64-GPU gang went for an 8-GPU
    guarantee that one 8-GPU job elsewhere would have freed (256-GPU simulation, seed 31:
    reclaims stopped 1.9x the GPUs their jobs needed, utilisation 0.758 -> 0.701)."""
    teams = sorted({m.team for m in pool})
    best = _victims_under_reservations(session, job, pool)
    if not session.features.fair_history or len(teams) < 2 or not best:
        return best
    bound = _disruption(session, best)
    teams.sort(key=lambda t: -fair_ratio(session, t))  # stable: ties by name
    size = 1
    while size < len(teams):
        chosen = set(teams[:size])
        victims = _victims_under_reservations(session, job, [m for m in pool if m.team in chosen])
        stopped, lost = _disruption(session, victims) if victims else (0.0, 0.0)
        if victims and stopped <= bound[0] and lost <= bound[1]:
            return victims
        size *= 2
    return best


def _disruption(session: Session, victims: list[str]) -> tuple[float, float]:
    """(GPUs stopped, GPU-seconds of work lost) if these victims stop now."""
    firsts = [session.members[v][0] for v in victims]
    return (sum(m.units for v in victims for m in session.members[v]),
            sum(lost_work(session, m) for m in firsts))


def _victims_under_reservations(session: Session, job: Job, pool: list[Member],
                                within_limit: bool = False) -> list[str] | None:
    """Victims are sought where the job may go: not on GPUs reserved (or nominated) for a job of
    its class or above, except its own (kube-scheduler's preemption dry run also filters with
    the nominated pods added)."""
    if not session.features.reserve and not session.book:
        return find_victims(session, job, pool, within_limit)
    with session.book.seen_by(job):
        return find_victims(session, job, pool, within_limit)


def stoppable_runners(session: Session) -> list[Member]:
    """First member of every running job the engine may stop (not ones placed this cycle),
    lowest class first, then by job id. Kept until a member comes or goes (reclaim and preempt
    both ask); callers must not change the list. One list per class, each sorted by job id: the
    sort by class through each member's job cost more than the rest (4,000 nodes, 24,048 jobs)."""
    if session.runners is not None and session.runners[0] == session.occupancy:
        return session.runners[1]
    by_class: dict[int, list[Member]] = {}
    for members in session.members.values():
        first = members[0]
        job = first.job
        if job is None or (first.new if len(members) == 1 else any(m.new for m in members)):
            continue
        same = by_class.get(job.priority)
        if same is None:
            same = by_class[job.priority] = []
        same.append(first)
    firsts = []
    for priority in sorted(by_class):
        firsts += sorted(by_class[priority], key=_JOB_ID)  # job ids differ: one first each
    session.runners = (session.occupancy, firsts)
    return firsts


_JOB_ID = attrgetter("job_id")


def undecided_waiting(session: Session) -> list[Job]:
    """Waiting jobs no earlier action has explained or found victims for."""
    return [j for j in session.waiting()
            if j.id not in session.reasons and j.id not in session.nominated]


# Services hold no training progress: a stopped server (or notebook) comes back without redoing
# work, so under "lost-work" it loses none (the simulator's accounting, simulator/run/jobs.py).
# Declaring a training job a service therefore makes it the first victim: the lie never pays.
SERVICE_KINDS = ("inference", "interactive")


def lost_work(session: Session, member: Member) -> float:
    """GPU-seconds the job loses if stopped now: the time since its last checkpoint (since it
    started where it reports none, so hiding checkpoints never looks cheaper) times all its
    members' GPUs. The "class" order (the baselines) counts a checkpoint only for a job that
    declares an interval, as it always has; "lost-work" counts any checkpoint time reported."""
    job = member.known_job
    by_lost_work = session.features.victim_order == "lost-work"
    if by_lost_work and job.kind in SERVICE_KINDS:
        return 0.0
    since = member.started_at
    trusted = job.checkpoints or by_lost_work
    if trusted and job.last_checkpoint_at is not None:
        since = max(since, job.last_checkpoint_at)
    return max(0.0, session.now - since) * sum(m.units for m in session.members[job.id])


def victim_key(session: Session, member: Member) -> VictimKey:
    """Lowest first: borrowed before within-quota, then by the policy's victim_order (class then
    work lost, or work lost then class then the shortest runtime, as kube-scheduler breaks ties
    by the latest start)."""
    keys = session.victim_keys  # fixed for the cycle: now, members
    key = keys.get(member.job_id)
    if key is None:
        job = member.known_job
        lost = lost_work(session, member)
        quota = 0 if member.borrowed else 1
        if session.features.victim_order == "lost-work":
            key = (quota, lost, job.priority, session.now - member.started_at, job.id)
        else:
            key = (quota, job.priority, lost, 0.0, job.id)
        keys[member.job_id] = key
    return key


def victim_set_cost(session: Session) -> Cost:
    """How a set of victims is ranked against another: within-quota victims first, then the
    policy's order (highest class then work lost, or work lost then highest class), then count."""
    if session.features.victim_order == "lost-work":
        return _cost_by_lost_work
    return _cost_by_class


def _cost_by_class(keys: Mapping[str, VictimKey], chosen: list[str]) -> tuple[float, ...]:
    if not chosen:
        return (0, 0, 0.0, 0)
    return (sum(keys[v][0] for v in chosen), max(keys[v][1] for v in chosen),
            sum(keys[v][2] for v in chosen), len(chosen))


def _cost_by_lost_work(keys: Mapping[str, VictimKey], chosen: list[str]) -> tuple[float, ...]:
    if not chosen:
        return (0, 0.0, 0, 0)
    return (sum(keys[v][0] for v in chosen), sum(keys[v][1] for v in chosen),
            max(keys[v][2] for v in chosen), len(chosen))


def find_victims(session: Session, job: Job, pool: list[Member], within_limit: bool = False) -> list[str] | None:
    """The cheapest set of victims after which `job` fits (`within_limit`: in a place its burst
    limit takes in full): on one node, or over the k cheapest nodes for a gang that needs k
    nodes; else None."""
    keys = {m.job_id: victim_key(session, m) for m in pool}
    by_node = victims_by_node(session, job, pool)
    if gang_nodes(session, job) > 1:
        return gang_victims(session, job, by_node, keys, victim_set_cost(session))
    nodes = sorted(by_node, key=lambda n: (min(keys[v] for v in by_node[n]), n))
    best = None
    set_cost = victim_set_cost(session)
    for node in nodes[:NODE_TRIES]:
        chosen = victims_on(session, job, sorted(by_node[node], key=keys.__getitem__), within_limit)
        if chosen is not None:
            cost = set_cost(keys, chosen)
            if best is None or cost < best[0]:
                best = (cost, chosen)
    return best[1] if best else None


def victims_by_node(session: Session, job: Job, pool: list[Member]) -> dict[str, set[str]]:
    """Victims per node of an allowed model, leaving out nodes where even stopping all of
    them frees too few whole GPUs for a whole-GPU job (the probe would only fail there)."""
    models = set(allowed_models(session, job))
    by_node = defaultdict(set)
    for first in pool:
        for member in session.members[first.job_id]:
            if session.nodes[member.node].model in models:
                by_node[member.node].add(first.job_id)
    if not as_whole(session, job):
        return by_node
    need = per_node_gpus(session, job)
    # A node whose device plugin shares (MPS, time-slicing) offers no whole GPU under any policy
    # (state.py free_whole), so stopping pods there helps a whole-GPU job never, and only a sub-GPU
    # job of a replica_or_whole policy (features.py) that one of its replicas could hold. Left in,
    # such nodes (cheap shares ranked first) could fill all NODE_TRIES and hide the node that frees.
    replica = session.features.replica_or_whole and job.fractional
    return {n: v for n, v in by_node.items()
            if ((node := session.nodes[n]).offers_whole and freeable_gpus(node, v) >= need)
            or (replica and node.offers_shares and some_replica_holds(session, job, node.model, node.tier))}


def victims_on(session: Session, job: Job, ordered_victims: list[str], within_limit: bool = False) -> list[str] | None:
    """The shortest prefix of these victims (best first) after which `job` fits, or None."""
    fits = fits_within_limit if within_limit else fits_now
    return shortest_prefix(session, ordered_victims, lambda: fits(session, job))


def fits_within_limit(session: Session, job: Job) -> bool:
    """fits_now in a place the job's burst limit takes in full. Production that must stop work
    stops it for a place of its size where one can be freed, not for a whole GPU its limit
    takes only by the excess (common.refuses_only_the_excess): serving-heavy, tuning seed 103,
    a training job stopped for a 1.7 GB replica left `search` no room for the next one."""
    if not session.features.quota:
        return fits_now(session, job)
    used = session.usage.get(job.team, 0.0)  # before the probe counts its own place
    return fits_now(session, job, lambda probe: refused(session, job, probe.units, used, fair=False) is None)


# What a job waits for once its victims are asked to stop, by the Preempt's reason.
WAITING = {PreemptReason.CONSOLIDATE: (WaitingReason.WAITING_FOR_CONSOLIDATION, "are moving to free GPUs elsewhere")}
STOPPING = (WaitingReason.WAITING_FOR_PREEMPTION, "asked to stop")


def nominate(session: Session, job: Job, victims: list[str], reason: PreemptReason) -> None:
    for victim in victims:
        session.preemptions.append(Preempt(job_id=victim, for_job_id=job.id, reason=reason))
        session.preempting.add(victim)
    session.nominated[job.id] = len(victims)
    if reason == PreemptReason.PREEMPT:
        hold_for(session, job, victims, job.priority)
    elif reason == PreemptReason.RECLAIM:  # the victims may be of a higher class (nominations.py)
        hold_for(session, job, victims, max([job.priority] + [session.members[v][0].known_job.priority
                                                              for v in victims if v in session.members]))
    code, what = WAITING.get(reason, STOPPING)
    session.reasons[job.id] = (
        code, f"{len(victims)} job(s) {what} to make room ({', '.join(victims)}); it starts once "
        "their GPUs are released")
