"""The capacity tiers and priority classes every installation starts with.

Shared by the data migration (with historical models) and the demo loader, which must cope
with a database whose seeded rows were flushed (transactional tests do that).
"""

TIERS = [("reserved", False, 0), ("on-demand", False, 0), ("spot", True, 120)]
PRIORITIES = [
    ("production", 1000, False, True, "Production inference: always gets resources, never preempted."),
    ("interactive", 500, True, False, "Notebooks and debugging sessions."),
    ("training", 200, True, False, "Training jobs; checkpoint to survive preemption."),
    ("best-effort", 50, True, False, "Runs only on otherwise idle capacity."),
]


def defaults_ensure(capacity_tier_model, priority_class_model) -> None:
    for name, reclaimable, notice in TIERS:
        capacity_tier_model.objects.get_or_create(
            name=name, defaults={"reclaimable": reclaimable, "reclaim_notice_s": notice})
    for name, value, preemptible, lead_only, description in PRIORITIES:
        priority_class_model.objects.get_or_create(name=name, defaults={
            "value": value, "preemptible": preemptible, "lead_only": lead_only, "description": description})
