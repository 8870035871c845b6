import django.core.validators
from decimal import Decimal

from django.db import migrations, models


def fill_fractions(apps, schema_editor):
    """Existing instances get compute slices over their GPU's, from the geometry the engine uses."""
    from scheduling.engine import mig
    from scheduling.models import decimal_fraction

    MigInstance = apps.get_model("scheduling", "MigInstance")
    for instance in MigInstance.objects.select_related("gpu"):
        geometry = mig.geometry_for(instance.gpu.model)
        if geometry is None:
            raise RuntimeError(f"MIG instance {instance.pk} is on a {instance.gpu.model}, which has no MIG geometry")
        instance.gpu_fraction = decimal_fraction(instance.compute_slices / geometry.compute_slices)
        instance.save(update_fields=["gpu_fraction"])


FRACTION_VALIDATORS = [django.core.validators.MinValueValidator(Decimal("0.000001")),
                       django.core.validators.MaxValueValidator(Decimal("1"))]
HELP = "GPU units it counts for: compute slices / the GPU's compute slices (7; 4 on an A30)."


class Migration(migrations.Migration):

    dependencies = [
        ("scheduling", "0006_job_checkpoint_save_s"),
    ]

    operations = [
        migrations.AddField(
            model_name="miginstance",
            name="gpu_fraction",
            field=models.DecimalField(decimal_places=6, max_digits=7, null=True, validators=FRACTION_VALIDATORS,
                                      help_text=HELP),
        ),
        migrations.RunPython(fill_fractions, migrations.RunPython.noop),
        migrations.AlterField(
            model_name="miginstance",
            name="gpu_fraction",
            field=models.DecimalField(decimal_places=6, max_digits=7, validators=FRACTION_VALIDATORS, help_text=HELP),
        ),
    ]
