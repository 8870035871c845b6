"""On PostgreSQL the database itself refuses overlapping rates for one GPU model × tier.

Kept out of Meta.constraints because SQLite (the embedded demo) cannot express it; there the
Rate.clean() / rate_save() checks are the guard.
"""

from django.db import migrations

CREATE = """
CREATE EXTENSION IF NOT EXISTS btree_gist;
ALTER TABLE billing_rate ADD CONSTRAINT rate_no_overlapping_validity EXCLUDE USING gist (
    gpu_model WITH =, tier_id WITH =, daterange(valid_from, valid_to, '[)') WITH &&);
"""
DROP = "ALTER TABLE billing_rate DROP CONSTRAINT IF EXISTS rate_no_overlapping_validity;"


def forwards(apps, schema_editor):
    if schema_editor.connection.vendor == "postgresql":
        schema_editor.execute(CREATE)


def backwards(apps, schema_editor):
    if schema_editor.connection.vendor == "postgresql":
        schema_editor.execute(DROP)


class Migration(migrations.Migration):
    dependencies = [("billing", "0001_initial")]
    operations = [migrations.RunPython(forwards, backwards)]
