from django.core.management.base import BaseCommand

from ui.demo import demo_is_loaded, demo_load


class Command(BaseCommand):
    help = "Load the demo cluster, teams, users and jobs (demo only; skipped when already loaded)."

    def handle(self, *args, **options):
        if demo_is_loaded():
            self.stdout.write("Demo data already loaded.")
            return
        accounts = demo_load()
        self.stdout.write(self.style.SUCCESS("Demo data loaded. Sign in with (demo only):"))
        for username, password, what in accounts:
            self.stdout.write(f"  {username:<8} {password:<18} {what}")
