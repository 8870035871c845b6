"""The SDK against Tessera's own endpoint (checkpoints/, ui/api/checkpoints.py) over real HTTP on
Django's live server: the two sides of the checkpoint channel agree on every answer."""

import signal

import pytest

from checkpoints.models import CheckpointConfirmation
from scheduling.defaults import defaults_ensure
from scheduling.models import CapacityTier, JobEvent, PriorityClass
from tessera_checkpoint import Checkpointer, Confirmation, Confirmer
from tessera_checkpoint.confirm import utc_now
from tests.checkpoints.conftest import _running

# The live server's thread sees committed rows only, hence a transactional test.
pytestmark = pytest.mark.django_db(transaction=True)


@pytest.fixture(autouse=True)
def _defaults(transactional_db):
    """The tiers and priority classes a migration made, which a previous transactional test's flush
    removed (serialized_rollback instead clashed with the content types a flush leaves behind)."""
    defaults_ensure(CapacityTier, PriorityClass)


@pytest.fixture
def job(tmp_path):
    running = _running("sdk")
    (tmp_path / "token").write_text(running.token + "\n")
    return running


@pytest.fixture
def url(live_server):
    return live_server.url + "/api/v1/checkpoints/"


def confirmation(job, **changes):
    body = {"checkpoint_id": f"interval-{job.interval.pk}", "step": 1200, "progress_s": 3600.5,
            "saved_at": utc_now(), "path": "/ckpt/step-00001200.pt", **changes}
    return Confirmation(**body)


def test_every_answer_of_the_contract_as_the_sdk_reads_it(job, url, tmp_path):
    confirmer = Confirmer(url, tmp_path / "token", deadline_s=0)
    saved = confirmation(job)
    assert confirmer.confirm(saved).status == 201
    assert confirmer.confirm(saved).status == 200  # the same again: a retry after a lost answer is safe
    assert confirmer.confirm(confirmation(job, step=1300)).status == 409
    refused = confirmer.confirm(confirmation(job, checkpoint_id="interval-999999"))
    assert refused.status == 400 and "never asked" in refused.body
    (tmp_path / "wrong").write_text("not-a-token")
    assert Confirmer(url, tmp_path / "wrong", deadline_s=0).confirm(saved).status == 401
    job.job.refresh_from_db()
    assert job.job.progress_s == 3600.5


def test_a_loop_with_the_checkpointer_confirms_a_request_and_its_sigterm_save(job, url, tmp_path):
    podinfo = tmp_path / "podinfo"
    podinfo.mkdir()
    env = {"TESSERA_PODINFO_DIR": str(podinfo), "TESSERA_CHECKPOINT_URL": url,
           "TESSERA_CHECKPOINT_TOKEN_FILE": str(tmp_path / "token")}
    ckpt = Checkpointer.from_env(tmp_path / "ckpt", env=env, handle_sigterm=False)
    ckpt.resume()
    (podinfo / "annotations").write_text(f'tessera.io/checkpoint-request="interval-{job.interval.pk}"\n')
    for step in range(1, 4):
        if ckpt.should_save(step):
            path = ckpt.path_for(step)
            open(path, "w").close()
            assert ckpt.saved(step, path).status == 201
    ckpt.stop._handle(signal.SIGTERM, None)
    assert ckpt.should_save(4)
    open(ckpt.path_for(4), "w").close()
    with pytest.raises(SystemExit):
        ckpt.saved(4, ckpt.path_for(4))
    assert ckpt.last_answer.status == 201
    recorded = CheckpointConfirmation.objects.filter(job=job.job).order_by("step")
    assert [(r.checkpoint_id, r.step, r.pod_name) for r in recorded] == [
        (f"interval-{job.interval.pk}", 1, job.pod), ("periodic", 4, job.pod)]
    job.job.refresh_from_db()
    assert job.job.progress_s == recorded.last().progress_s
    assert JobEvent.objects.filter(job=job.job, kind="checkpointed").count() == 2
