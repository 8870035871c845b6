"""Who may see and do what (docs/design.md §7), decided from a user's memberships.

Roles, team names and the finance flag are read in one query per request and kept on the user
object, so a page that asks many times still costs one query.
"""

from django.contrib.auth.models import Group
from django.db.models import Exists, OuterRef

from portal.models import FINANCE_GROUP, Membership

STAFF = "staff"
FINANCE = "finance"
LEAD = Membership.Role.LEAD.value
MEMBER = Membership.Role.MEMBER.value
VIEWER = Membership.Role.VIEWER.value

SEES_JOBS = {STAFF, LEAD, MEMBER, VIEWER}
SUBMITS = {STAFF, LEAD, MEMBER}
MANAGES = {STAFF, LEAD}


def _load(user) -> None:
    """Memberships (with team names, for the navigation) and the finance flag in one query.

    Each membership row carries the flag; only a user with no membership (finance, staff, nobody)
    needs a second, small query for it.
    """
    finance = Group.objects.filter(user=OuterRef("user_id"), name=FINANCE_GROUP)
    rows = list(Membership.objects.filter(user=user).order_by()  # Meta ordering would join user and team
                .values_list("team_id", "role", "team__name", Exists(finance)))
    if not rows:
        user._tessera_roles, user._tessera_team_names = {}, {}
        user._tessera_finance = user.groups.filter(name=FINANCE_GROUP).exists()
        return
    user._tessera_roles = {team_id: role for team_id, role, _, _ in rows}
    user._tessera_team_names = {team_id: name for team_id, _, name, _ in rows}
    user._tessera_finance = rows[0][3]


def team_roles(user) -> dict[int, str]:
    """{team id: membership role} of a signed-in user."""
    if not user.is_authenticated:
        return {}
    if not hasattr(user, "_tessera_roles"):
        _load(user)
    return user._tessera_roles


def team_names(user) -> dict[int, str]:
    """{team id: name} of the user's memberships, read with the roles."""
    if not user.is_authenticated:
        return {}
    if not hasattr(user, "_tessera_team_names"):
        _load(user)
    return user._tessera_team_names


def is_finance(user) -> bool:
    if not user.is_authenticated:
        return False
    if not hasattr(user, "_tessera_finance"):
        _load(user)
    return user._tessera_finance


def role_in(user, team_id: int) -> str | None:
    """The role that decides what `user` may do in a team; None means nothing at all."""
    if not user.is_authenticated:
        return None
    if user.is_staff:
        return STAFF
    role = team_roles(user).get(team_id)
    if role:
        return role
    return FINANCE if is_finance(user) else None


def sees_all_usage(user) -> bool:
    return user.is_authenticated and (user.is_staff or is_finance(user))


def sees_cluster(user) -> bool:
    """The cluster's inventory is for people with a role somewhere (a team, finance, staff): an
    account that belongs to no team learns nothing about it."""
    return user.is_authenticated and (user.is_staff or is_finance(user) or bool(team_roles(user)))


def can_see_jobs(user, team_id: int) -> bool:
    return role_in(user, team_id) in SEES_JOBS


def can_submit(user, team_id: int) -> bool:
    return role_in(user, team_id) in SUBMITS


def can_manage(user, team_id: int) -> bool:
    """Reorder the queue, change priorities and cancel anyone's job in the team."""
    return role_in(user, team_id) in MANAGES


def can_cancel(user, job) -> bool:
    role = role_in(user, job.team_id)
    return role in MANAGES or (role == MEMBER and job.submitted_by_id == user.pk)


def submit_teams(user, teams) -> list:
    """The teams, from `teams`, the user may submit to."""
    return [team for team in teams if can_submit(user, team.pk)]
