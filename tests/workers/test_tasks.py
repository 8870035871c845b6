"""The worker tasks end to end through real Celery workers, Redis and PostgreSQL, with faults."""

import time

import pytest

from agents import tasks
from billing.models import UsageInterval
from scheduling.engine.reasons import PreemptReason
from scheduling.models import ActionRequest, JobEvent, Node
from scheduling.payloads import PreemptPayload
from tests.workers.conftest import PATIENCE_S, assert_invariants, job_add, wait_for

pytestmark = pytest.mark.django_db(transaction=True)


def confirmed(kind, job):
    return ActionRequest.objects.filter(kind=kind, job=job, state="confirmed").exists()


def events(job, kind):
    return JobEvent.objects.filter(job=job, kind=kind).count()


def place(workers, *jobs):
    """One cycle through a worker, then wait for the cluster to confirm every bind."""
    result = workers.run(tasks.run_cycle)
    assert result["ran"] and set(result["placed"]) >= {job.pk for job in jobs}
    wait_for(lambda: all(confirmed("bind", job) for job in jobs), what="binds confirmed")


def test_jobs_are_placed_checkpointed_and_completed(cluster, workers):
    workers.start()
    short = job_add("short", runtime_s=2)
    long = job_add("long", runtime_s=600, interval_s=1)
    place(workers, short, long)
    assert {o.job_id for o in cluster.poll_observations()} == {str(short.pk), str(long.pk)}
    time.sleep(2.2)
    assert workers.run(tasks.checkpoint_due) != []
    wait_for(lambda: confirmed("checkpoint", long), what="checkpoint confirmed")
    assert workers.run(tasks.reconcile)["finished"] == {"completed": [short.pk]}
    short.refresh_from_db()
    long.refresh_from_db()
    assert short.status == "completed" and long.status == "running"
    assert long.progress_s > 0 and long.last_checkpoint_at is not None and events(long, "checkpointed") == 1
    assert not UsageInterval.objects.filter(job=short, ended_at__isnull=True).exists()
    assert workers.run(tasks.poll_agents)["answered"] == ["r-01", "s-01"]
    assert_invariants(cluster, [short, long])


def test_a_node_that_stops_answering_is_lost_and_its_jobs_requeued(cluster, workers):
    workers.start()
    job = job_add("on-lost-node", gpus=4, model="A100-80GB")
    place(workers, job)
    workers.run(tasks.poll_agents)
    last_heartbeat = Node.objects.get(name="r-01").last_heartbeat
    cluster.lose_node("r-01")
    time.sleep(2.5)  # two missed 1 s heartbeats
    assert workers.run(tasks.poll_agents)["lost"] == ["r-01"]
    assert workers.run(tasks.poll_agents)["lost"] == []  # a second poll changes nothing
    job.refresh_from_db()
    assert job.status == "preempted" and events(job, "node-lost") == 1
    intervals = UsageInterval.objects.filter(job=job)
    assert intervals.count() == 4 and {i.ended_at for i in intervals} == {last_heartbeat}
    assert workers.run(tasks.run_cycle)["placed"] == []  # the lost node left the snapshot; nothing else fits
    assert_invariants(cluster, [job])


def preempt_action(job, reason="preempt"):
    payload = PreemptPayload(job_id=job.pk, for_job_id=None, reason=PreemptReason(reason), notice_deadline=None)
    return ActionRequest.objects.create(key=f"preempt:{job.pk}:{job.run}", kind="preempt",
                                        job=job, payload=payload.as_payload())


def finish_actions(workers):
    wait_for(lambda: not workers.run(tasks.resume_actions)["still_waiting"], what="actions finished")


@pytest.mark.parametrize("failpoint", ["action.preempt.checkpointing", "preempt.after-stop"])
def test_a_worker_killed_mid_preemption_leaves_it_for_the_next_run(cluster, workers, failpoint):
    """Killed after the checkpoint request was committed, or after the pod was stopped but before
    that was committed: the next worker finishes the flow, once."""
    workers.start()
    job = job_add("victim", runtime_s=600, interval_s=3600)
    place(workers, job)
    job.refresh_from_db()
    action = preempt_action(job)
    [doomed] = workers.start(failpoints=failpoint)
    workers.processes[0].terminate()  # only the doomed worker takes the task
    workers.processes[0].wait(timeout=PATIENCE_S)
    tasks.execute_action.apply_async((action.pk,), queue=workers.queue)
    assert doomed.wait(timeout=PATIENCE_S) == -9  # SIGKILL
    action.refresh_from_db()
    assert action.state == "requested"
    workers.start()
    finish_actions(workers)
    job.refresh_from_db()
    action.refresh_from_db()
    assert action.state == "confirmed" and job.status == "preempted"
    assert events(job, "preempted") == 1 and events(job, "checkpointed") == 1 and job.progress_s > 0
    assert not [o for o in cluster.poll_observations() if o.job_id == str(job.pk)]
    assert_invariants(cluster, [job])


def test_the_same_task_delivered_twice_does_nothing_twice(cluster, workers):
    workers.start(count=2)
    job = job_add("twice", runtime_s=600, interval_s=3600)
    place(workers, job)
    bind = ActionRequest.objects.get(kind="bind", job=job)
    for _ in range(2):
        assert workers.run(tasks.execute_action, bind.pk) == "confirmed"
    job.refresh_from_db()
    action = preempt_action(job)
    results = [tasks.execute_action.apply_async((action.pk,), queue=workers.queue) for _ in range(2)]
    [result.get(timeout=PATIENCE_S) for result in results]
    finish_actions(workers)
    job.refresh_from_db()
    assert job.status == "preempted" and len(cluster.poll_observations()) == 0
    for kind in ("placed", "checkpoint-requested", "checkpointed", "preempted"):
        assert events(job, kind) == 1, kind
    assert UsageInterval.objects.filter(job=job).count() == 2
    assert_invariants(cluster, [job])


def test_two_cycles_at_once_one_does_nothing(cluster, workers):
    # The first cycle keeps the lock 8 s after deciding: the other worker must take its task and
    # try the lock meanwhile, and on a loaded 2-core machine (xdist beside it) 2 s was sometimes not enough.
    workers.start(count=2, failpoints="cycle.hold=8")
    jobs = [job_add(f"gang-{n}", gpus=2) for n in range(3)]
    results = [tasks.run_cycle.apply_async(queue=workers.queue) for _ in range(2)]
    outcomes = sorted((r.get(timeout=PATIENCE_S) for r in results), key=lambda r: r["ran"])
    assert [o["ran"] for o in outcomes] == [False, True]
    assert sorted(outcomes[1]["placed"]) == sorted(j.pk for j in jobs)
    wait_for(lambda: all(confirmed("bind", j) for j in jobs), what="binds confirmed")
    assert ActionRequest.objects.filter(kind="bind").count() == 3
    assert_invariants(cluster, jobs)


@pytest.mark.parametrize("notice_s, checkpointed", [(30, True), (1, False)])
def test_a_spot_reclaim_notice_checkpoints_when_it_can(cluster, workers, notice_s, checkpointed):
    workers.start()
    job = job_add("on-spot", gpus=4, model="H100-80GB", interval_s=3600, progress_s=5.0)
    place(workers, job)
    time.sleep(1.5)
    cluster.reclaim_node("s-01", notice_s=notice_s)
    assert workers.run(tasks.poll_agents)["reclaim_actions"]
    assert Node.objects.get(name="s-01").state == "draining"
    wait_for(lambda: ActionRequest.objects.filter(job=job, kind="preempt", state="confirmed").exists(),
             what="reclaim flow finished")
    job.refresh_from_db()
    assert job.status == "preempted" and events(job, "spot-reclaimed") == 1
    assert (events(job, "checkpointed") == 1) is checkpointed
    assert (job.progress_s > 6.0) if checkpointed else job.progress_s == 5.0  # kept, or lost since the last one
    assert workers.run(tasks.poll_agents)["reclaim_actions"] == []
    assert_invariants(cluster, [job])


def test_a_cancelled_job_has_its_pods_stopped_before_its_gpus_are_freed(cluster, workers):
    from django.contrib.auth.models import User

    from portal.models import Membership
    from scheduling.services import job_cancel

    workers.start()
    job = job_add("cancel-me", runtime_s=600)
    place(workers, job)
    assert [o.job_id for o in cluster.poll_observations() if o.status.value == "Running"] == [str(job.pk)]
    lead = User.objects.create_user("lead", password="x")
    Membership.objects.create(user=lead, team=job.team, role="lead")
    job_cancel(user=lead, job=job)
    assert UsageInterval.objects.filter(job=job, ended_at__isnull=True).count() == 2  # held until the pods stop
    finish_actions(workers)
    assert not [o for o in cluster.poll_observations() if o.status.value in ("Running", "Pending")
                and not o.terminating]
    job.refresh_from_db()
    assert job.status == "cancelled"
    assert UsageInterval.objects.filter(job=job).count() == 2
    assert not UsageInterval.objects.filter(job=job, ended_at__isnull=True).exists()
    assert_invariants(cluster, [job])


def test_a_consolidation_move_requeues_the_job_from_its_checkpoint(cluster, workers):
    workers.start()
    job = job_add("mover", runtime_s=600, interval_s=3600)
    place(workers, job)
    job.refresh_from_db()
    action = preempt_action(job, reason="consolidate")
    assert workers.run(tasks.execute_action, action.pk) in ("requested", "confirmed")
    finish_actions(workers)
    job.refresh_from_db()
    assert job.status == "preempted" and job.progress_s > 0
    assert events(job, "moved") == 1 and events(job, "preempted") == 0
    assert not UsageInterval.objects.filter(job=job, ended_at__isnull=True).exists()
    assert_invariants(cluster, [job])
