"""`make demo`: migrate, load the demo data and serve the portal, all in one process."""

from django.conf import settings
from django.core.management import call_command
from django.core.management.base import BaseCommand

from agents import embedded

# In-process loops the embedded demo runs beside the web server. Each entry is a callable
# started on a daemon thread before the server starts (the scheduler loop and the simulated
# node agents hang here).
EMBEDDED_LOOPS: list = [embedded.start] if settings.TESSERA_BACKEND == "simulated" else []


class Command(BaseCommand):
    help = "Run the embedded demo: SQLite, demo data, in-process loops and the web server."

    def add_arguments(self, parser):
        parser.add_argument("--addrport", default="127.0.0.1:8000")
        parser.add_argument("--no-serve", action="store_true", help="Set up and exit.")

    def handle(self, *args, addrport, no_serve, **options):
        call_command("migrate", interactive=False, verbosity=0)
        call_command("load_demo")
        if no_serve:
            return
        start_loops()
        self.stdout.write(f"Serving http://{addrport}/  (admin at /admin/)")
        call_command("runserver", addrport, use_reloader=False)


def start_loops() -> None:
    """Start the embedded loops; while they run the simulated cluster at its speed, estimated starts
    are converted to wall-clock time (a job 7 hours of work away starts in 7 minutes)."""
    if EMBEDDED_LOOPS:
        settings.TESSERA_CLOCK_SPEED = embedded.DEMO_CONFIG.speed  # this process only: the demo's
    for start_loop in EMBEDDED_LOOPS:
        start_loop()
