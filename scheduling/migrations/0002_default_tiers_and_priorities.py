from django.db import migrations

TIERS = [("reserved", False, 0), ("on-demand", False, 0), ("spot", True, 120)]
PRIORITIES = [
    ("production", 1000, False, True, "Production inference: always gets resources, never preempted."),
    ("interactive", 500, True, False, "Notebooks and debugging sessions."),
    ("training", 200, True, False, "Training jobs; checkpoint to survive preemption."),
    ("best-effort", 50, True, False, "Runs only on otherwise idle capacity."),
]


def create_defaults(apps, schema_editor):
    CapacityTier = apps.get_model("scheduling", "CapacityTier")
    PriorityClass = apps.get_model("scheduling", "PriorityClass")
    for name, reclaimable, notice in TIERS:
        CapacityTier.objects.get_or_create(
            name=name, defaults={"reclaimable": reclaimable, "reclaim_notice_s": notice})
    for name, value, preemptible, lead_only, description in PRIORITIES:
        PriorityClass.objects.get_or_create(name=name, defaults={
            "value": value, "preemptible": preemptible, "lead_only": lead_only,
            "description": description})


class Migration(migrations.Migration):
    dependencies = [("scheduling", "0001_initial")]
    operations = [migrations.RunPython(create_defaults, migrations.RunPython.noop)]
