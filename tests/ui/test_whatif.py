"""What-if from the live cluster (issue 16, item 4): the converter to the simulator's files, the form's
refusals, a run from the form to its stored result, and who may use it. The journey in Chromium is
tests/ui/test_browser_whatif.py; the comparison itself tests/simulator_run/test_whatif.py."""

import threading
import time
from datetime import date, timedelta
from decimal import Decimal

import pytest
from celery.exceptions import SoftTimeLimitExceeded
from django.core.management import call_command
from django.db import connection
from django.urls import reverse
from django.utils import timezone

from billing.models import Rate
from scheduling.defaults import defaults_ensure
from scheduling.live_input import live_input
from scheduling.models import CapacityTier, Gpu, Job, Placement, PriorityClass
from scheduling.simulator.run.spec import load_cluster, load_jobs
from tests.ui.conftest import make_job
from whatif import services, tasks
from whatif.models import WhatIfRun

pytestmark = pytest.mark.django_db
HOUR = 3600


def _history(teams, users, cluster):
    """Jobs around a 24 h window: in it, before it, across its start, waiting now."""
    now = timezone.now()
    alpha, alice = teams["alpha"], users["lead"]
    gpus = list(cluster["h100"].gpus.order_by("index"))

    def job(name, submitted_h, placements=(), started_h=None, finished_h=None, **fields):
        made = make_job(alpha, alice, name, **fields)
        Job.objects.filter(pk=made.pk).update(  # auto_now_add stamped now: history happened before
            submitted_at=now - timedelta(hours=submitted_h),
            started_at=None if started_h is None else now - timedelta(hours=started_h),
            finished_at=None if finished_h is None else now - timedelta(hours=finished_h))
        for gpu, start_h, end_h in placements:
            Placement.objects.create(job=made, gpu=gpu, memory_gb=80, started_at=now - timedelta(hours=start_h),
                                     ended_at=None if end_h is None else now - timedelta(hours=end_h))
        return made

    return {
        # a 2-GPU gang that ran an hour inside the window: counted once, not per GPU
        "done": job("done-in-window", 5, [(gpus[0], 4, 3), (gpus[1], 4, 3)], status="completed", gpus=2,
                    started_h=4, finished_h=3),
        "old": job("done-before", 40, [(gpus[0], 35, 30)], status="completed", started_h=35, finished_h=30),
        "never": job("cancelled-waiting", 2, status="cancelled", finished_h=1),
        "across": job("runs-across-start", 30, [(gpus[2], 26, None)], status="running", expected_runtime_s=40 * HOUR,
                      started_h=26),
        "waiting": job("waits-now", 1, expected_runtime_s=2 * HOUR, gpu_models="H100-80GB"),
        "stuck": job("waits-since-yesterday", 30, gpus=0, gpu_memory_gb=10, kind="interactive"),
    }


def test_the_live_cluster_and_its_last_day_become_the_simulators_files(teams, users, cluster, tmp_path):
    Rate.objects.create(gpu_model="H100-80GB", tier=CapacityTier.objects.get(name="reserved"),
                        price_per_gpu_hour=Decimal("2.5"), valid_from=date(2020, 1, 1))
    made = _history(teams, users, cluster)
    inputs = live_input(24)
    groups = {g["gpu_model"]: g for g in inputs.cluster["nodes"]}
    assert groups["H100-80GB"] | {"count": 1, "gpus_per_node": 8, "tier": "reserved", "mig_capable": True,
                                  "mig_enabled_gpus": 1, "leaf": "leaf-t", "spine": "spine-t"} == groups["H100-80GB"]
    assert (groups["A100-40GB"]["gpus_per_node"], groups["A100-40GB"]["tier"]) == (4, "spot")
    assert inputs.cluster["prices_per_gpu_hour"]["H100-80GB"]["reserved"] == 2.5
    assert any("no spot rate for A100-40GB" in note for note in inputs.notes)  # said, not silently $0
    said = " ".join(inputs.notes)
    assert "1 job(s) running when the window opened are placed afresh" in said
    assert "1 job(s) waiting when the window opened count their wait from then" in said
    assert {t["name"]: t["guaranteed_gpus"] for t in inputs.cluster["teams"]} == {"alpha": 4.0, "bravo": 2.0}

    rows = {row["job_id"]: row for row in inputs.rows}
    assert str(made["old"].pk) not in rows and str(made["never"].pk) not in rows
    done = rows[str(made["done"].pk)]
    assert (done["submit_s"], done["duration_s"], done["gpus"]) == pytest.approx((19 * HOUR, HOUR, 2), abs=1)
    across = rows[str(made["across"].pk)]
    assert (across["submit_s"], across["duration_s"]) == pytest.approx((0, 38 * HOUR), abs=1)  # 2 h ran before
    waiting = rows[str(made["waiting"].pk)]
    assert (waiting["submit_s"], waiting["duration_s"], waiting["gpu_model"]) == pytest.approx(
        (23 * HOUR, 2 * HOUR, "H100-80GB"), abs=1)
    stuck = rows[str(made["stuck"].pk)]  # a sub-GPU job by its memory, its runtime the default hour
    assert (stuck["submit_s"], stuck["duration_s"], stuck["gpus"], stuck["gpu_mem_gb"]) == (0, HOUR, 0, 10)

    cluster_path, jobs_path = inputs.write(tmp_path)  # the simulator's own reader accepts both
    spec = load_cluster(cluster_path)
    assert spec.gpus == 12 and len(load_jobs(jobs_path, {t.name for t in spec.teams})) == len(rows)


def test_dump_snapshot_writes_the_same_files_for_simulate_run(teams, users, cluster, tmp_path, capsys):
    _history(teams, users, cluster)
    call_command("dump_snapshot", "--out", str(tmp_path / "case.json"), "--simulator", str(tmp_path / "sim"))
    assert "4 jobs of the last 24 h" in capsys.readouterr().out
    assert load_cluster(tmp_path / "sim" / "cluster.json").gpus == 12


VALID = {"hours": "24", "ahead_hours": "0", "team": "alpha", "guarantee_delta": "8", "add_model": "",
         "add_count": "0", "add_tier": "reserved", "policy": "tessera"}


@pytest.mark.parametrize("change,field,message", [
    ({"team": "", "guarantee_delta": "0"}, None, "Change something"),
    ({"hours": "abc"}, "hours", "Enter a number"),
    ({"hours": "nan"}, "hours", "Enter a number"),
    ({"hours": "10000"}, "hours", "less than or equal to 168"),
    ({"ahead_hours": "-1"}, "ahead_hours", "greater than or equal to 0"),
    ({"team": ""}, "team", "Choose the team"),
    ({"team": "nobody"}, "team", "Select a valid choice"),
    ({"guarantee_delta": "-5"}, "guarantee_delta", "alpha guarantees 4 GPUs; -5 would make it negative"),
    ({"add_count": "2"}, "add_model", "Choose the GPU model"),
    ({"add_model": "H100-80GB"}, "add_count", "Say how many nodes"),
    ({"add_model": "B200", "add_count": "1"}, "add_model", "Select a valid choice"),
    ({"add_model": "H100-80GB", "add_count": "65"}, "add_count", "less than or equal to 64"),
    ({"add_tier": "gold"}, "add_tier", "Select a valid choice"),
    ({"policy": "slurm"}, "policy", "Select a valid choice"),
])
def test_bad_input_is_refused_with_a_clear_message(clients, jobs, change, field, message):
    response = clients["staff"].post(reverse("whatif:new"), {**VALID, **change})
    assert response.status_code == 400
    errors = response.context["form"].errors.get(field or "__all__")
    assert errors and message in " ".join(errors)
    assert not WhatIfRun.objects.exists()


def test_one_what_if_at_a_time(clients, jobs, users):
    WhatIfRun.objects.create(created_by=users["staff"], hours=24, baseline_policy="tessera", state="running")
    response = clients["staff"].post(reverse("whatif:new"), VALID)
    assert response.status_code == 409 and "still running" in response.content.decode()


def test_a_run_from_the_form_to_its_stored_result(clients, jobs, monkeypatch, django_capture_on_commit_callbacks):
    """The form's run goes through the Celery task; progress only grows and ends at 100%."""
    told = []
    compare = services.compare

    def spying(*args, progress, **kwargs):
        return compare(*args, progress=lambda share: (told.append(share), progress(share)), **kwargs)

    monkeypatch.setattr(services, "compare", spying)
    monkeypatch.setattr(services, "dispatch", lambda run_id: tasks.run_whatif.apply(args=[run_id]).get())
    monkeypatch.setattr(services, "PROGRESS_EVERY_S", 0)
    with django_capture_on_commit_callbacks(execute=True):
        response = clients["staff"].post(reverse("whatif:new"), {
            **VALID, "add_model": "H100-80GB", "add_count": "2", "policy": "k8s-default", "ahead_hours": "2"})
    run = WhatIfRun.objects.get()
    assert response.status_code == 302 and response.url == reverse("whatif:run", args=[run.pk])
    assert (run.state, run.progress, run.error) == ("done", 1.0, "")
    assert told == sorted(told) and told[-1] == 1.0 and len(told) > 2
    assert run.changes == ["alpha: guarantee +8 GPUs", "2 more H100-80GB node(s), reserved",
                           "policy tessera → k8s-default"]
    assert run.result["changed"]["gpus"] == run.result["baseline"]["gpus"] + 16
    assert set(run.result["baseline"]["teams"]) == {"alpha", "bravo"}
    progress = clients["staff"].get(reverse("whatif:progress", args=[run.pk])).json()
    assert progress == {"state": "done", "percent": 100, "stale": False, "error": ""}
    page = clients["staff"].get(reverse("whatif:run", args=[run.pk])).content.decode()
    assert 'id="whatif-summary"' in page and "GPUs in the cluster" in page and 'id="whatif-charts"' in page
    assert "GPU-hours as is / changed" in page and run.result["baseline"]["teams"]["alpha"]["gpu_hours"] > 0
    jobs_file = clients["staff"].get(reverse("whatif:input", args=[run.pk, "jobs.csv"]))
    assert jobs_file.status_code == 200 and jobs_file.content.decode().startswith("job_id,team,")
    assert clients["staff"].get(reverse("whatif:input", args=[run.pk, "other.txt"])).status_code == 404


def test_a_second_delivery_finds_the_run_taken_and_an_empty_window_fails_in_words(users, teams, cluster):
    run = WhatIfRun.objects.create(created_by=users["staff"], hours=1, baseline_policy="tessera", policy="kueue")
    assert services.whatif_execute(run.pk) == "failed"
    run.refresh_from_db()
    assert run.state == "failed" and "No job held or wanted GPUs in the last 1 hours" in run.error
    assert services.whatif_execute(run.pk) == "taken"


def test_a_run_whose_worker_was_lost_is_shown_lost_and_may_be_claimed_again(users, jobs):
    old = timezone.now() - timedelta(minutes=11)
    run = WhatIfRun.objects.create(created_by=users["staff"], hours=24, baseline_policy="tessera", policy="kueue",
                                   state="running", updated_at=old)
    assert run.stale and services.whatif_in_progress() is None
    assert services.whatif_execute(run.pk) == "done"


def test_a_replay_past_the_time_limit_frees_the_worker_and_says_so(users, jobs, monkeypatch):
    def too_long(*args, **kwargs):
        raise SoftTimeLimitExceeded()

    monkeypatch.setattr(services, "compare", too_long)
    run = WhatIfRun.objects.create(created_by=users["staff"], hours=24, baseline_policy="tessera", policy="kueue")
    assert services.whatif_execute(run.pk) == "failed"
    run.refresh_from_db()
    assert run.state == "failed" and run.error.startswith("Stopped after 30 minutes")


@pytest.mark.parametrize("role", ["lead", "member", "viewer", "finance", "other_lead"])
def test_only_platform_engineers_may_use_it(clients, jobs, users, role):
    run = WhatIfRun.objects.create(created_by=users["staff"], hours=24, baseline_policy="tessera")
    client = clients[role]
    for url in (reverse("whatif:new"), reverse("whatif:run", args=[run.pk]),
                reverse("whatif:progress", args=[run.pk]), reverse("whatif:input", args=[run.pk, "jobs.csv"])):
        assert client.get(url).status_code == 403
    assert client.post(reverse("whatif:new"), VALID).status_code == 403
    assert "What-if" not in client.get(reverse("ui:cluster")).content.decode()
    assert clients["anonymous"].get(reverse("whatif:new")).status_code == 302
    assert WhatIfRun.objects.count() == 1


def test_the_staff_bar_links_to_it(clients, jobs):
    assert f'href="{reverse("whatif:new")}"' in clients["staff"].get(reverse("ui:cluster")).content.decode()
    assert Gpu.objects.exists()


@pytest.fixture
def seeded(transactional_db):
    """The tiers and priority classes a migration made, which a previous transactional test's flush removed."""
    defaults_ensure(CapacityTier, PriorityClass)


@pytest.mark.django_db(transaction=True)
def test_two_clicks_at_once_start_one_what_if(seeded, users, monkeypatch):
    """The second request waits for the first's commit, then finds it running (without the lock both
    found nothing running during the pause and two runs started)."""
    check = services.whatif_in_progress

    def slow_check():
        found = check()
        time.sleep(0.5)
        return found

    monkeypatch.setattr(services, "whatif_in_progress", slow_check)
    monkeypatch.setattr(services, "dispatch", lambda run_id: None)
    outcomes, start = [], threading.Barrier(2)

    def click():
        start.wait()
        try:
            services.whatif_request(user=users["staff"], hours=24, ahead_hours=0, baseline_policy="tessera",
                                    policy="kueue", team="", guarantee_delta=0, add_model="", add_count=0,
                                    add_tier="reserved")
            outcomes.append("started")
        except services.Busy:
            outcomes.append("busy")
        finally:
            connection.close()

    threads = [threading.Thread(target=click) for _ in range(2)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert sorted(outcomes) == ["busy", "started"] and WhatIfRun.objects.count() == 1
