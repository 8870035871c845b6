"""The capacity tiers and priority classes every installation starts with.

Shared by the data migration (with historical models) and the demo loader, which must cope
with a database whose seeded rows were flushed (transactional tests do that).
"""

from scheduling.engine.types import PRIORITY_CLASSES

TIERS = [("reserved", False, 0), ("on-demand", False, 0), ("spot", True, 120)]
# name, value (the engine's one table), preemptible, lead only, description
PRIORITIES = [
    ("production", PRIORITY_CLASSES["production"], False, True,
     "Production inference: always gets resources, never preempted."),
    ("interactive", PRIORITY_CLASSES["interactive"], True, False, "Notebooks and debugging sessions."),
    ("training", PRIORITY_CLASSES["training"], True, False, "Training jobs; checkpoint to survive preemption."),
    ("best-effort", PRIORITY_CLASSES["best-effort"], True, False, "Runs only on otherwise idle capacity."),
]


def defaults_ensure(capacity_tier_model, priority_class_model) -> None:
    for name, reclaimable, notice in TIERS:
        capacity_tier_model.objects.get_or_create(
            name=name, defaults={"reclaimable": reclaimable, "reclaim_notice_s": notice})
    for name, value, preemptible, lead_only, description in PRIORITIES:
        priority_class_model.objects.get_or_create(name=name, defaults={
            "value": value, "preemptible": preemptible, "lead_only": lead_only, "description": description})
