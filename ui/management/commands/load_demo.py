from django.conf import settings
from django.core.management.base import BaseCommand, CommandError

from ui.demo import demo_is_loaded, demo_load


class Command(BaseCommand):
    help = "Load the demo cluster, teams, users and jobs (demo only: DEBUG=1; skipped when already loaded)."

    def handle(self, *args, **options):
        # The demo's accounts have published passwords (admin/admin-demo-pass): never in production.
        if not settings.DEBUG:
            raise CommandError("load_demo creates accounts with published passwords; it runs only with "
                               "DEBUG=1 (the embedded demo), never in production.")
        if demo_is_loaded():
            self.stdout.write("Demo data already loaded.")
            return
        accounts = demo_load(workload=True)  # and what the live demo shows: a busy cluster, a queue from the start
        self.stdout.write(self.style.SUCCESS("Demo data loaded. Sign in with (demo only):"))
        for username, password, what in accounts:
            self.stdout.write(f"  {username:<8} {password:<18} {what}")
