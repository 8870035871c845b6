"""Node and task shapes for the FGD fill experiment, and the two primitive operations on them.

A node's GPUs are kept as a tuple of free milli-GPUs sorted in descending order. GPUs on one node
are interchangeable (no topology in this experiment), so the sorted multiset is the whole state
and equal states can share cached scores.
"""

from __future__ import annotations

from typing import NamedTuple

MILLI = 1000


class Request(NamedTuple):
    cpu: int  # milli-cores
    mem: int  # MiB
    num_gpu: int
    gpu_milli: int  # per GPU, 0..1000; 0 when num_gpu == 0
    spec: frozenset[str] | None = None  # allowed GPU models; None = any

    @property
    def total_milli(self) -> int:
        return self.num_gpu * self.gpu_milli

    @property
    def is_share(self) -> bool:
        return self.num_gpu == 1 and self.gpu_milli < MILLI


class NodeView(NamedTuple):
    model: str
    cpu_left: int
    mem_left: int
    gpus: tuple[int, ...]  # free milli per GPU, descending
    tags: frozenset[str] = frozenset()  # GpuClustering affinity tags of the tasks placed here

    @property
    def idle(self) -> int:
        return sum(self.gpus)


def model_allowed(model: str, spec: frozenset[str] | None) -> bool:
    return spec is None or model in spec


def gpus_fit(gpus: tuple[int, ...], num_gpu: int, gpu_milli: int) -> bool:
    """True if at least num_gpu GPUs each have gpu_milli free (gpus sorted descending)."""
    return num_gpu == 0 or (len(gpus) >= num_gpu and gpus[num_gpu - 1] >= gpu_milli)


def fits(node: NodeView, task: Request, check_mem: bool = True) -> bool:
    """The artifact's filters: CPU and RAM (NodeResourcesFit), model and GPUs (Open-Gpu-Share)."""
    if node.cpu_left < task.cpu or (check_mem and node.mem_left < task.mem):
        return False
    if task.num_gpu == 0:
        return True
    return model_allowed(node.model, task.spec) and gpus_fit(node.gpus, task.num_gpu,
                                                             task.gpu_milli)


def affinity_tag(task: Request) -> str | None:
    """GpuClustering's task class: share, k-gpu, or None for CPU-only tasks."""
    if task.num_gpu == 0:
        return None
    return "share" if task.is_share else f"{task.num_gpu}gpu"


def take_gpus(gpus: tuple[int, ...], num_gpu: int, gpu_milli: int,
              share_pick: int | None = None) -> tuple[int, ...]:
    """Subtract a request from the GPUs and return the new sorted tuple.

    share_pick is the free value of the GPU a sharing task goes to; without it the request is
    packed onto the least-free GPUs that fit, as the artifact's NodeResource.Sub does.
    """
    if num_gpu == 0:
        return gpus
    free = list(gpus)
    if share_pick is not None:
        free[free.index(share_pick)] -= gpu_milli
    else:
        left = num_gpu
        for i in range(len(free) - 1, -1, -1):  # ascending free order
            if free[i] >= gpu_milli:
                free[i] -= gpu_milli
                left -= 1
                if left == 0:
                    break
        if left:
            raise ValueError(f"{num_gpu} x {gpu_milli}m does not fit on {gpus}")
    free.sort(reverse=True)
    return tuple(free)


def place(node: NodeView, task: Request, share_pick: int | None = None) -> NodeView:
    """The node's state after the task is placed on it (CPU first, then GPUs)."""
    tag = affinity_tag(task)
    tags = node.tags | {tag} if tag and tag not in node.tags else node.tags
    return NodeView(node.model, node.cpu_left - task.cpu, node.mem_left - task.mem,
                     take_gpus(node.gpus, task.num_gpu, task.gpu_milli, share_pick), tags)


def share_options(node: NodeView, task: Request) -> list[int]:
    """Distinct free values of the GPUs a sharing task could go to, ascending."""
    return sorted({g for g in node.gpus if g >= task.gpu_milli})
