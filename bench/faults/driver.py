"""Campaign: submit a job, inject a fault at a random point while tasks are in flight, heal the
cluster (processes resumed or restarted, nodes back), run the workers until nothing is in flight,
check the invariants; a thousand times over. The seed fixes which fault comes when and where; the
timing of the processes it hits is real, so two runs of one seed may differ in detail."""

from __future__ import annotations

import json
import os
import random
import signal
import time
from collections import Counter
from pathlib import Path

from bench.faults.cluster import cluster_create, job_submit
from bench.faults.injection import FAULTS, INJECT, PROCESS_FAULTS
from bench.faults.invariants import billed_without_pod, check, orphan_pods, unreconciled_pods
from bench.faults.processes import TASKS, WORKER_SETTINGS, PrivateRedis, Worker
from bench.faults.report import Report

TASK_TIMEOUT_S = 20
SETTLE_ROUNDS = 12


class Campaign:
    """Drives the workers, injects faults, checks invariants. Needs Django set up on an empty,
    migrated PostgreSQL database that nothing else uses."""

    def __init__(self, *, seed: int, workdir: Path, redis_port: int, workers: int = 2) -> None:
        from celery import Celery
        from django.conf import settings

        from agents.backends.simulated import SimConfig, SimulatedBackend

        self.rng = random.Random(seed)
        self.report = Report(seed=seed)
        self.workdir = workdir
        self.queue = f"campaign-{seed}-{os.getpid()}"
        self.state_path = workdir / "cluster.json"
        database = settings.DATABASES["default"]
        self.database_url = (f"postgres://{database['USER']}@{database['HOST'] or '127.0.0.1'}:"
                             f"{database['PORT'] or 5432}/{database['NAME']}")
        self.redis = PrivateRedis(redis_port, workdir)
        # Not the current app: a Celery app made current here stays current after the campaign, and
        # every later task in the same process then talked to this private Redis, long stopped.
        self.app = Celery("campaign", broker=self.redis.url, backend=self.redis.url, set_as_current=False)
        options = {"global_keyprefix": f"{self.queue}:"}
        self.app.conf.update(broker_transport_options=options, result_backend_transport_options=options,
                             broker_connection_retry_on_startup=True)
        self.sim = SimulatedBackend(self.state_path)
        self.sim.configure(SimConfig(speed=4.0, checkpoint_save_s=0.5, stop_s=0.0, repartition_s=0.5))
        self.workers = [Worker(i, self) for i in range(workers)]
        self.job_ids: list[int] = []
        self.seen: set[str] = set()
        self.settings_backup: dict[str, object] = {}

    # -- set-up ---------------------------------------------------------------------------------

    def __enter__(self) -> Campaign:
        from django.conf import settings

        for key, value in WORKER_SETTINGS.items():  # the invariant checks read them too
            if key != "TESSERA_BACKEND":
                self.settings_backup[key] = getattr(settings, key)
                setattr(settings, key, int(value))
        self.redis.start()
        cluster_create(self.sim)
        for worker in self.workers:
            worker.start()
        for worker in self.workers:
            self._wait_ready(worker)
        return self

    def __exit__(self, *exc) -> None:
        from django.conf import settings

        for worker in self.workers:
            worker.stop()
        self.redis.stop()
        for key, value in self.settings_backup.items():
            setattr(settings, key, value)

    def _wait_ready(self, worker: Worker, timeout: float = 90) -> bool:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline and worker.alive():
            try:
                if self.app.send_task("agents.ping", ("up",), queue=worker.queue).get(timeout=5) == "pong:up":
                    return True
            except Exception:  # noqa: BLE001 (not up yet: the broker, the worker, the result)
                time.sleep(0.2)
        return False

    # -- driving ----------------------------------------------------------------------------------

    def send(self, name: str, args=(), queue: str | None = None):
        try:
            return self.app.send_task(name, args, queue=queue or self.queue)
        except Exception as error:  # noqa: BLE001 (Redis away: the task is simply not sent)
            self.report.task_errors[f"send: {type(error).__name__}"] += 1
            return None

    def wait(self, results) -> None:
        for result in results:
            if result is None:
                continue
            try:
                result.get(timeout=TASK_TIMEOUT_S, propagate=True)
            except Exception as error:  # noqa: BLE001 (recorded: a lost task, a retry exhausted, a bug)
                self.report.task_errors[type(error).__name__] += 1

    def burst(self, queue: str | None = None) -> list:
        """The periodic tasks, all at once and in a random order, as beat and retries deliver them."""
        names = list(TASKS)
        self.rng.shuffle(names)
        return [self.send(name, queue=queue) for name in names]

    def inject(self, kind: str) -> None:
        self.report.faults[kind] += 1
        INJECT[kind](self)

    # -- healing and settling ---------------------------------------------------------------------------

    def heal(self, kind: str) -> None:
        for worker in self.workers:
            worker.signal(signal.SIGCONT)
            if not worker.alive():
                worker.start()
        for worker in self.workers if kind in PROCESS_FAULTS else ():
            if not self._wait_ready(worker, timeout=20):  # hung after losing Redis: replace it
                self.report.task_errors["worker hung, restarted as its liveness probe would"] += 1
                worker.stop()
                worker.start()
                self._wait_ready(worker)
        self._restore_reclaimed()

    def _restore_reclaimed(self) -> None:
        """The provider hands a reclaimed node back once Tessera has written it off."""
        from scheduling.models import Node

        state = json.loads(self.state_path.read_text())
        lost = set(Node.objects.filter(state=Node.State.LOST).values_list("name", flat=True))
        for name, node in state["nodes"].items():
            if node["gone"] and name in lost:
                self.sim.restore_node(name)

    def settle(self) -> bool:
        for _ in range(SETTLE_ROUNDS):
            self.wait(self.burst())
            self._restore_reclaimed()
            if self._quiet():
                return True
            time.sleep(0.3)
        return False

    def _quiet(self) -> bool:
        from scheduling.models import ActionRequest, Node

        state = json.loads(self.state_path.read_text())
        pending_nodes = any(node["gone"] or node["reclaim_at"] for node in state["nodes"].values()) or \
            Node.objects.exclude(state=Node.State.READY).exists()
        return not pending_nodes and not ActionRequest.objects.filter(state="requested").exists() and \
            not orphan_pods(state) and not unreconciled_pods(state)

    # -- the run ----------------------------------------------------------------------------------------

    def run(self, faults: int, progress: bool = False, kinds: tuple[str, ...] = FAULTS) -> Report:
        started = time.monotonic()
        self.settle()
        first = list(kinds)
        self.rng.shuffle(first)  # every kind early, then chance decides
        for number in range(1, faults + 1):
            job_id = job_submit(self.rng, len(self.job_ids))
            self.job_ids += [job_id] if job_id is not None else []
            kind = first[number - 1] if number <= len(first) else self.rng.choice(kinds)
            self.inject(kind)
            self.heal(kind)
            self.report.unsettled += not self.settle()
            self._check(number, kind, progress)
            if progress and number % 25 == 0:
                print(f"{number} faults, {len(self.report.violations)} violations, "
                      f"{time.monotonic() - started:.0f} s", flush=True)
        from scheduling.models import Job

        self.report.jobs = Counter(Job.objects.filter(pk__in=self.job_ids).values_list("status", flat=True))
        self.report.billed_without_pod_s = billed_without_pod(self.sim)[0]
        self.report.seconds = time.monotonic() - started
        return self.report

    def _check(self, number: int, kind: str, progress: bool) -> None:
        """The invariants after fault `number`; each violation is reported once, when first found."""
        found = check(self.sim, self.job_ids)
        if found and not self._quiet():  # the cluster moved on while it was read (a pod ended): again
            self.settle()
            found = check(self.sim, self.job_ids)
        found = [v for v in found if v not in self.seen]
        self.seen.update(found)
        self.report.violations += [f"#{number} {kind}: {v}" for v in found]
        self.report.violated_after[kind] += len(found)
        for violation in found if progress else ():
            print(f"violation after fault #{number} ({kind}): {violation}", flush=True)
