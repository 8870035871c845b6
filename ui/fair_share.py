"""The dashboard's sentence on fair share over time: how much of its share a team used lately,
and what that means for idle GPUs (scheduling/engine/fair_history.py orders lending by it).

The figure is the engine's ratio without the entry penalty: decayed use from the ledger (which
counts running work up to now) over the team's guarantee share. "The last 7 days" is the
half-life (TESSERA_FAIRSHARE_HALF_LIFE_H): older use still counts, at half weight or less.
"""

from __future__ import annotations

import math

from django.conf import settings
from django.utils import timezone

from portal.models import Team
from scheduling import engine
from scheduling.engine import fair_history
from scheduling.engine.policies import get_policy
from scheduling.usage_history import usage_history_at
from ui.selectors import cluster_units

# Within this of 1.0 a team used "about its share": ordering by a few percent is not worth a warning.
ABOUT = 0.05


def team_fair_share(team: Team) -> dict | None:
    """{"ratio", "sentence"} for the team, or None where the live policy ignores use over time.
    Three queries whatever the cluster's size: the ledger aggregate, the teams, the GPUs."""
    if not get_policy(settings.TESSERA_POLICY).features.fair_history:
        return None
    now = timezone.now()
    history = usage_history_at(now)
    queues = [engine.Queue(team=t.name, guaranteed_gpus=float(t.guaranteed_gpus), burst_limit_gpus=None,
                           weight=t.weight) for t in Team.objects.only("name", "guaranteed_gpus", "weight")]
    ratios = fair_history.ratios(history, queues, cluster_units()["total"], now.timestamp())
    used = dict(history.team_gpu_s).get(team.name, 0.0) > 0
    ratio = ratios.get(team.name, 0.0)
    return {"ratio": ratio, "sentence": fair_share_sentence(ratio, used, settings.TESSERA_FAIRSHARE_HALF_LIFE_H)}


def fair_share_sentence(ratio: float, used: bool, half_life_h: int) -> str:
    span = _span(half_life_h)
    if not used:
        return f"Your team used no GPUs over the last {span}, so idle GPUs come to it first."
    if math.isinf(ratio):
        return "Your team has no guaranteed share, so idle GPUs go to teams with one first."
    figure = f"{ratio:.1f}" if ratio >= 0.1 else f"{ratio:.2f}"
    if ratio > 1 + ABOUT:
        return f"Your team used {figure}× its share over the last {span}, so idle GPUs go to others first."
    if ratio < 1 - ABOUT:
        return f"Your team used {figure}× its share over the last {span}, so idle GPUs come to it first."
    return f"Your team used about its share ({figure}×) over the last {span}."


def _span(hours: int) -> str:
    if hours % 24 == 0:
        days = hours // 24
        return f"{days} day{'s' if days != 1 else ''}"
    return f"{hours} hour{'s' if hours != 1 else ''}"
