"""MIG layouts: asking the backend for a repartition, and writing the confirmed layout back to rows."""

from __future__ import annotations

from django.conf import settings

from agents.backends.base import Backend, MigSlot, RepartitionPhase, RepartitionRequest
from scheduling.clock import database_now
from scheduling.models import ActionRequest, Gpu, MigInstance
from scheduling.payloads import RepartitionPayload

# Tries again of a MIG change the node failed, spread over TESSERA_MIG_CONFIG_REFRESH_S.
MIG_RETRIES = 3


def config_name(action: ActionRequest) -> str:
    return f"tessera-{action.pk}"


def repartition_start(action: ActionRequest, backend: Backend) -> bool:
    """Hand the layout to the node; False while an earlier change of the same node is still applying
    (a MIG config is node-wide, so a second one would overwrite the first)."""
    earlier = ActionRequest.objects.filter(kind=ActionRequest.Kind.REPARTITION, state="requested",
                                           node_id=action.node_id, pk__lt=action.pk)
    if earlier.exists():
        return False
    backend.repartition(_request(action))
    return True


def _request(action: ActionRequest, retry: bool = False) -> RepartitionRequest:
    change = RepartitionPayload.from_payload(action.payload)
    layout = tuple(MigSlot(profile=profile, start=start) for profile, start in change.layout)
    return RepartitionRequest(
        node_name=change.node, gpu_index=change.gpu_index, config_name=config_name(action),
        layout=layout, node_layout=_node_layout(action.node_id, change.gpu_index, layout), retry=retry)


def _node_layout(node_id: int, gpu_index: int, layout) -> tuple:
    """The node-wide picture a MIG config needs: the new layout here, the others as they are."""
    picture = []
    for gpu in Gpu.objects.filter(node_id=node_id).prefetch_related("mig_instances").order_by("index"):
        if gpu.index == gpu_index:
            picture.append((gpu.index, layout))
        elif gpu.mig_enabled:
            picture.append((gpu.index, tuple(MigSlot(profile=mi.profile, start=mi.start_slot)
                                             for mi in gpu.mig_instances.all())))
        else:
            picture.append((gpu.index, ()))
    return tuple(picture)


def repartition_finish(action: ActionRequest, backend: Backend, now: float) -> str | None:
    """'' once the new layout is in the rows, a message when it failed, None while it is applying
    (or about to be tried again: `action.payload` then counts the tries)."""
    change = RepartitionPayload.from_payload(action.payload)
    state = backend.repartition_state(change.node)
    if state.config_name != config_name(action) or not state.finished:
        return None
    if state.phase == RepartitionPhase.FAILED:
        return _failed(action, backend, now)
    gpu = Gpu.objects.select_for_update().get(node__name=change.node, index=change.gpu_index)
    return layout_write(gpu, change.mig_enabled, list(change.layout))


def _failed(action: ActionRequest, backend: Backend, now: float) -> str | None:
    """mig-manager checks the name against its mounted copy of the ConfigMap, which may lag our
    write by up to the refresh window: a try begun inside it may have failed on a stale copy. Such a
    failure is tried again, spaced across the window so that the last try begins at its end (when
    the copy is current); a try begun after it failed for a reason of the node's own."""
    window = float(settings.TESSERA_MIG_CONFIG_REFRESH_S)
    asked_at = action.payload["asked_at"]
    tries = action.payload.get("mig_retries", 0)
    last_try = action.payload.get("mig_retried_at", asked_at)
    if tries < MIG_RETRIES and last_try < asked_at + window:
        if now < min(last_try + window / MIG_RETRIES, asked_at + window):
            return None
        backend.repartition(_request(action, retry=True))
        action.payload = {**action.payload, "mig_retries": tries + 1, "mig_retried_at": now}
        return None
    node = action.payload["node"]
    tried = f" after {tries} more tries over {now - asked_at:.0f} s" if tries else ""
    return (f"The node reported the MIG change {config_name(action)} as failed{tried}; mig-manager's copy of "
            f"its ConfigMap was current by then, so see the nvidia-mig-manager log on {node}.")


def layout_write(gpu: Gpu, mig_enabled: bool, layout: list[tuple[str, int]]) -> str:
    """Make the GPU's MIG instance rows match the layout; '' when done, else why it cannot."""
    wanted = set(layout)
    for instance in gpu.mig_instances.all():
        if (instance.profile, instance.start_slot) in wanted:
            wanted.discard((instance.profile, instance.start_slot))
            continue
        if instance.placements.filter(ended_at__isnull=True).exists():
            return f"{instance} is in use; it cannot be removed."
        # Finished placements keep their mig_profile and share; the ledger copied its gpu_fraction.
        instance.delete()
    for name, start in sorted(wanted, key=lambda slot: slot[1]):
        MigInstance.for_profile(gpu, name, start).save()
    gpu.mig_enabled = mig_enabled
    gpu.layout_changed_at = database_now()  # the engine's repartition hysteresis counts from here
    gpu.save(update_fields=["mig_enabled", "layout_changed_at"])
    return ""
