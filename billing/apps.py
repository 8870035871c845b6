from django.apps import AppConfig


class BillingConfig(AppConfig):
    name = "billing"
    verbose_name = "Billing and chargeback"

    def ready(self) -> None:
        # The ledger follows placements: scheduling announces starts and ends, billing records them.
        from billing import receivers  # noqa: F401
