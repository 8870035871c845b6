from decimal import Decimal

from django.apps import AppConfig


class SchedulingConfig(AppConfig):
    name = "scheduling"
    verbose_name = "Cluster and scheduling"

    def ready(self) -> None:
        from portal.capacity import capacity_reader_set
        from scheduling.models import Gpu, Node

        # A GPU in MIG mode is still one unit however it is sliced; a lost node is not capacity.
        capacity_reader_set(lambda: Decimal(Gpu.objects.exclude(node__state=Node.State.LOST).count()))
