"""Small builders for engine tests: a cluster and jobs in one line each.

The engine's types have no defaults (every adapter says every value); the defaults a test may
leave out live here, in one place.
"""

from __future__ import annotations

from scheduling.engine import Allocation, Gpu, Job, MigInstance, Node, Queue, Running, Snapshot
from scheduling.engine.fair_history import empty_history
from scheduling.engine.types import PRIORITY_CLASSES, Nomination

MEMORY = {"H100-80GB": 80.0, "A100-80GB": 80.0, "A100-SXM4-40GB": 40.0, "A30-24GB": 24.0,
          "H200-141GB": 141.0, "L4": 24.0, "T4": 16.0}
NOW = 100_000.0


def node(name, model="H100-80GB", tier="reserved", leaf="leaf-1", spine="spine-1",
         interconnect="nvswitch", gpus=8, mig=(), layouts=None, cpu=128, memory=1024,
         state="ready", sharing="none", replicas=1):
    """`mig`: indexes of MIG-enabled GPUs; `layouts`: {index: [(profile, start, job_id)]};
    `sharing`/`replicas`: the device plugin's mode (engine/sharing.py)."""
    layouts = layouts or {}
    devices = []
    for i in range(gpus):
        instances = tuple(MigInstance(p, s, j) for p, s, j in layouts.get(i, ()))
        devices.append(Gpu(index=i, uuid=f"{name}-gpu{i}", model=model, memory_gb=MEMORY[model],
                           mig_enabled=i in mig or i in layouts, mig_instances=instances,
                           layout_changed_at=None, healthy=True, mig_capable=True))
    return Node(name=name, tier=tier, leaf=leaf, spine=spine, gpu_model=model,
                interconnect=interconnect, cpu_cores=cpu, memory_gb=memory,
                gpus=tuple(devices), state=state, nics=8, nic_gb_s=48.0, price_per_gpu_hour=None,
                sharing=sharing, share_replicas=replicas)


def job(id, team="ml", cls="training", gpus=1, mem=0.0, **kw):
    fields = dict(project="", kind="inference" if cls == "production" else "training", gpu_milli=0,
                  cpu_cores=1.0, memory_gb=4.0, gang_size=1, gpu_models=(), checkpoint_interval_s=None,
                  last_checkpoint_at=None, preemptible=True, queue_order=0, submitted_at=0.0,
                  expected_runtime_s=3600.0, accepts_no_isolation=False, mig_profile="")
    fields.update(kw)
    return Job(id=id, team=team, priority_class=cls, priority=PRIORITY_CLASSES[cls], gpus=gpus,
               gpu_memory_gb=mem, **fields)


def inference(id, mem, team="web", cls="production", **kw):
    return job(id, team=team, cls=cls, gpus=0, mem=mem, kind="inference", **kw)


def whole(gpu_index, memory_gb=0.0) -> Allocation:
    return Allocation(gpu_index=gpu_index, milli=1000, memory_gb=memory_gb, mig_profile=None, mig_start=None)


def running(j, node_name, gpu_indexes=(), started=NOW - 3600, borrowed=False, member=0,
            allocations=None):
    allocs = allocations or tuple(whole(i) for i in gpu_indexes)
    return Running(job=j, node=node_name, allocations=tuple(allocs), started_at=started,
                   borrowed=borrowed, member=member)


def queue(team, guaranteed=0.0, burst_limit=None, weight=1.0) -> Queue:
    return Queue(team=team, guaranteed_gpus=guaranteed, burst_limit_gpus=burst_limit, weight=weight)


def snap(nodes, pending=(), running=(), queues=(), in_flight=(), now=NOW, spine_oversubscription=1.0,
         nominations=(), usage_history=None):
    """`queues`: Queue objects or (team, guaranteed[, burst limit[, weight]]) tuples;
    `nominations`: Nomination objects or (job id, [(node, gpu index), ...], priority) tuples."""
    return Snapshot(now=now, nodes=tuple(nodes), pending=tuple(pending),
                    running=tuple(running), queues=tuple(queue(*q) if isinstance(q, tuple)
                                                         else q for q in queues),
                    in_flight=tuple(in_flight), spine_oversubscription=spine_oversubscription,
                    nominations=tuple(n if isinstance(n, Nomination) else
                                      Nomination(job_id=n[0], gpus=tuple(tuple(g) for g in n[1]), priority=n[2])
                                      for n in nominations),
                    usage_history=usage_history or empty_history(now), clock_speed=1.0)


def binds_by_job(plan):
    out: dict[str, list] = {}
    for b in plan.binds:
        out.setdefault(b.job_id, []).append(b)
    return out
