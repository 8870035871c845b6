"""MIG geometry from the data shipped in `data/mig_profiles.json`, and the choice of a start slot.

Geometry is keyed on the shape (compute slices, memory slices), not on the profile name: drivers
rename profiles (3g.39gb for 3g.40gb), so names stay data and `resolve()` maps a reported name to
its shape. A layout is tracked as a bitmask of occupied memory slices (NVML placement semantics).
"""

from __future__ import annotations

import json
import re
from collections.abc import Sequence
from dataclasses import dataclass
from functools import cached_property, lru_cache
from pathlib import Path

DATA_FILE = Path(__file__).parent / "data" / "mig_profiles.json"

# Short names the portal and tests use; the data file adds its own also_applies_to and NVML names.
EXTRA_ALIASES = {
    "A100-40GB": "A100-SXM4-40GB",
    "H200-SXM-141GB": "H200-141GB",
    "A30": "A30-24GB",
    "H100-NVL": "H100-NVL-94GB",
    "H100": "H100-80GB",
    "H200": "H200-141GB",
}


@dataclass(frozen=True)
class MigProfile:
    name: str
    compute_slices: int
    memory_slices: int
    memory_gb: float
    max_instances: int
    starts: tuple[int, ...]
    media: bool

    @property
    def shape(self) -> tuple[int, int]:
        return (self.compute_slices, self.memory_slices)

    def mask_at(self, start: int) -> int:
        return ((1 << self.memory_slices) - 1) << start


@dataclass(frozen=True)
class MigGeometry:
    model: str
    memory_gb: float
    compute_slices: int
    memory_slices: int
    max_instances: int
    profiles: tuple[MigProfile, ...]  # plain (non-media) first, smallest memory first

    def by_shape(self, shape: tuple[int, int], media: bool = False) -> MigProfile:
        for profile in self.profiles:
            if profile.shape == tuple(shape) and profile.media == media:
                return profile
        raise KeyError(f"{self.model} has no MIG shape {shape}")

    def resolve(self, name: str) -> MigProfile:
        """The profile a driver-reported name means: exact name, else same compute slices and
        nearest memory (3g.39gb -> 3g.40gb, 7g.79gb -> 7g.80gb)."""
        for profile in self.profiles:
            if profile.name == name:
                return profile
        match = re.match(r"(\d+)g\.(\d+)gb(\+me)?$", name)
        if not match:
            raise KeyError(f"unknown MIG profile {name!r} on {self.model}")
        compute, gb, media = int(match[1]), float(match[2]), bool(match[3])
        same = [p for p in self.profiles if p.compute_slices == compute and p.media == media]
        if not same:
            raise KeyError(f"unknown MIG profile {name!r} on {self.model}")
        return min(same, key=lambda p: abs(p.memory_gb - gb))

    @cached_property
    def plain_profiles(self) -> tuple[MigProfile, ...]:
        """Cached: every sub-GPU placement asks (smallest_profile)."""
        return tuple(p for p in self.profiles if not p.media)

    def gpu_fraction(self, profile: MigProfile) -> float:
        """Quota and billing units: compute slices / 7 (or / 4 on A30)."""
        return profile.compute_slices / self.compute_slices


def _profile(raw: dict, gpu: dict) -> MigProfile:
    memory = raw.get("memory_gb")
    if memory is None:
        # Not captured for H200 7g: take the most conservative per-slice figure so a job is
        # never placed where it might not fit.
        per_slice = min(p["memory_gb"] / p["memory_slices"] for p in gpu["profiles"]
                        if p.get("memory_gb"))
        memory = round(per_slice * raw["memory_slices"], 2)
    return MigProfile(
        name=raw["name"], compute_slices=raw["compute_slices"],
        memory_slices=raw["memory_slices"], memory_gb=float(memory),
        max_instances=raw["max_instances"],
        starts=tuple(sorted(p["start"] for p in raw["placements"])),
        media="+me" in raw["name"],
    )


def _geometry(model: str, gpu: dict) -> MigGeometry:
    profiles = sorted((_profile(p, gpu) for p in gpu["profiles"]),
                      key=lambda p: (p.media, p.memory_gb, p.compute_slices))
    return MigGeometry(model=model, memory_gb=float(gpu["memory_gb"]),
                       compute_slices=gpu["compute_slices"], memory_slices=gpu["memory_slices"],
                       max_instances=gpu["max_instances"], profiles=tuple(profiles))


def normalise(name: str) -> str:
    name = name.strip().upper()
    if name.startswith("NVIDIA "):
        name = name[len("NVIDIA "):]
    return re.sub(r"\s+", "-", name)


@lru_cache(maxsize=1)
def _tables() -> tuple[dict[str, MigGeometry], dict[str, str]]:
    data = json.loads(DATA_FILE.read_text())
    geometries: dict[str, MigGeometry] = {}
    aliases: dict[str, str] = {}
    for model, gpu in data["gpus"].items():
        geometries[model] = _geometry(model, gpu)
        names = [model, *gpu.get("also_applies_to", ()), *gpu.get("nvml_name_examples", ())]
        for alias in names:
            aliases.setdefault(normalise(alias.split(" (")[0]), model)
    for alias, model in EXTRA_ALIASES.items():
        aliases.setdefault(normalise(alias), model)
    return geometries, aliases


_CANONICAL: dict[str, str] = {}


def canonical_model(name: str) -> str:
    """The data file's name for a MIG-capable model, or the name itself for any other GPU."""
    model = _CANONICAL.get(name)
    if model is None:  # cached: every node and GPU asks, and normalising is a few regexes
        model = _CANONICAL[name] = _tables()[1].get(normalise(name), name)
    return model


_GEOMETRIES: dict[str, MigGeometry | None] = {}


def geometry_for(model: str) -> MigGeometry | None:
    """MIG geometry of a model, or None when the model cannot do MIG. Cached per name as
    canonical_model is: each sub-GPU placement asks for every model it tries."""
    if model in _GEOMETRIES:
        return _GEOMETRIES[model]
    geometry = _GEOMETRIES[model] = _tables()[0].get(canonical_model(model))
    return geometry


def mig_models() -> tuple[str, ...]:
    return tuple(_tables()[0])


# --- Slot choice and layout checks -------------------------------------------------------------

_VALUE_CACHE: dict[tuple[str, int], tuple[int, int]] = {}
_CHOICE_CACHE: dict[tuple[str, int, tuple[int, int]], tuple[int, ...]] = {}


def free_value(geometry: MigGeometry, used_mask: int) -> tuple[int, int]:
    """How useful the free memory slices are: the largest compute size still placeable, then how
    many (profile, start) placements remain. Higher is better."""
    key = (geometry.model, used_mask)
    if key not in _VALUE_CACHE:
        largest, count = 0, 0
        for profile in geometry.plain_profiles:
            for start in profile.starts:
                if not used_mask & profile.mask_at(start):
                    largest = max(largest, profile.compute_slices)
                    count += 1
        _VALUE_CACHE[key] = (largest, count)
    return _VALUE_CACHE[key]


def start_choices(geometry: MigGeometry, used_mask: int, profile: MigProfile) -> tuple[int, ...]:
    """Free valid start slots for `profile`, the one that keeps the most useful space first
    (a 1g goes to slot 6 rather than 0 so a 4g stays possible)."""
    key = (geometry.model, used_mask, profile.shape)
    if key not in _CHOICE_CACHE:
        free = [s for s in profile.starts if not used_mask & profile.mask_at(s)]
        free.sort(key=lambda s: (free_value(geometry, used_mask | profile.mask_at(s)), -s),
                  reverse=True)
        _CHOICE_CACHE[key] = tuple(free)
    return _CHOICE_CACHE[key]


def masks_allowing(geometry: MigGeometry, profile: MigProfile) -> tuple[int, ...]:
    """Every occupancy mask with room for `profile`, fullest first (bin packing order)."""
    full = (1 << geometry.memory_slices) - 1
    masks = [m for m in range(full + 1) if start_choices(geometry, m, profile)]
    return tuple(sorted(masks, key=lambda m: (-bin(m).count("1"), m)))


def layout_errors(geometry: MigGeometry, layout: Sequence[tuple[str, int]]) -> list[str]:
    """Why a layout of (profile name, start) pairs is invalid; empty when it is valid."""
    errors: list[str] = []
    used, compute = 0, 0
    counts: dict[str, int] = {}
    for name, start in layout:
        try:
            profile = geometry.resolve(name)
        except KeyError as exc:
            errors.append(str(exc))
            continue
        if start not in profile.starts:
            errors.append(f"{profile.name} cannot start at slot {start}")
        mask = profile.mask_at(start)
        if used & mask:
            errors.append(f"{profile.name}@{start} overlaps another instance")
        used |= mask
        compute += profile.compute_slices
        counts[profile.name] = counts.get(profile.name, 0) + 1
        if counts[profile.name] > profile.max_instances:
            errors.append(f"more than {profile.max_instances} × {profile.name}")
    if used >> geometry.memory_slices:
        errors.append("instance beyond the last memory slice")
    if compute > geometry.compute_slices:
        errors.append(f"{compute} compute slices > {geometry.compute_slices}")
    if len(layout) > geometry.max_instances:
        errors.append(f"more than {geometry.max_instances} instances")
    return errors
