"""Who sees chargeback: staff and members of the Finance group (docs/design.md §7); nobody else."""

from functools import wraps

from django.contrib.auth.decorators import login_required
from django.core.exceptions import PermissionDenied
from rest_framework.permissions import BasePermission

from portal.access import sees_all_usage


def sees_billing(user) -> bool:
    return user.is_active and sees_all_usage(user)


def finance_required(view):
    """Anonymous → the login page; signed in without the role → 403."""

    @login_required
    @wraps(view)
    def wrapper(request, *args, **kwargs):
        if not sees_billing(request.user):
            raise PermissionDenied("Chargeback is for finance and platform admins.")
        return view(request, *args, **kwargs)

    return wrapper


class IsFinanceOrStaff(BasePermission):
    message = "Chargeback is for finance and platform admins."

    def has_permission(self, request, view) -> bool:
        return sees_billing(request.user)
