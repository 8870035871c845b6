"""`python manage.py api_token <user>`: make a named, expiring API token for a user and print it."""

from django.conf import settings
from django.contrib.auth import get_user_model
from django.core.exceptions import ValidationError
from django.core.management.base import BaseCommand, CommandError

from portal.tokens import token_issue


class Command(BaseCommand):
    help = "Make a named API token for a user and print it (shown once; users manage theirs in the portal)."

    def add_arguments(self, parser):
        parser.add_argument("username")
        parser.add_argument("--name", default="cli", help="What the token is for (unique among their live ones).")
        parser.add_argument("--days", type=int, default=30,
                            help=f"How long it lasts (at most TESSERA_API_TOKEN_MAX_DAYS, now "
                                 f"{settings.TESSERA_API_TOKEN_MAX_DAYS}).")

    def handle(self, *args, username, name, days, **options):
        user = get_user_model().objects.filter(username=username).first()
        if user is None:
            raise CommandError(f"No user {username!r}.")
        try:
            _token, secret = token_issue(user, name, days)
        except ValidationError as error:
            raise CommandError("; ".join(error.messages)) from None
        self.stdout.write(secret)
