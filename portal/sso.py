"""What a single sign-on user may do, from their identity provider's groups (tessera/oidc.py).

The mapping (TESSERA_OIDC_GROUP_MAP) names groups and what each grants: a role in a team, staff
(platform admin) or finance. At each sign-in the grants the mapping can give are set from the
groups the provider sent, and taken away when a group is gone. Teams the mapping never names, and
staff or finance when no group grants them, stay as admins set them by hand.
"""

import logging

from django.contrib.auth.models import Group
from django.db import transaction

from portal.models import FINANCE_GROUP, Membership, Team

LOG = logging.getLogger(__name__)
RANK = {"viewer": 1, "member": 2, "lead": 3}  # a user in two groups of one team gets the higher role


def team_roles_granted(groups: set[str], mapping: dict[str, str]) -> dict[str, str]:
    """{team name: role} the user's groups grant (the highest role where several name one team)."""
    roles: dict[str, str] = {}
    for group, grant in mapping.items():
        if group in groups and ":" in grant:
            team, role = grant.split(":", 1)
            if RANK[role] > RANK.get(roles.get(team, ""), 0):
                roles[team] = role
    return roles


@transaction.atomic
def grants_apply(user, groups: set[str], mapping: dict[str, str]) -> None:
    """Set the user's memberships, staff flag and finance group from their provider groups."""
    granted = team_roles_granted(groups, mapping)
    named = {grant.split(":", 1)[0] for grant in mapping.values() if ":" in grant}
    teams = {team.name: team for team in Team.objects.filter(name__in=named)}
    for missing in sorted(named - set(teams)):
        LOG.warning("TESSERA_OIDC_GROUP_MAP names team %r, which does not exist", missing)
    for name, team in teams.items():
        if name in granted:
            Membership.objects.update_or_create(user=user, team=team, defaults={"role": granted[name]})
        else:
            Membership.objects.filter(user=user, team=team).delete()
    platform = {grant for group, grant in mapping.items() if group in groups and ":" not in grant}
    if "staff" in mapping.values():
        user.is_staff = user.is_superuser = "staff" in platform
        user.save(update_fields=["is_staff", "is_superuser"])
    if "finance" in mapping.values():
        finance, _ = Group.objects.get_or_create(name=FINANCE_GROUP)
        if "finance" in platform:
            user.groups.add(finance)
        else:
            user.groups.remove(finance)
