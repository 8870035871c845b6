"""The GPU models a platform engineer may type for a node, and the GPU rows a typed node gets.

A model is known when the MIG data file describes it (its memory comes from there) or when the
cluster already has GPUs of it (their memory is taken). Anything else is most likely a typo; a
model new to the cluster arrives with the inventory its node's agent or Kubernetes reports.
"""

from django.db import transaction
from django.db.models import Max

from scheduling.engine import mig
from scheduling.models import Gpu, Node

MAX_GPUS_PER_NODE = 16  # the largest GPU servers sold (HGX B200: 8; some PCIe chassis: 10-16)


def known_gpu_models() -> dict[str, float]:
    """{model: memory per GPU in GB}, the MIG data file's models and the cluster's own."""
    known = {}
    for model in mig.mig_models():
        geometry = mig.geometry_for(model)
        if geometry is not None:
            known[model] = geometry.memory_gb
    for row in Gpu.objects.values("model").annotate(memory_gb=Max("memory_gb")):
        known.setdefault(row["model"], row["memory_gb"])
    return known


def resolve_gpu_model(typed: str) -> str | None:
    """The known model a typed name means ('H100' -> 'H100-80GB'), or None."""
    known = known_gpu_models()
    for name in (typed.strip(), mig.canonical_model(typed.strip())):
        if name in known:
            return name
    return None


@transaction.atomic
def node_gpus_add(*, node: Node, count: int) -> list[Gpu]:
    """`count` GPU rows of the node's model after any it has. Their uuids are placeholders
    ('typed-<node id>-<index>'): agents and the inventory match GPUs by index, not by uuid."""
    if not 1 <= count <= MAX_GPUS_PER_NODE:
        raise ValueError(f"count must be 1-{MAX_GPUS_PER_NODE}, not {count}")
    memory_gb = known_gpu_models()[node.gpu_model]
    last = Gpu.objects.filter(node=node).aggregate(last=Max("index"))["last"]
    first = 0 if last is None else last + 1
    capable = mig.geometry_for(node.gpu_model) is not None
    return Gpu.objects.bulk_create([
        Gpu(node=node, index=index, uuid=f"typed-{node.pk}-{index}", model=node.gpu_model, memory_gb=memory_gb,
            mig_capable=capable) for index in range(first, first + count)])
