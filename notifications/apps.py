from django.apps import AppConfig


class NotificationsConfig(AppConfig):
    name = "notifications"
    verbose_name = "Notifications"

    def ready(self) -> None:
        # Job timeline events become notices: scheduling writes the timeline and never imports us.
        from notifications import receivers  # noqa: F401
