"""A cycle's cost stays linear in the queue (issue 15, item 1): the waiting jobs' positions and
reasons are written in statements that join the new values, only where they changed, and nothing is
written or invalidated when nothing changed. The figures are in bench/cycle_queue.py."""

from datetime import timedelta

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext
from django.utils import timezone

from portal import freshness
from scheduling import engine
from scheduling.apply import apply_plan
from scheduling.models import Job
from tests.scheduling.test_adapter import add_pending_jobs
from ui.demo import demo_load

pytestmark = pytest.mark.django_db


@pytest.fixture
def waiting(db):
    demo_load()
    add_pending_jobs(40)
    return list(Job.objects.filter(status__in=Job.WAITING_STATUSES).order_by("pk"))


def _plan(jobs, note="") -> engine.Plan:
    now = timezone.now().timestamp()
    return engine.Plan(policy="test", pending={str(job.pk): engine.PendingInfo(
        job_id=str(job.pk), reason="quota", message=f"Waits{note}.", eta=now + 60 * n, team_position=n + 1,
        overall_position=n + 1) for n, job in enumerate(jobs)})


def _row_versions() -> dict[int, str]:
    """Each waiting job's tuple id: PostgreSQL gives a row a new one whenever it is written."""
    with connection.cursor() as cursor:
        cursor.execute("SELECT id, ctid::text FROM scheduling_job WHERE status = ANY(%s)", [list(Job.WAITING_STATUSES)])
        return dict(cursor.fetchall())


def test_every_waiting_job_gets_its_position_reason_and_eta(waiting):
    now = timezone.now()
    apply_plan(_plan(waiting), now=now)
    rows = Job.objects.filter(pk__in=[job.pk for job in waiting]).order_by("queue_position_overall")
    assert [row.pk for row in rows] == [job.pk for job in waiting]
    assert {(row.pending_reason_code, row.pending_reason) for row in rows} == {("quota", "Waits.")}
    assert abs(rows.last().estimated_start - (now + timedelta(seconds=60 * (len(waiting) - 1)))) < timedelta(seconds=1)


def test_the_queue_is_written_without_a_case_per_job(waiting):
    """Django's bulk_update writes N rows with one CASE of N branches per column: N² to evaluate."""
    with CaptureQueriesContext(connection) as queries:
        apply_plan(_plan(waiting), now=timezone.now())
    assert not [q["sql"] for q in queries if "CASE" in q["sql"]]
    assert not [q["sql"] for q in queries if "FOR UPDATE" in q["sql"] and "scheduling_job" in q["sql"]]


def test_a_cycle_that_changes_nothing_writes_and_invalidates_nothing(waiting):
    plan, now = _plan(waiting), timezone.now()
    apply_plan(plan, now=now)
    rows, versions = _row_versions(), {job.team_id: freshness.team_version(job.team_id) for job in waiting}
    apply_plan(plan, now=now)
    assert _row_versions() == rows
    assert {team: freshness.team_version(team) for team in versions} == versions
    apply_plan(_plan(waiting[:1], note=" longer"), now=now)  # one job's reason changes: its row only
    changed = {pk for pk, version in _row_versions().items() if rows[pk] != version}
    assert changed == {waiting[0].pk}


def test_a_job_that_left_the_queue_meanwhile_is_not_written(waiting):
    gone = waiting[0]
    Job.objects.filter(pk=gone.pk).update(status="cancelled", queue_position_team=None)
    apply_plan(_plan(waiting), now=timezone.now())
    gone.refresh_from_db()
    assert gone.queue_position_team is None and gone.status == "cancelled"
