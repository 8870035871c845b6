"""The keys of a started job's run end in its run id (microseconds since the epoch), not its start
second (scheduling.models.run_id): rename those of the runs going on, so that the workers still find
their binds (agents.actions.pods.attempt_binds) and no stop is asked twice."""

from datetime import UTC, datetime, timedelta

from django.db import migrations

_EPOCH = datetime(1970, 1, 1, tzinfo=UTC)
RUN_KINDS = ("bind:", "preempt:", "cancel:", "spot-reclaim:")


def rename_run_keys(apps, schema_editor):
    Job = apps.get_model("scheduling", "Job")
    ActionRequest = apps.get_model("scheduling", "ActionRequest")
    for job in Job.objects.filter(started_at__isnull=False, status__in=("running", "checkpointing")):
        second = int(job.started_at.timestamp())
        run = (job.started_at - _EPOCH) // timedelta(microseconds=1)
        for action in ActionRequest.objects.filter(job=job, key__endswith=f":{second}"):
            if action.key.startswith(RUN_KINDS):
                action.key = f"{action.key.removesuffix(str(second))}{run}"
                action.save(update_fields=["key"])


class Migration(migrations.Migration):
    dependencies = [("scheduling", "0022_pods_gone_wording")]
    operations = [migrations.RunPython(rename_run_keys, migrations.RunPython.noop)]
