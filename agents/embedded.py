"""The embedded demo's loop (`make demo`): the simulated cluster and the worker loop in the web process.

One daemon thread does, every few seconds, what Celery beat and workers do in production: poll
the simulated agents, reconcile pods, advance actions, ask for due checkpoints and run a cycle.
One writer thread and short transactions keep SQLite happy. Demo only: it also submits a job now
and then so the cluster keeps moving.
"""

from __future__ import annotations

import dataclasses
import logging
import os
import random
import threading
import time
from pathlib import Path

from django.conf import settings
from django.db import OperationalError, close_old_connections, transaction
from django.utils import timezone

from agents import actions, runtime, services
from agents.actions.bind import bind_request
from agents.actions.pods import attempt_binds
from agents.actions.state import HOLDING
from agents.backends.base import ENV_RESUME
from agents.backends.simulated import SimConfig, SimNode, SimulatedBackend
from portal.models import Team
from scheduling.engine.reasons import WaitingReason
from scheduling.models import ActionRequest, Job, PriorityClass
from scheduling.payloads import AllocationRequest, BindPayload
from scheduling.services import job_event_add

log = logging.getLogger(__name__)
TICK_S = 3.0
# One clock second is a minute of work: an hour-long job finishes in a minute of the demo.
DEMO_CONFIG = SimConfig(speed=60.0, checkpoint_save_s=3.0, stop_s=0.0, repartition_s=3.0)
SUBMIT_EVERY_S = 40.0
MAX_WAITING = 6
# name, kind, priority class, GPUs, GPU memory (GB), expected runtime (s), checkpoint interval (s)
DEMO_JOBS = [
    ("embed-batch", "batch", "best-effort", 1, 40, 1800, None),
    ("lora-finetune", "training", "training", 2, 60, 3600, 900),
    ("sweep-trial", "training", "training", 4, 70, 5400, 1200),
    ("notebook", "interactive", "interactive", 0, 10, 2400, None),
    ("reranker-canary", "inference", "production", 0, 8, 3600, None),
]


def start() -> None:
    threading.Thread(target=_loop, name="tessera-embedded-loop", daemon=True).start()


def state_path() -> Path:
    """Next to the SQLite file, so a fresh demo database starts with a fresh simulated cluster."""
    database = settings.DATABASES["default"]
    if database["ENGINE"].endswith("sqlite3") and "TESSERA_SIMULATED_STATE" not in os.environ:
        return Path(database["NAME"]).with_suffix(".cluster.json")
    return Path(settings.TESSERA_SIMULATED_STATE)


def _loop() -> None:
    backend = runtime.simulated_backend(state_path())
    setup(backend)
    last_submit = time.monotonic()
    while True:
        time.sleep(TICK_S)
        try:
            tick(backend)
            if time.monotonic() - last_submit >= SUBMIT_EVERY_S:
                last_submit = time.monotonic()
                submit_demo_job(random.Random())
        except OperationalError as error:  # "database is locked": a web request held it; next tick
            log.info("embedded loop skipped a tick: %s", error)
        except Exception:
            log.exception("embedded loop tick failed")
        finally:
            close_old_connections()


def setup(backend: SimulatedBackend) -> None:
    """Give the simulated cluster the database's nodes, and pods for the jobs already running."""
    if not backend.path.exists():
        backend.configure(DEMO_CONFIG)
    from scheduling.models import Node

    for node in Node.objects.select_related("tier", "leaf_switch").prefetch_related("gpus"):
        gpus = list(node.gpus.all())
        backend.ensure_node(SimNode(name=node.name, gpu_model=node.gpu_model, gpu_count=len(gpus),
                                    gpu_memory_mib=int(max((g.memory_gb for g in gpus), default=0) * 1024),
                                    leaf_switch=node.leaf_switch.name, tier=node.tier.name))
    for job in Job.objects.filter(status__in=HOLDING).select_related("team", "project", "priority_class"):
        if not attempt_binds(job):
            adopt(backend, job)


@transaction.atomic
def adopt(backend: SimulatedBackend, job: Job) -> None:
    """A job placed before the loop ran (the demo data): write its binds as done and start its pods."""
    by_node: dict[str, list] = {}
    for placement in job.placements.filter(ended_at__isnull=True).select_related("gpu__node", "mig_instance"):
        by_node.setdefault(placement.gpu.node.name, []).append(placement)
    attempt = job.run
    for member, (node, placements) in enumerate(sorted(by_node.items())):
        payload = BindPayload(
            job_id=job.pk, member=member, node=node, placements=tuple(p.pk for p in placements),
            pod_name=f"{job.team.name}-{job.pk}-{attempt}-{member}",
            allocations=tuple(AllocationRequest(gpu_index=p.gpu.index, milli=p.share_milli,
                                                mig_profile=p.mig_instance.profile if p.mig_instance else None,
                                                mig_start=p.mig_instance.start_slot if p.mig_instance else None)
                              for p in placements)).as_payload()
        action, _new = ActionRequest.objects.get_or_create(
            key=f"bind:{job.pk}:{member}:{attempt}",
            defaults={"kind": "bind", "job": job, "node": placements[0].gpu.node, "payload": payload})
        # It has been working since it started: the pod resumes from that much done.
        done = job.progress_s + (timezone.now() - job.started_at).total_seconds()
        request = bind_request(action, job, len(by_node))
        env = tuple((k, str(done) if k == ENV_RESUME else v) for k, v in request.env)
        backend.bind(dataclasses.replace(request, env=env))
        # The bind below finds the pod bound and bills from when the cluster says it started.
        backend.backdate(request.namespace, request.pod_name, job.started_at.timestamp())
        actions.action_advance(action_id=action.pk, backend=backend)


def tick(backend: SimulatedBackend) -> None:
    """One pass of every worker loop, in the order beat would interleave them."""

    def dispatch(action_ids: list[int]) -> None:
        for action_id in action_ids:
            actions.action_advance(action_id=action_id, backend=backend)

    services.agents_poll(backend=backend, telemetry=backend, dispatch=dispatch)
    services.reconcile(backend=backend)
    dispatch(services.requested_actions())
    services.checkpoints_due(dispatch=dispatch, interval_scale=1 / backend.config().speed)
    services.cycle_run(dispatch=dispatch)


@transaction.atomic
def submit_demo_job(rng: random.Random) -> Job | None:
    if Job.objects.filter(status__in=["pending", "preempted"]).count() >= MAX_WAITING:
        return None
    name, kind, priority, gpus, memory, runtime, interval = rng.choice(DEMO_JOBS)
    team = rng.choice(list(Team.objects.prefetch_related("projects")))
    project = team.projects.order_by("name").first()
    if project is None:
        return None
    job = Job.objects.create(
        team=team, project=project, name=f"{name}-{rng.randrange(1000):03d}", kind=kind,
        priority_class=PriorityClass.objects.get(name=priority), gpus=gpus, gpu_memory_gb=memory,
        cpu_cores=max(1, gpus) * 8, memory_gb=max(1, gpus) * 64, expected_runtime_s=runtime,
        checkpoint_interval_s=interval, preemptible=priority != "production",
        pending_reason_code=WaitingReason.NEW, pending_reason="Submitted; waiting for the next scheduling cycle.")
    job_event_add(job=job, at=timezone.now(), kind="submitted", message="Submitted by the demo's job generator.")
    return job
