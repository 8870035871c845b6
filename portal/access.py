"""Who may see and do what (DESIGN §7), decided from a user's memberships.

Roles are read once per request and kept on the user object, so a page that asks many times
still costs one query.
"""

from portal.models import FINANCE_GROUP, Membership

STAFF = "staff"
FINANCE = "finance"
LEAD = Membership.Role.LEAD.value
MEMBER = Membership.Role.MEMBER.value
VIEWER = Membership.Role.VIEWER.value

SEES_JOBS = {STAFF, LEAD, MEMBER, VIEWER}
SUBMITS = {STAFF, LEAD, MEMBER}
MANAGES = {STAFF, LEAD}


def team_roles(user) -> dict[int, str]:
    """{team id: membership role} of a signed-in user."""
    if not user.is_authenticated:
        return {}
    if not hasattr(user, "_tessera_roles"):
        user._tessera_roles = dict(Membership.objects.filter(user=user).values_list("team_id", "role"))
    return user._tessera_roles


def is_finance(user) -> bool:
    if not user.is_authenticated:
        return False
    if not hasattr(user, "_tessera_finance"):
        user._tessera_finance = user.groups.filter(name=FINANCE_GROUP).exists()
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
