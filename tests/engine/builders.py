"""Small builders for engine tests: a cluster and jobs in one line each."""

from __future__ import annotations

from scheduling.engine import Gpu, Job, MigInstance, Node, Queue, Running, Snapshot
from scheduling.engine.types import PRIORITY_CLASSES

MEMORY = {"H100-80GB": 80.0, "A100-80GB": 80.0, "A100-SXM4-40GB": 40.0, "A30-24GB": 24.0,
          "H200-141GB": 141.0, "L4": 24.0, "T4": 16.0}
NOW = 100_000.0


def node(name, model="H100-80GB", tier="reserved", leaf="leaf-1", spine="spine-1",
         interconnect="nvswitch", gpus=8, mig=(), layouts=None, cpu=128, memory=1024,
         state="ready"):
    """`mig`: indexes of MIG-enabled GPUs; `layouts`: {index: [(profile, start, job_id)]}."""
    layouts = layouts or {}
    devices = []
    for i in range(gpus):
        instances = tuple(MigInstance(p, s, j) for p, s, j in layouts.get(i, ()))
        devices.append(Gpu(index=i, uuid=f"{name}-gpu{i}", model=model, memory_gb=MEMORY[model],
                           mig_enabled=i in mig or i in layouts, mig_instances=instances))
    return Node(name=name, tier=tier, leaf=leaf, spine=spine, gpu_model=model,
                interconnect=interconnect, cpu_cores=cpu, memory_gb=memory,
                gpus=tuple(devices), state=state)


def job(id, team="ml", cls="training", gpus=1, mem=0.0, **kw):
    kind = kw.pop("kind", "inference" if cls == "production" else "training")
    return Job(id=id, team=team, kind=kind, priority_class=cls,
               priority=PRIORITY_CLASSES[cls], gpus=gpus, gpu_memory_gb=mem, **kw)


def inference(id, mem, team="web", cls="production", **kw):
    return job(id, team=team, cls=cls, gpus=0, mem=mem, kind="inference", **kw)


def running(j, node_name, gpu_indexes=(), started=NOW - 3600, borrowed=False, member=0,
            allocations=None):
    from scheduling.engine import Allocation
    allocs = allocations or tuple(Allocation(gpu_index=i, milli=1000) for i in gpu_indexes)
    return Running(job=j, node=node_name, allocations=tuple(allocs), started_at=started,
                   borrowed=borrowed, member=member)


def snap(nodes, pending=(), running=(), queues=(), in_flight=(), now=NOW, **kw):
    return Snapshot(now=now, nodes=tuple(nodes), pending=tuple(pending),
                    running=tuple(running), queues=tuple(Queue(*q) if isinstance(q, tuple)
                                                         else q for q in queues),
                    in_flight=tuple(in_flight), **kw)


def binds_by_job(plan):
    out: dict[str, list] = {}
    for b in plan.binds:
        out.setdefault(b.job_id, []).append(b)
    return out
