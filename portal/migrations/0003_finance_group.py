from django.db import migrations

FINANCE_GROUP = "Finance"


def create_finance_group(apps, schema_editor):
    apps.get_model("auth", "Group").objects.get_or_create(name=FINANCE_GROUP)


class Migration(migrations.Migration):
    dependencies = [("portal", "0002_initial"), ("auth", "0012_alter_user_first_name_max_length")]
    operations = [migrations.RunPython(create_finance_group, migrations.RunPython.noop)]
