from django.db import migrations

from scheduling.defaults import defaults_ensure


def create_defaults(apps, schema_editor):
    defaults_ensure(apps.get_model("scheduling", "CapacityTier"), apps.get_model("scheduling", "PriorityClass"))


class Migration(migrations.Migration):
    dependencies = [("scheduling", "0001_initial")]
    operations = [migrations.RunPython(create_defaults, migrations.RunPython.noop)]
