"""Node and GPU rows kept in step with the cluster's own inventory (issue 13, "Inventory from the
cluster"): the poll reads the cluster's nodes and adds, changes and removes rows to match.

`node_values` is the pure mapping (one NodeInventory -> the row values); `inventory_sync` is the
service that writes them. What the cluster does not say stays as typed in the admin: a missing
leaf-switch or tier label keeps the row's switch or tier, the interconnect is never touched.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass
from datetime import datetime

from django.db import transaction

from agents.backends.base import RECLAIM_TAINT, MigStrategy, NodeInventory
from billing.services import usage_intervals_close_for_node
from scheduling.engine import mig
from scheduling.models import CapacityTier, Gpu, Job, NetworkSwitch, Node
from scheduling.services import job_release

log = logging.getLogger(__name__)

# Taints Tessera's pods tolerate (k8s_manifests.GPU_TOLERATION) or that another flow handles (a
# spot notice drains the node: agents/services.py): they do not close the node to new work.
TOLERATED_TAINTS = frozenset({("nvidia.com/gpu", "NoSchedule"), (RECLAIM_TAINT, "NoSchedule"),
                              (RECLAIM_TAINT, "NoExecute")})
CLOSING_EFFECTS = frozenset({"NoSchedule", "NoExecute"})
DEFAULT_TIER = CapacityTier.Name.ON_DEMAND
NEW_NODE_INTERCONNECT = Node.Interconnect.PCIE  # the cluster does not say; the cautious guess
MODEL_MAX = Gpu._meta.get_field("model").max_length
REFUSAL_MAX = Node._meta.get_field("cluster_refusal").max_length


@dataclass(frozen=True)
class NodeValues:
    """What the cluster says a Node row and its GPU rows should hold."""

    name: str
    gpu_model: str
    gpu_count: int | None  # None: the labels do not say (MIG single strategy): the rows stay as they are
    gpu_memory_gb: float
    mig_capable: bool
    cpu_cores: int
    memory_gb: int
    leaf_switch: str | None  # None: the cluster has no label; keep what the row has
    tier: str | None  # likewise; a value that is no tier of ours counts as none
    ready: bool
    schedulable: bool
    allocatable_gpus: int | None
    gpus_used_outside: int
    mig_used_outside: dict[str, int]  # by profile
    refusal: str  # why Tessera places nothing new here though the cluster might; "" when none
    gpu_sharing: str  # the device plugin's sharing mode (engine Node.sharing)
    gpu_replicas: int


def gpu_model_name(product: str | None) -> str:
    """GFD's product label ('NVIDIA-H100-80GB-HBM3', spaces spelled '-') as the engine names the
    model ('H100-80GB', which MIG geometry and the rate card know); an unknown one as GFD says it."""
    if not product:
        return "unknown"
    spaced = product.replace("-", " ")
    known = mig.canonical_model(spaced)
    if known != spaced:
        return known
    return product.removeprefix("NVIDIA-")[:MODEL_MAX]


def closing_taints(taints: tuple[str, ...]) -> list[str]:
    """The taints ("key=value:Effect") that keep new pods off the node (as kube-scheduler would)."""
    closing = []
    for taint in taints:
        key_value, _sep, effect = taint.rpartition(":")
        key = key_value.partition("=")[0]
        if effect in CLOSING_EFFECTS and (key, effect) not in TOLERATED_TAINTS:
            closing.append(taint)
    return closing


def single_strategy_refusal(item: NodeInventory) -> str:
    """Why a node whose device plugin offers MIG devices with the "single" strategy takes no work:
    they come as `nvidia.com/gpu`, every GPU with one profile, and GFD no longer says how many GPUs
    there are; Tessera places MIG work by profile and changes layouts per GPU, which would turn the
    node's labels MIG-INVALID. "" for a node this does not concern (single with no MIG enabled
    offers whole GPUs, as "none" does)."""
    if item.mig_strategy != MigStrategy.SINGLE or not item.mig_resources:
        return ""
    (offered,) = item.mig_resources[:1]
    if offered.profile == "INVALID" or offered.count == 0:
        return ("GPU Feature Discovery reports an invalid MIG layout for the single strategy (product "
                f"{item.gpu_model}-MIG-INVALID: its GPUs are not all in MIG mode with one profile); "
                "Tessera places nothing here until the node's labels say what it offers.")
    return (f"MIG strategy 'single': the device plugin offers {offered.count} × {offered.profile} MIG devices "
            "as nvidia.com/gpu, not the GPUs and profiles Tessera places work by; set the GPU Operator's "
            "mig.strategy to 'mixed' (ClusterPolicy) for Tessera to schedule this node.")


def node_values(item: NodeInventory) -> NodeValues:
    model = gpu_model_name(item.gpu_model)
    geometry = mig.geometry_for(model)
    if geometry is not None:  # the data file's round figure (80), not GFD's MiB (81559 / 1024 = 79.6)
        memory_gb = geometry.memory_gb
    else:
        memory_gb = round((item.gpu_memory_mib or 1024) / 1024, 1)
    tiers = {choice.value for choice in CapacityTier.Name}
    # Single strategy with MIG on: GFD counts MIG devices, not GPUs, and names the product
    # "<model>-MIG-<profile>"; the rows stay as they are and the node takes nothing new.
    refusal = single_strategy_refusal(item) or sharing_refusal(item)
    return NodeValues(
        name=item.name, gpu_model=model, gpu_count=None if refusal else item.gpu_count,
        gpu_memory_gb=max(1.0, memory_gb),
        mig_capable=item.mig_capable and geometry is not None,
        cpu_cores=max(1, item.cpu_millicores // 1000), memory_gb=max(1, item.memory_mib // 1024),
        leaf_switch=item.leaf_switch or None, tier=item.tier if item.tier in tiers else None,
        ready=item.ready,
        schedulable=item.ready and item.schedulable and not closing_taints(item.taints) and not refusal,
        # Refused: allocatable and others' requests count MIG slices, not the GPUs the rows are.
        allocatable_gpus=None if refusal else item.allocatable_gpus,
        gpus_used_outside=0 if refusal else max(0, item.gpus_used_outside),
        mig_used_outside={profile: count for profile, count in item.mig_used_outside if count > 0},
        refusal=refusal[:REFUSAL_MAX], gpu_sharing=item.gpu_sharing, gpu_replicas=item.gpu_replicas)


def sharing_refusal(item: NodeInventory) -> str:
    """Why a node whose sharing labels do not read takes no work: its device plugin may offer
    replicas where Tessera would ask for whole GPUs (or the reverse), and a guess either way puts
    pods where they cannot start. "" when the labels read well."""
    if not item.sharing_problem:
        return ""
    return (f"GPU sharing labels unreadable ({item.sharing_problem}); Tessera places nothing here until "
            "GPU Feature Discovery says how the device plugin shares this node's GPUs.")


# -- the service --------------------------------------------------------------------------------


def inventory_sync(*, inventory: list[NodeInventory], now: datetime) -> dict[str, list[str]]:
    """Rows to match the cluster: new nodes join (JOINING until their agent reports or the cluster
    says Ready: agents/services.py), changed ones are updated, removed ones leave the snapshot."""
    seen = {item.name: node_values(item) for item in inventory}
    rows = {node.name: node for node in Node.objects.select_related("tier", "leaf_switch").prefetch_related("gpus")}
    existing = set(rows)
    added = sorted(set(seen) - existing)
    # Read once, write only what differs: a steady cluster costs two queries a poll, not a
    # locked transaction per node (9 s a poll at 500 nodes under load, measured).
    changed = [name for name, values in sorted(seen.items())
               if (name not in rows or node_differs(rows[name], values)) and node_apply(values=values)]
    gone = sorted(existing - set(seen))
    if not seen and gone:
        # No GPU node at all is a wrong node selector or RBAC far more often than a real cluster:
        # requeueing every job on that word would do more harm than waiting for the operator.
        log.warning("the cluster lists no GPU node; keeping the %d node rows as they are", len(gone))
        gone = []
    removed = [name for name in gone if node_remove(name=name, at=now)]
    return {"added": added, "changed": [name for name in changed if name not in added], "removed": removed}


def node_differs(node: Node, values: NodeValues) -> bool:
    """Whether node_apply would change anything (`node` with its GPUs prefetched)."""
    wanted = {"gpu_model": values.gpu_model, "cpu_cores": values.cpu_cores, "memory_gb": values.memory_gb,
              "schedulable": values.schedulable, "allocatable_gpus": values.allocatable_gpus,
              "gpus_used_outside": values.gpus_used_outside, "mig_used_outside": values.mig_used_outside,
              "cluster_refusal": values.refusal, "gpu_sharing": values.gpu_sharing,
              "gpu_replicas": values.gpu_replicas}
    if any(getattr(node, name) != value for name, value in wanted.items()):
        return True
    if values.leaf_switch is not None and node.leaf_switch.name != values.leaf_switch:
        return True
    if values.tier is not None and node.tier.name != values.tier:
        return True
    if values.gpu_count is None:
        return False
    gpus = list(node.gpus.all())
    return sorted(gpu.index for gpu in gpus) != list(range(values.gpu_count)) or any(
        (gpu.model, gpu.memory_gb) != (values.gpu_model, values.gpu_memory_gb)
        or (gpu.mig_capable != values.mig_capable and not gpu.mig_enabled) for gpu in gpus)


@transaction.atomic
def node_apply(*, values: NodeValues) -> bool:
    """Create or update one node's rows; True when anything changed."""
    node = Node.objects.select_for_update().filter(name=values.name).first()
    fields = {"gpu_model": values.gpu_model, "cpu_cores": values.cpu_cores, "memory_gb": values.memory_gb,
              "schedulable": values.schedulable, "allocatable_gpus": values.allocatable_gpus,
              "gpus_used_outside": values.gpus_used_outside, "mig_used_outside": values.mig_used_outside,
              "cluster_refusal": values.refusal, "gpu_sharing": values.gpu_sharing,
              "gpu_replicas": values.gpu_replicas}
    if values.leaf_switch is not None or node is None:
        fields["leaf_switch"] = _leaf(values.leaf_switch or f"unlabelled-{values.name}")
    if values.tier is not None or node is None:
        fields["tier"] = CapacityTier.objects.get_or_create(name=values.tier or DEFAULT_TIER)[0]
    if node is None:
        node = Node.objects.create(name=values.name, interconnect=NEW_NODE_INTERCONNECT,
                                   state=Node.State.JOINING, **fields)
        _gpus_apply(node, values)
        return True
    dirty = [name for name, value in fields.items() if getattr(node, name) != value]
    if "cluster_refusal" in dirty and values.refusal:  # once, when it starts: the poll runs every 15 s
        log.warning("node %s takes no new work: %s", values.name, values.refusal)
    for name in dirty:
        setattr(node, name, fields[name])
    if dirty:
        node.save(update_fields=dirty)
    return _gpus_apply(node, values) or bool(dirty)


def _leaf(name: str) -> NetworkSwitch:
    switch, _new = NetworkSwitch.objects.get_or_create(name=name, defaults={"kind": NetworkSwitch.Kind.LEAF})
    return switch


def _gpus_apply(node: Node, values: NodeValues) -> bool:
    """GPU rows 0..count-1 of the cluster's model. One beyond the count (the node shrank) goes if
    no placement or bill names it, else it stays out of use (unhealthy) to keep the history."""
    if values.gpu_count is None:
        return False
    rows = {gpu.index: gpu for gpu in Gpu.objects.filter(node=node)}
    changed = False
    for index in range(values.gpu_count):
        gpu = rows.get(index)
        if gpu is None:
            Gpu.objects.create(node=node, index=index, uuid=f"k8s-{node.name}-{index}", model=values.gpu_model,
                               memory_gb=values.gpu_memory_gb, mig_capable=values.mig_capable)
            changed = True
        elif (gpu.model, gpu.memory_gb) != (values.gpu_model, values.gpu_memory_gb) or \
                (gpu.mig_capable != values.mig_capable and not gpu.mig_enabled):
            Gpu.objects.filter(pk=gpu.pk).update(model=values.gpu_model, memory_gb=values.gpu_memory_gb,
                                                 mig_capable=values.mig_capable or gpu.mig_enabled)
            changed = True
    for index, gpu in rows.items():
        if index < values.gpu_count:
            continue
        if gpu.placements.exists() or gpu.usage_intervals.exists():
            changed |= Gpu.objects.filter(pk=gpu.pk, healthy=True).update(healthy=False) > 0
        else:
            gpu.delete()
            changed = True
    return changed


@transaction.atomic
def node_remove(*, name: str, at: datetime) -> bool:
    """The cluster no longer has the node: its jobs are requeued (billed to its last heartbeat, as
    for a lost node), and the row goes, or, where placements or bills name it, stays as LOST."""
    node = Node.objects.select_for_update().filter(name=name).first()
    if node is None or node.state == Node.State.LOST and not node.schedulable:
        return False
    message = f"Node {node.name} was removed from the cluster."
    jobs_release_on_node(node=node, at=min(at, node.last_heartbeat or at), message=message)
    history = Gpu.objects.filter(node=node).filter(placements__isnull=False).exists() or \
        node.usage_intervals.exists()
    if history:
        Node.objects.filter(pk=node.pk).update(state=Node.State.LOST, schedulable=False)
    else:
        node.delete()
    log.info("node %s left the cluster (%s)", name, "kept as lost" if history else "deleted")
    return True


def jobs_release_on_node(*, node: Node, at: datetime, message: str) -> None:
    """Requeue every job with an open placement on the node, billed up to `at`."""
    jobs = Job.objects.filter(placements__gpu__node=node, placements__ended_at__isnull=True).distinct()
    for job_id in jobs.values_list("id", flat=True):
        job_release(job_id=job_id, at=at, reason="node-lost", message=message)
    usage_intervals_close_for_node(node=node, at=at, reason="node-lost")  # anything not tied to a job row
