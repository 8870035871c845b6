"""Scenario shapes for `simulate generate` and the families `simulate sweep` runs.

A Shape says what a generated cluster and workload look like; `--family NAME` starts from a
preset and any shape option overrides it. Which families and seeds may be used for tuning and
which only for reporting is declared here (TUNING, REPORTING), so that a reported figure never
comes from a scenario the engine was tuned on.
"""

from __future__ import annotations

from dataclasses import dataclass, fields, replace

from scheduling.engine.types import INTERCONNECTS, TIERS


@dataclass(frozen=True)
class NodePart:
    """A share of the cluster's nodes: one GPU model, interconnect and tier. The first part of a
    mix takes the nodes the others leave (share None)."""

    model: str
    interconnect: str
    tier: str
    share: float | None


@dataclass(frozen=True)
class Shape:
    gpus: int = 256
    hours: float = 48.0
    nodes: tuple[NodePart, ...] = (NodePart("H100-80GB", "nvswitch", "reserved", None),
                                   NodePart("H100-80GB", "nvswitch", "spot", 0.31),
                                   NodePart("A100-80GB", "nvswitch", "on-demand", 0.19))
    mig_capable_share: float = 1.0   # of each part's nodes, those whose GPUs can do MIG
    mig_share: float = 0.25          # of the reserved MIG-capable nodes, those starting in MIG mode
    # Of all nodes, those (taken from the first part's nodes not in MIG mode, MIG-incapable first)
    # whose device plugin runs MPS with `mps_replicas` replicas per GPU: the GPU Operator's
    # per-node config (nvidia.com/device-plugin.config), a shared pool for sub-GPU work that every
    # policy sees and obeys (engine/sharing.py). 1 node in 8 here; serving-heavy 2 in 8.
    mps_share: float = 0.125
    mps_replicas: int = 4            # 20 GB pinned per replica on an 80 GB GPU
    spine_oversubscription: float = 2.0
    gang_mix: tuple[tuple[int, float], ...] = ((1, 0.30), (2, 0.12), (4, 0.18), (8, 0.22), (16, 0.10),
                                               (32, 0.05), (64, 0.03))
    model_constraint_share: float = 0.5  # of training jobs, those that name GPU models
    inference_share: float | None = None  # peak serving GPUs / cluster GPUs; None: the catalogue's
    load: float = 1.3                 # everything asked for inside the window / the GPU-hours there
    diurnal_amplitude: float = 0.7    # serving load swings between 1 - this and 1 of its peak


PCIE_40GB = NodePart("A100-40GB", "pcie", "on-demand", 0.25)

FAMILIES: dict[str, tuple[str, Shape]] = {
    "mixed": ("today's scenario: H100 reserved/spot, A100-80GB on-demand, 2:1 spine, load 1.3",
              Shape(gpus=64, hours=24.0)),
    "pcie-heldout": ("shaped like issue 18's held-out scenario: A100-40GB PCIe on-demand nodes beside "
                     "H100/A100 NVSwitch nodes, 2:1 spine, 24 h at 1.2x load",
                     Shape(gpus=64, hours=24.0, load=1.2,
                           nodes=(NodePart("H100-80GB", "nvswitch", "reserved", None),
                                  NodePart("H100-80GB", "nvswitch", "spot", 0.25),
                                  NodePart("A100-80GB", "nvswitch", "reserved", 0.25), PCIE_40GB))),
    "serving-heavy": ("a third of the GPUs serve at peak, strong diurnal swing, half the reserved "
                      "nodes in MIG mode, small training jobs, load 1.0",
                      Shape(gpus=64, hours=24.0, inference_share=0.33, diurnal_amplitude=0.9,
                            mig_share=0.5, load=1.0, mps_share=0.25,
                            gang_mix=((1, 0.45), (2, 0.2), (4, 0.2), (8, 0.15)))),
    "big-gangs": ("training of 8-64 GPUs on a 4:1 spine, little serving, load 1.4",
                  Shape(gpus=64, hours=24.0, spine_oversubscription=4.0, inference_share=0.05,
                        load=1.4, gang_mix=((1, 0.1), (4, 0.1), (8, 0.35), (16, 0.25), (32, 0.15),
                                            (64, 0.05)))),
    "constrained": ("three GPU models (H100, A100-80GB, A100-40GB SXM), most jobs name models, half "
                    "the nodes MIG-capable, load 1.5",
                    Shape(gpus=64, hours=24.0, load=1.5, model_constraint_share=0.9,
                          mig_capable_share=0.5,
                          nodes=(NodePart("H100-80GB", "nvswitch", "reserved", None),
                                 NodePart("A100-80GB", "nvswitch", "spot", 0.3),
                                 NodePart("A100-40GB", "nvswitch", "on-demand", 0.3)))),
    "light": ("load 0.8, flat serving, few constraints: a cluster that is not overloaded",
              Shape(gpus=64, hours=24.0, load=0.8, diurnal_amplitude=0.3, model_constraint_share=0.25)),
}

# Tuning may use these families at these seeds; reports use every family at the reporting seeds,
# which tuning never sees. pcie-heldout and constrained are never tuned on.
TUNING = {"families": ("mixed", "serving-heavy", "big-gangs", "light"), "first_seed": 101}
REPORTING = {"families": tuple(FAMILIES), "first_seed": 1}


def family_shape(name: str) -> Shape:
    if name not in FAMILIES:
        raise ValueError(f"unknown family {name!r}; known: {', '.join(FAMILIES)}")
    return FAMILIES[name][1]


def check_shape(shape: Shape) -> Shape:
    """Refuse a shape that cannot make a cluster, with the option's name."""
    if shape.gpus < 24 or shape.gpus % 8:
        raise ValueError("--gpus must be a multiple of 8, at least 24")
    if not shape.hours > 0:
        raise ValueError("--hours must be positive")
    if not 0.5 <= shape.load <= 2.0:
        raise ValueError("--load must be within 0.5..2.0")
    for name in ("mig_capable_share", "mig_share", "mps_share", "model_constraint_share", "diurnal_amplitude"):
        if not 0 <= getattr(shape, name) <= 1:
            raise ValueError(f"--{name.replace('_', '-')} must be within 0..1")
    if shape.inference_share is not None and not 0 <= shape.inference_share <= 0.8:
        raise ValueError("--inference-share must be within 0..0.8")
    if not 2 <= shape.mps_replicas <= 48:
        raise ValueError("--mps-replicas must be within 2..48 (the MPS daemon's client limit)")
    if shape.spine_oversubscription < 1:
        raise ValueError("--spine-oversubscription must be at least 1")
    if not shape.nodes or shape.nodes[0].share is not None or any(p.share is None for p in shape.nodes[1:]):
        raise ValueError("--nodes: the first part takes the rest (no share), every other part has one")
    if sum(p.share or 0 for p in shape.nodes) >= 1:
        raise ValueError("--nodes: the shares must leave some nodes to the first part")
    for part in shape.nodes:
        if part.interconnect not in INTERCONNECTS or part.tier not in TIERS:
            raise ValueError(f"--nodes: {part.interconnect}/{part.tier}: use {'|'.join(INTERCONNECTS)} "
                             f"and {'|'.join(TIERS)}")
    if not shape.gang_mix or any(size < 1 or weight < 0 for size, weight in shape.gang_mix) \
            or sum(w for _, w in shape.gang_mix) <= 0:
        raise ValueError("--gang-mix needs sizes >= 1 with non-negative weights, some positive")
    return shape


def parse_nodes(text: str) -> tuple[NodePart, ...]:
    """'H100-80GB/nvswitch/reserved,A100-40GB/pcie/on-demand=0.25': the first takes the rest."""
    parts = []
    for item in text.split(","):
        spec, _, share = item.strip().partition("=")
        bits = spec.split("/")
        if len(bits) != 3:
            raise ValueError(f"--nodes: {item!r} is not MODEL/INTERCONNECT/TIER[=SHARE]")
        try:
            value = float(share) if share else None
        except ValueError:
            raise ValueError(f"--nodes: {share!r} is not a share") from None
        parts.append(NodePart(bits[0], bits[1], bits[2], value))
    return tuple(parts)


def parse_gang_mix(text: str) -> tuple[tuple[int, float], ...]:
    """'1:0.3,8:0.5,64:0.2' -> ((1, 0.3), (8, 0.5), (64, 0.2))."""
    try:
        return tuple((int(size), float(weight)) for size, weight in
                     (item.strip().split(":") for item in text.split(",")))
    except ValueError:
        raise ValueError(f"--gang-mix: {text!r} is not SIZE:WEIGHT,...") from None


SHAPE_OPTIONS = tuple(f.name for f in fields(Shape))


def shape_with(base: Shape, **overrides) -> Shape:
    return check_shape(replace(base, **{k: v for k, v in overrides.items() if v is not None}))
