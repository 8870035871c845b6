"""Plugins, registered by name. A plugin turns features on (and may set options) when a policy
is built; `build_features` fails loudly on an unknown name."""

from __future__ import annotations

from ..registry import Registry
from .features import Features

PLUGINS = Registry("plugin")


def plugin(name: str, **settings):
    """Register a plugin that sets these Features fields."""
    def configure(features: Features) -> None:
        for key, value in settings.items():
            setattr(features, key, value)
    configure.__doc__ = f"{name}: sets {settings}"
    return PLUGINS.register(name, configure)


plugin("gang", gang=True)
plugin("quota", quota=True)
plugin("fairshare", fairshare=True)
plugin("team-order", team_order=True)
plugin("reserve", reserve=True)
plugin("topology", topology=True)
plugin("tiers", tiers=True)
plugin("mig", mig=True)
plugin("sharing", sharing=True)
plugin("memory", memory_aware=True)
plugin("binpack", packing="binpack")
plugin("spread", packing="spread")


def build_features(names, options: dict | None = None) -> Features:
    features = Features(options=dict(options or {}))
    for name in names:
        PLUGINS.get(name)(features)
    features.frozen = True
    return features
