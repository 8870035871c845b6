"""Asking for a what-if and running one: the live cluster and its recent history in the simulator's
files, run as they are and changed (scheduling/simulator/run/whatif.py), progress and result stored."""

from __future__ import annotations

import logging
import threading
import time

from celery.exceptions import SoftTimeLimitExceeded
from django.conf import settings
from django.db import OperationalError, connection, transaction
from django.db.models import Q
from django.utils import timezone

from scheduling.live_input import live_input
from scheduling.simulator.run.spec import SpecError
from scheduling.simulator.run.whatif import ChangeError, compare
from whatif.models import STALE_AFTER, WhatIfRun

log = logging.getLogger(__name__)
PROGRESS_EVERY_S = 1.0  # a progress write at most this often: the bar moves, the database rests
REQUEST_LOCK_KEY = 7_302_016  # pg advisory lock id: "one what-if request at a time" (issue 16)
TIME_LIMIT_S = 30 * 60  # a worker slot is the cluster's first: a replay longer than this is stopped


class Busy(Exception):
    """Another what-if is running: one at a time keeps the cluster's workers for the cluster."""


def whatif_in_progress() -> WhatIfRun | None:
    fresh = timezone.now() - STALE_AFTER
    return WhatIfRun.objects.filter(state__in=(WhatIfRun.State.QUEUED, WhatIfRun.State.RUNNING),
                                    updated_at__gte=fresh).first()


def whatif_request(*, user, hours: float, ahead_hours: float, baseline_policy: str, policy: str, team: str,
                   guarantee_delta: float, add_model: str, add_count: int, add_tier: str) -> WhatIfRun:
    with transaction.atomic():
        _one_request_at_a_time()
        running = whatif_in_progress()
        if running is not None:
            raise Busy(f"What-if #{running.pk} is still running; start another when it is done.")
        run = WhatIfRun.objects.create(
            created_by=user, hours=hours, ahead_hours=ahead_hours, baseline_policy=baseline_policy,
            policy="" if policy == baseline_policy else policy, team=team if guarantee_delta else "",
            guarantee_delta=guarantee_delta if team else 0, add_model=add_model if add_count else "",
            add_count=add_count if add_model else 0, add_tier=add_tier)
        transaction.on_commit(lambda: dispatch(run.pk))
    return run


def _one_request_at_a_time() -> None:
    """Two clicks at once must not both find nothing running. PostgreSQL: an advisory lock until the
    commit. SQLite (the demo) begins every transaction IMMEDIATE, so writers take turns already."""
    if connection.vendor == "postgresql":
        with connection.cursor() as cursor:
            cursor.execute("SELECT pg_advisory_xact_lock(%s)", [REQUEST_LOCK_KEY])


def dispatch(run_id: int) -> None:
    """A Celery task in production. The embedded demo runs tasks eagerly (in the request), which would
    hold the page for the whole run: there it runs on a thread of its own and the page polls."""
    if settings.CELERY_TASK_ALWAYS_EAGER:
        threading.Thread(target=_run_in_thread, args=(run_id,), name=f"whatif-{run_id}", daemon=True).start()
        return
    from whatif.tasks import run_whatif  # the tasks module imports this one

    try:
        run_whatif.delay(run_id)
    except Exception:  # the broker is down: say so on the run instead of leaving it queued
        log.warning("what-if %s not sent to the workers", run_id, exc_info=True)
        _finish(run_id, state=WhatIfRun.State.FAILED, error="The task queue is unreachable; try again later.")


def _run_in_thread(run_id: int) -> None:
    try:
        whatif_execute(run_id)
    finally:
        connection.close()  # this thread's own: nothing else would ever close it


def whatif_execute(run_id: int) -> str:
    """Claim the run (a duplicate delivery finds it taken), build the inputs, run both sides."""
    now = timezone.now()
    claimable = Q(state=WhatIfRun.State.QUEUED) | Q(state=WhatIfRun.State.RUNNING, updated_at__lt=now - STALE_AFTER)
    claimed = WhatIfRun.objects.filter(claimable, pk=run_id).update(
        state=WhatIfRun.State.RUNNING, started_at=now, updated_at=now, progress=0)
    if claimed != 1:
        return "taken"
    run = WhatIfRun.objects.get(pk=run_id)
    try:
        result = _simulate(run)
    except (SpecError, ChangeError) as problem:
        _finish(run_id, state=WhatIfRun.State.FAILED, error=str(problem))
        return "failed"
    except SoftTimeLimitExceeded:
        _finish(run_id, state=WhatIfRun.State.FAILED, error=f"Stopped after {TIME_LIMIT_S // 60} minutes; "
                "replay a shorter window or fewer hours past now.")
        return "failed"
    except Exception:
        log.exception("what-if %s failed", run_id)
        _finish(run_id, state=WhatIfRun.State.FAILED, error="The simulation failed unexpectedly; "
                "the server log has the details.")
        return "failed"
    _finish(run_id, state=WhatIfRun.State.DONE, progress=1.0, result=result)
    return "done"


def _simulate(run: WhatIfRun) -> dict:
    inputs = live_input(run.hours)
    WhatIfRun.objects.filter(pk=run.pk).update(cluster_json=inputs.cluster, jobs_csv=inputs.jobs_text,
                                               notes=inputs.notes, updated_at=timezone.now())
    if not inputs.rows:
        raise ChangeError(f"No job held or wanted GPUs in the last {run.hours:g} hours: nothing to replay.")
    horizon = inputs.window_s + run.ahead_hours * 3600
    return compare(inputs.cluster, inputs.jobs_text, run.baseline_policy, run.change, horizon=horizon,
                   progress=_progress_writer(run.pk))


def _progress_writer(run_id: int):
    last = [0.0]

    def write(fraction: float) -> None:
        if time.monotonic() - last[0] < PROGRESS_EVERY_S:
            return
        last[0] = time.monotonic()
        try:
            WhatIfRun.objects.filter(pk=run_id).update(progress=round(min(fraction, 0.99), 3),
                                                       updated_at=timezone.now())
        except OperationalError:  # the demo's SQLite busy with a write: the next one moves the bar
            log.info("what-if %s progress not written this time", run_id)
    return write


def _finish(run_id: int, *, state: str, error: str = "", progress: float | None = None,
            result: dict | None = None) -> None:
    fields = {"state": state, "error": error, "finished_at": timezone.now(), "updated_at": timezone.now()}
    if progress is not None:
        fields["progress"] = progress
    if result is not None:
        fields["result"] = result
    for attempt in range(5):  # the outcome must land, even when the demo's SQLite is busy for a moment
        try:
            WhatIfRun.objects.filter(pk=run_id).update(**fields)
            return
        except OperationalError:
            if attempt == 4:
                raise
            time.sleep(0.5 * (attempt + 1))
