"""The timeline says why a job was asked to stop in a sentence a person reads once (issue 16, item 10)."""

import pytest
from django.utils import timezone

from scheduling import engine
from scheduling.apply import ApplyResult, _request_preemption
from scheduling.engine.plan import PreemptReason
from scheduling.models import Job
from ui.demo import demo_load

pytestmark = pytest.mark.django_db

EXPECTED = {
    PreemptReason.PREEMPT: "Asked to stop so that job #807, of a higher priority, can start.",
    PreemptReason.RECLAIM: "Asked to stop so that job #807 can start: its team is taking back the guaranteed GPUs "
                           "this job borrowed.",
    PreemptReason.CONSOLIDATE: "Asked to stop so that job #807 can start; this job restarts from its checkpoint "
                               "on free GPUs elsewhere.",
}


@pytest.mark.parametrize("reason", list(EXPECTED))
def test_the_preemption_event_reads_as_one_sentence(reason):
    demo_load()
    job = Job.objects.get(name="llama-13b-pretrain")
    _request_preemption(job, engine.Preempt(job_id=str(job.pk), for_job_id="807", reason=reason),
                        timezone.now(), ApplyResult())
    message = job.events.get(kind="preemption-requested").message
    assert message == EXPECTED[reason]
    assert "can run a higher-priority job" not in message
