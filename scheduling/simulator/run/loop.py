"""The event loop: simulated time, the real engine, the simulated backend.

Cycles run at arrivals, departures and releases (whenever the state changed), and every
PERIOD_S while something waits. Nothing sleeps: time jumps from event to event.
"""

from __future__ import annotations

import heapq
import itertools
import random
import time

from scheduling.engine import schedule
from scheduling.engine.idle import NODE_STATE

from .backend import Backend
from .cluster import comm_efficiency, need_units, node_infos
from .jobs import BACKOFF, DONE, RUNNING, STOPPING, WAITING, SimJob, member_layout
from .knobs import DEFAULT_KNOBS, Knobs
from .measure import Meter, NodeBill
from .policies import SHARE_EFFICIENCY, mode_for
from .serving import credit
from .spec import ClusterSpec, JobSpec


class Simulation:
    def __init__(self, spec: ClusterSpec, jobs: list[JobSpec], policy: str, seed: int,
                 knobs: Knobs = DEFAULT_KNOBS, progress=None, horizon: float | None = None):
        self.spec, self.policy, self.seed, self.knobs = spec, policy, seed, knobs
        self.mode = mode_for(policy)
        self.infos = node_infos(spec)
        self.backend = Backend(spec, self.infos, self.mode)
        # A replay of live history ends at "now", which may be well after its last submission.
        self.horizon = max(j.submit_s for j in jobs) if horizon is None else horizon
        self.meter = Meter(self.horizon)
        self.events: list = []
        self.seq = itertools.count()
        self.jobs: dict[str, SimJob] = {}
        self.holding: dict[str, SimJob] = {}    # jobs with bound pods
        self.preempts: dict[str, object] = {}   # victim id -> Preempt, until released
        self.nominations: tuple = ()            # the last plan's, for the next snapshot
        self.repartitions: dict[tuple, object] = {}
        self.reconfiguring: dict[str, float] = {}  # node -> when mig-manager is done with it
        self.reclaiming: set[str] = set()
        self.node_since = dict.fromkeys(self.infos, 0.0)
        self.bills = {name: NodeBill(knobs.scale_down_s) for name, info in self.infos.items()
                      if info.group.tier != "reserved"}
        self.dirty, self.tick_due, self.next_tick = True, False, -1.0
        self.last_plan_empty, self.last_cycle = False, -1e18
        self.cycles, self.engine_s = 0, 0.0
        self.first_eta: dict[str, float | None] = {}  # job -> the first start estimate it was shown
        self.idle_causes: dict[tuple[str, int], str] = {}  # the last plan's cause per idle GPU
        self.progress = progress
        for job in jobs:
            self.push(job.submit_s, self.on_submit, job)
        self.draw_reclaims()

    # --- events -----------------------------------------------------------------------------

    def push(self, when: float, handler, *args) -> None:
        heapq.heappush(self.events, (when, next(self.seq), handler, args))

    def draw_reclaims(self) -> None:
        """Spot reclaims: a Poisson process per spot node, seeded by the run seed and the node
        name, so every policy of a run faces the same reclaims."""
        rate = self.spec.reclaims_per_node_hour / 3600
        for name in reclaim_nodes(self.infos):
            for when in poisson_times(rate, self.horizon, f"{self.seed}/{name}"):
                self.push(when, self.on_reclaim, name)

    def run(self) -> dict:
        while self.events and self.events[0][0] <= self.horizon:
            now = self.events[0][0]
            while self.events and self.events[0][0] == now:
                _, _, handler, args = heapq.heappop(self.events)
                handler(now, *args)
            if self.dirty or (self.tick_due and self.worth_a_tick(now)):
                self.cycle(now)
            self.note_idle(now)
            self.tick_due = False
            if self.progress:
                self.progress(now)
        self.close(self.horizon)
        result = self.meter.result()
        result.update(cycles=self.cycles, engine_s=round(self.engine_s, 1))
        return result

    def worth_a_tick(self, now: float) -> bool:
        # The engine is deterministic: an unchanged state that planned nothing plans nothing
        # again, except for what depends on the clock (hysteresis, backfill); re-check that.
        return not self.last_plan_empty or now - self.last_cycle >= self.knobs.recheck_s

    def on_submit(self, now: float, spec: JobSpec) -> None:
        members, per = member_layout(spec, self.backend.max_per_node)
        self.jobs[spec.job_id] = SimJob(spec, members, per, queued_at=now)
        self.dirty = True

    def on_tick(self, now: float) -> None:
        self.tick_due = now == self.next_tick

    # --- a cycle ----------------------------------------------------------------------------

    def cycle(self, now: float) -> None:
        waiting = [j for j in self.jobs.values() if j.state == WAITING]
        pending = self.backend.admitted(waiting)
        running = [view for j in self.holding.values() for view in self.backend.running_view(j, now)]
        in_flight = list(self.preempts.values()) + list(self.repartitions.values())
        snapshot = self.backend.snapshot(now, pending, running, in_flight, self.nominations)
        started = time.perf_counter()
        plan = schedule(snapshot, self.policy, idle_causes=True)
        self.engine_s += time.perf_counter() - started
        self.cycles += 1
        self.note_etas(plan)
        self.idle_causes = plan.idle
        self.apply(plan, now)
        self.nominations = plan.nominations
        self.dirty = False
        if plan.actions or not self.last_plan_empty:
            self.last_cycle = now
        self.last_plan_empty = not plan.actions
        if waiting and self.next_tick <= now:
            self.next_tick = now + self.knobs.period_s
            self.push(self.next_tick, self.on_tick)

    def note_idle(self, now: float) -> None:
        """Idle GPU units by cause from now until the next event: a node's state first (the
        engine's last view may predate it), else the last plan's cause for the GPU."""
        by_cause: dict[str, float] = {}
        for key, state, free in self.backend.idle_gpus():
            cause = str(NODE_STATE.get(state) or self.idle_causes.get(key, "unattributed"))
            by_cause[cause] = by_cause.get(cause, 0.0) + free
        self.meter.idle(now, by_cause)

    def note_etas(self, plan) -> None:
        """The first estimated start each waiting job gets, as the portal would show it."""
        for pod_id, info in plan.pending.items():
            job = self.backend.pods[pod_id][0]
            if job.first_start is None and job.spec.job_id not in self.first_eta:
                self.first_eta[job.spec.job_id] = info.eta

    def apply(self, plan, now: float) -> None:
        for rep in plan.repartitions:
            key = (rep.node, rep.gpu_index)
            self.repartitions[key] = rep
            self.push(self.reconfigure(rep.node, now), self.on_layout, key, rep)
        for pre in plan.preemptions:
            self.preempt(pre, now)
        touched = {}
        for bind in plan.binds:
            job, member = self.backend.pods[bind.job_id]
            member = bind.member if self.mode.gang else member
            self.backend.bind(job, member, bind.node, bind.allocations, bind.borrowed, now)
            if bind.node in self.bills:
                self.bill(bind.node, self.bills[bind.node].bind(now))
            self.holding[job.spec.job_id] = job
            touched[job.spec.job_id] = job
        for job in touched.values():
            if job.doomed:
                job.state = STOPPING
                self.push(now + self.knobs.oom_after_s, self.on_oom, job, job.epoch)
            elif job.complete:
                self.start(job, now)

    def preempt(self, pre, now: float) -> None:
        job = self.backend.pods[pre.job_id][0]
        if job.state != RUNNING:
            return
        job.state = STOPPING
        saves = job.can_save_within(self.knobs.grace_s)
        delay = max(1.0, job.spec.checkpoint_s) if saves else self.knobs.stop_s
        self.preempts[pre.job_id] = pre
        self.push(now + delay, self.on_released, job, job.epoch, saves)

    def start(self, job: SimJob, now: float) -> None:
        placement, need, share = {}, 0.0, None
        for placed in job.bound.values():
            group = self.infos[placed.node].group
            indices = placement.setdefault(placed.node, [group, []])[1]
            indices.extend(a.gpu_index for a in placed.allocations)
            need += self.member_need(job, group, placed)
            alloc = placed.allocations[0]
            if not job.spec.gpus and alloc.milli < 1000:
                share = "mig" if alloc.mig_profile else "timeslice" if self.mode.timeslice else "share"
        groups = [(g, tuple(idx)) for g, idx in placement.values()]
        eff = comm_efficiency(job.spec, groups, self.spec.spine_oversubscription)
        eff *= SHARE_EFFICIENCY[share] if share else 1.0
        job.state, job.rate, job.useful = RUNNING, (eff if job.stateful else 1.0), need * eff
        stall = self.restart_stall(job) if job.ran_before else 0.0
        ready = max([now] + [self.reconfiguring.get(m.node, now) for m in job.bound.values()])
        job.run_since = ready + stall
        if not job.stateful:  # a service's window is fixed: the stall only stops it serving
            job.done_s = min(job.spec.duration_s, job.done_s + job.run_since - now)
        self.meter.waits[job.spec.priority].append(now - job.queued_at)
        if job.first_start is None:
            job.first_start = now
            self.meter.queue_delays[job.spec.kind].append(now - job.spec.submit_s)
            if job.spec.job_id in self.first_eta:  # it waited at least one cycle
                self.meter.eta(job.spec.kind, self.first_eta[job.spec.job_id], now)
        self.push(job.run_since + job.remaining_wall(), self.on_finish, job, job.epoch)

    def member_need(self, job: SimJob, group, placed) -> float:
        """GPUs a member counts for at full efficiency: a serving replica that declares its
        throughput need what it can serve of it there (serving.py); else whole-GPU jobs their
        GPUs, sub-GPU jobs the compute share of the smallest MIG slice holding their memory,
        capped at the GPU share they hold (the same units as allocation)."""
        if job.spec.kind == "inference" and job.spec.gpu_need is not None:
            return credit(job.spec.gpu_need / job.members, group.gpu_model, placed.allocations)
        if job.spec.gpus:
            return job.per_member_gpus
        # Never more than it holds: four 20 GB notebooks sharing one 80 GB GPU count for that
        # GPU at most, not 4 x 2/7 of one (a 2g.20gb slice's compute share each).
        return min(need_units(job.spec, group), placed.units)

    def restart_stall(self, job: SimJob) -> float:
        """Pod start plus checkpoint (or model weights) restore: log-uniform over the knobs'
        range, seeded by run, job and stop count, so identical histories draw identical stalls."""
        low, high = self.knobs.restart_min_s, max(self.knobs.restart_min_s, self.knobs.restart_max_s)
        if high <= 0:
            return 0.0
        rng = random.Random(f"{self.seed}/{job.spec.job_id}/{job.epoch}")
        return low * (high / low) ** rng.random() if low > 0 else rng.uniform(0, high)

    # --- stopping ---------------------------------------------------------------------------

    def on_finish(self, now: float, job: SimJob, epoch: int) -> None:
        if epoch != job.epoch or job.state not in (RUNNING, STOPPING):
            return
        self.stop(job, now, saves=True)
        job.state = DONE
        self.meter.counts["completed"] += 1
        self.meter.jct[job.spec.kind].append(now - job.spec.submit_s)

    def on_released(self, now: float, job: SimJob, epoch: int, saves: bool) -> None:
        if epoch != job.epoch:
            return
        self.meter.counts["preemptions"] += 1
        pre = self.preempts.get(job.spec.job_id)
        self.stop(job, now, saves, cause=str(pre.reason) if pre is not None else "preempt")

    def on_oom(self, now: float, job: SimJob, epoch: int) -> None:
        if epoch != job.epoch:
            return
        self.meter.counts["oom_failures"] += 1
        self.meter.lost("oom", sum((now - m.since) * m.units for m in job.bound.values()))
        self.stop(job, now, saves=True)
        job.state = BACKOFF
        delay = min(self.knobs.backoff_max_s, self.knobs.backoff_s * 2 ** job.failures)
        job.failures += 1
        self.push(now + delay, self.on_retry, job, job.epoch)

    def on_retry(self, now: float, job: SimJob, epoch: int) -> None:
        if epoch == job.epoch and job.state == BACKOFF:
            job.state, job.queued_at = WAITING, now
            self.dirty = True

    def stop(self, job: SimJob, now: float, saves: bool, cause: str = "finished") -> None:
        """Release every pod of a job; a job that was running keeps its progress if it saves,
        else rolls back to its last checkpoint (work lost, counted under `cause`, marked
        "/no-checkpoint" for a job that never saves). It waits again unless it is done."""
        if job.run_since is not None:
            since = job.run_since
            self.meter.useful(since, now, job.useful)
            units = sum(m.units for m in job.bound.values())
            lost_wall = min(max(0.0, now - since), job.stop_progress(now, saves) / job.rate)
            self.meter.rolled_back(now - lost_wall, now, job.useful)
            if lost_wall > 0:
                never = job.stateful and not job.spec.checkpoint_interval_s
                self.meter.lost(cause + ("/no-checkpoint" if never else ""), lost_wall * units)
            job.ran_before = True
        for member in list(job.bound):
            placed = self.backend.release(job, member, now)
            self.meter.hold(placed.since, now, placed.units, placed.waste_gb,
                            self.infos[placed.node].on_demand_price)
            if placed.node in self.bills:
                self.bills[placed.node].release(now)
        self.holding.pop(job.spec.job_id, None)
        self.preempts.pop(job.spec.job_id, None)
        job.epoch += 1
        job.doomed, job.template, job.engine_jobs = False, None, None
        job.state, job.queued_at = WAITING, now
        self.dirty = True

    # --- nodes ------------------------------------------------------------------------------

    def reconfigure(self, name: str, now: float) -> float:
        """mig-manager applies a node-wide config: the node's GPU pods are stopped (a job that can
        save within the grace period saves) and it takes no new pods until done. Returns when."""
        if name not in self.reconfiguring:
            self.reconfiguring[name] = now + self.knobs.mig_reconfig_s
            self.meter.counts["mig_reconfigurations"] += 1
            for job in list(self.holding.values()):
                if job.state in (RUNNING, WAITING) and any(m.node == name for m in job.bound.values()):
                    self.meter.counts["mig_disruptions"] += job.state == RUNNING
                    self.stop(job, now, job.can_save_within(self.knobs.grace_s), cause="mig-reconfiguration")
            if name not in self.reclaiming:
                self.backend.set_state(name, "reconfiguring")
        return self.reconfiguring[name]

    def on_layout(self, now: float, key: tuple, rep) -> None:
        if self.repartitions.get(key) is rep:
            del self.repartitions[key]
            if key[0] in self.backend.present:
                self.backend.set_layout(key[0], key[1], rep.mig_enabled, rep.layout, now)
            self.dirty = True
        name = key[0]
        if name in self.reconfiguring and not any(k[0] == name for k in self.repartitions):
            del self.reconfiguring[name]
            if name in self.backend.present and name not in self.reclaiming:
                self.backend.set_state(name, "ready")

    def on_reclaim(self, now: float, name: str) -> None:
        if name not in self.backend.present or name in self.reclaiming:
            return  # already going or gone
        self.reclaiming.add(name)
        self.backend.set_state(name, "draining")
        self.push(now + self.spec.notice_s, self.on_node_gone, name)
        self.dirty = True

    def on_node_gone(self, now: float, name: str) -> None:
        for job in list(self.holding.values()):
            if any(m.node == name for m in job.bound.values()):
                self.meter.counts["spot_interruptions"] += 1
                self.stop(job, now, job.can_save_within(self.spec.notice_s), cause="spot-interruption")
        self.close_node(name, now)
        self.backend.remove_node(name)
        for key in [k for k in self.repartitions if k[0] == name]:
            del self.repartitions[key]
        self.reconfiguring.pop(name, None)
        self.reclaiming.discard(name)
        self.push(now + self.spec.replace_s, self.on_node_back, name)

    def on_node_back(self, now: float, name: str) -> None:
        self.backend.add_node(name, now)
        self.node_since[name] = now
        self.dirty = True

    def close_node(self, name: str, now: float) -> None:
        info = self.infos[name]
        group = info.group
        self.meter.capacity(self.node_since.pop(name), now, group.gpus_per_node,
                            group.gpus_per_node * group.gpu_memory_gb, info.price, group.tier)
        if name in self.bills:
            self.bill(name, self.bills[name].close(now))

    def bill(self, name: str, period: tuple[float, float] | None) -> None:
        if period is not None:
            info = self.infos[name]
            self.meter.bill(*period, info.group.gpus_per_node, info.price, info.group.tier)

    def close(self, now: float) -> None:
        """End of the horizon: count what is still held, running, idle and waiting."""
        self.meter.idle(now, {})
        for job in list(self.holding.values()):
            if job.run_since is not None:
                self.meter.useful(job.run_since, now, job.useful)
            for placed in job.bound.values():
                self.meter.hold(placed.since, now, placed.units, placed.waste_gb,
                                self.infos[placed.node].on_demand_price)
        for name in list(self.node_since):
            self.close_node(name, now)
        for job in self.jobs.values():
            if job.state in (WAITING, BACKOFF):
                self.meter.waits[job.spec.priority].append(now - job.queued_at)  # censored
            if job.first_start is None:
                self.meter.queue_delays[job.spec.kind].append(now - job.spec.submit_s)  # censored
            if job.state != DONE:
                self.meter.unfinished_age[job.spec.kind].append(now - job.spec.submit_s)  # censored
            if job.spec.kind == "training":
                weight = job.spec.gpus or job.spec.gpu_mem_gb / self.backend.min_gpu_memory
                self.meter.counts["training_ideal_gpu_s"] += job.progress_at(now) * weight


def reclaim_nodes(infos) -> list[str]:
    return sorted(name for name, info in infos.items() if info.group.tier == "spot")


def poisson_times(rate_per_s: float, horizon: float, seed: str) -> list[float]:
    """Arrival times of a Poisson process of this rate over [0, horizon], seeded."""
    if rate_per_s <= 0:
        return []
    rng = random.Random(seed)
    times, now = [], 0.0
    while True:
        now += rng.expovariate(rate_per_s)
        if now > horizon:
            return times
        times.append(now)


def run_policy(spec: ClusterSpec, jobs: list[JobSpec], policy: str, seed: int,
               knobs: Knobs = DEFAULT_KNOBS, progress=None, horizon: float | None = None) -> tuple[dict, dict]:
    sim = Simulation(spec, jobs, policy, seed, knobs, progress, horizon)
    result = sim.run()
    return result, sim.meter.series_result()
