"""Spend buckets per client key, provider and model (dashboard.spend), filled from the last 8 days of the log:
the dashboard's widest window is 7 days, and older rows are not read again."""

import datetime as dt

from django.db import migrations, models
from django.db.backends.base.schema import BaseDatabaseSchemaEditor
from django.db.migrations.state import StateApps


def backfill(apps: StateApps, schema_editor: BaseDatabaseSchemaEditor) -> None:
    from dashboard import spend
    from dashboard.buckets import Tier

    since = dt.datetime.now(dt.timezone.utc) - dt.timedelta(days=8)
    spend.rebuild(apps.get_model("accounts", "RequestLog"), [Tier(300, apps.get_model("dashboard", "SpendBucket"))], since)


class Migration(migrations.Migration):

    dependencies = [
        ('dashboard', '0002_usagebucket_retried'),
        ('accounts', '0013_schedule_disabled_accounts'),
    ]

    operations = [
        migrations.CreateModel(
            name='SpendBucket',
            fields=[
                ('id', models.BigAutoField(auto_created=True, primary_key=True, serialize=False, verbose_name='ID')),
                ('requests', models.BigIntegerField(default=0)),
                ('errors', models.BigIntegerField(default=0)),
                ('input_tokens', models.BigIntegerField(default=0)),
                ('output_tokens', models.BigIntegerField(default=0)),
                ('cached_tokens', models.BigIntegerField(default=0)),
                ('reasoning_tokens', models.BigIntegerField(default=0)),
                ('start', models.BigIntegerField(help_text="Unix time of the bucket's first second (UTC)")),
                ('client_key_id', models.BigIntegerField(default=0)),
                ('provider_id', models.BigIntegerField(default=0)),
                ('model', models.CharField(blank=True, default='', help_text='As the client asked for it', max_length=200)),
                ('cost_nanos', models.BigIntegerField(default=0)),
            ],
            options={
                'indexes': [models.Index(fields=['client_key_id', 'start'], name='dashboard_s_client__d2d14f_idx'), models.Index(fields=['start'], name='dashboard_s_start_ee0911_idx')],
                'constraints': [models.UniqueConstraint(fields=('start', 'client_key_id', 'provider_id', 'model'), name='spend_bucket_per_key_provider_model')],
            },
        ),
        migrations.RunPython(backfill, migrations.RunPython.noop),
    ]
