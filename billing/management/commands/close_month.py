"""`python manage.py close_month 2026-11 --by fiona`: make a month's statement final (see billing/closing.py)."""

from django.contrib.auth import get_user_model
from django.core.management.base import BaseCommand, CommandError

from billing.closing import month_close
from billing.periods import Month, PeriodError


class Command(BaseCommand):
    help = "Close a month: freeze its statement lines so no later rate edit changes them."

    def add_arguments(self, parser):
        parser.add_argument("month", help="YYYY-MM, a month that has ended.")
        parser.add_argument("--by", help="Username recorded as the one who closed it.")

    def handle(self, *args, month, by=None, **options):
        user = None
        if by:
            user = get_user_model().objects.filter(username=by).first()
            if user is None:
                raise CommandError(f"No user {by!r}.")
        try:
            closed = month_close(month=Month.parse(month), by=user)
        except PeriodError as error:
            raise CommandError(str(error)) from error
        self.stdout.write(f"Closed {month}: {closed.lines.count()} lines, ${closed.total_cost:,.2f}.")
