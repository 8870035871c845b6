from django.apps import AppConfig


class CheckpointsConfig(AppConfig):
    name = "checkpoints"
    verbose_name = "Checkpoint channel"

    def ready(self) -> None:
        # A run's tokens die with its placements: scheduling announces the end, we revoke.
        from checkpoints import receivers  # noqa: F401
