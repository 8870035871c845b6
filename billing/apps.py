from django.apps import AppConfig


class BillingConfig(AppConfig):
    name = "billing"
    verbose_name = "Billing and chargeback"

    def ready(self) -> None:
        # The ledger follows placements: scheduling announces starts and ends, billing records them.
        from billing import receivers  # noqa: F401

        # The scheduler's snapshot prices each node from the rate card.
        from billing.rate_card import prices_at
        from scheduling.prices import price_reader_set
        price_reader_set(prices_at)
        # ...and gives each team's decayed use from the ledger (fair share over time).
        from billing.fair_usage import decayed_usage
        from scheduling.usage_history import usage_reader_set
        usage_reader_set(decayed_usage)
