"""Usage and spend buckets an hour and a day wide beside the five-minute ones (dashboard.buckets: a window
reads the coarsest that fit), filled from the five-minute buckets, which nest in them exactly."""


from django.db import migrations, models
from django.db.backends.base.schema import BaseDatabaseSchemaEditor
from django.db.migrations.state import StateApps
from django.db.models import F, Sum

KINDS = (("UsageBucket", ["account_id"], ("UsageHour", "UsageDay")),
         ("SpendBucket", ["client_key_id", "provider_id", "model"], ("SpendHour", "SpendDay")))


def backfill(apps: StateApps, schema_editor: BaseDatabaseSchemaEditor) -> None:
    from dashboard.buckets import add_counts, add_in_chunks

    for fine_name, ident, coarse_names in KINDS:
        fine = apps.get_model("dashboard", fine_name)
        sums = [f.name for f in fine._meta.concrete_fields if f.name not in ("id", "start", *ident)]
        for name, seconds in zip(coarse_names, (3600, 86400)):
            coarse = apps.get_model("dashboard", name)
            rows = (fine.objects.annotate(t=F("start") - F("start") % seconds).values("t", *ident)
                    .annotate(**{s: Sum(s) for s in sums}).order_by())

            def add(batch: list[tuple[object, ...]], model: object = coarse, ident: list[str] = ident) -> None:
                add_counts(model, ["start", *ident], sums, batch)

            add_in_chunks(((r["t"], *(r[c] for c in ident), *(r[s] for s in sums)) for r in rows.iterator()),
                          add, 5_000)


class Migration(migrations.Migration):

    dependencies = [
        ('dashboard', '0003_spendbucket'),
    ]

    operations = [
        migrations.CreateModel(
            name='SpendDay',
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
                'indexes': [models.Index(fields=['client_key_id', 'start'], name='dashboard_s_client__01a1e5_idx')],
                'constraints': [models.UniqueConstraint(fields=('start', 'client_key_id', 'provider_id', 'model'), name='spend_day_per_key_provider_model')],
            },
        ),
        migrations.CreateModel(
            name='SpendHour',
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
                'indexes': [models.Index(fields=['client_key_id', 'start'], name='dashboard_s_client__e614bb_idx')],
                'constraints': [models.UniqueConstraint(fields=('start', 'client_key_id', 'provider_id', 'model'), name='spend_hour_per_key_provider_model')],
            },
        ),
        migrations.CreateModel(
            name='UsageDay',
            fields=[
                ('id', models.BigAutoField(auto_created=True, primary_key=True, serialize=False, verbose_name='ID')),
                ('requests', models.BigIntegerField(default=0)),
                ('errors', models.BigIntegerField(default=0)),
                ('input_tokens', models.BigIntegerField(default=0)),
                ('output_tokens', models.BigIntegerField(default=0)),
                ('cached_tokens', models.BigIntegerField(default=0)),
                ('reasoning_tokens', models.BigIntegerField(default=0)),
                ('start', models.BigIntegerField(help_text="Unix time of the bucket's first second (UTC)")),
                ('account_id', models.BigIntegerField(default=0)),
                ('latency_ms', models.BigIntegerField(default=0, help_text="Sum over the bucket's requests")),
                ('retried', models.BigIntegerField(default=0)),
                ('ttfb_0', models.BigIntegerField(default=0)),
                ('ttfb_1', models.BigIntegerField(default=0)),
                ('ttfb_2', models.BigIntegerField(default=0)),
                ('ttfb_3', models.BigIntegerField(default=0)),
                ('ttfb_4', models.BigIntegerField(default=0)),
                ('ttfb_5', models.BigIntegerField(default=0)),
                ('ttfb_6', models.BigIntegerField(default=0)),
                ('ttfb_7', models.BigIntegerField(default=0)),
                ('ttfb_8', models.BigIntegerField(default=0)),
                ('ttfb_9', models.BigIntegerField(default=0)),
                ('ttfb_10', models.BigIntegerField(default=0)),
                ('ttfb_11', models.BigIntegerField(default=0)),
                ('ttfb_12', models.BigIntegerField(default=0)),
                ('ttfb_13', models.BigIntegerField(default=0)),
                ('ttfb_14', models.BigIntegerField(default=0)),
                ('ttfb_15', models.BigIntegerField(default=0)),
                ('ttfb_16', models.BigIntegerField(default=0)),
                ('ttfb_17', models.BigIntegerField(default=0)),
                ('ttfb_18', models.BigIntegerField(default=0)),
                ('ttfb_19', models.BigIntegerField(default=0)),
                ('ttfb_20', models.BigIntegerField(default=0)),
                ('ttfb_21', models.BigIntegerField(default=0)),
                ('ttfb_22', models.BigIntegerField(default=0)),
                ('ttfb_23', models.BigIntegerField(default=0)),
            ],
            options={
                'indexes': [models.Index(fields=['account_id', 'start'], name='dashboard_u_account_fd8ebb_idx')],
                'constraints': [models.UniqueConstraint(fields=('start', 'account_id'), name='usage_day_per_account')],
            },
        ),
        migrations.CreateModel(
            name='UsageHour',
            fields=[
                ('id', models.BigAutoField(auto_created=True, primary_key=True, serialize=False, verbose_name='ID')),
                ('requests', models.BigIntegerField(default=0)),
                ('errors', models.BigIntegerField(default=0)),
                ('input_tokens', models.BigIntegerField(default=0)),
                ('output_tokens', models.BigIntegerField(default=0)),
                ('cached_tokens', models.BigIntegerField(default=0)),
                ('reasoning_tokens', models.BigIntegerField(default=0)),
                ('start', models.BigIntegerField(help_text="Unix time of the bucket's first second (UTC)")),
                ('account_id', models.BigIntegerField(default=0)),
                ('latency_ms', models.BigIntegerField(default=0, help_text="Sum over the bucket's requests")),
                ('retried', models.BigIntegerField(default=0)),
                ('ttfb_0', models.BigIntegerField(default=0)),
                ('ttfb_1', models.BigIntegerField(default=0)),
                ('ttfb_2', models.BigIntegerField(default=0)),
                ('ttfb_3', models.BigIntegerField(default=0)),
                ('ttfb_4', models.BigIntegerField(default=0)),
                ('ttfb_5', models.BigIntegerField(default=0)),
                ('ttfb_6', models.BigIntegerField(default=0)),
                ('ttfb_7', models.BigIntegerField(default=0)),
                ('ttfb_8', models.BigIntegerField(default=0)),
                ('ttfb_9', models.BigIntegerField(default=0)),
                ('ttfb_10', models.BigIntegerField(default=0)),
                ('ttfb_11', models.BigIntegerField(default=0)),
                ('ttfb_12', models.BigIntegerField(default=0)),
                ('ttfb_13', models.BigIntegerField(default=0)),
                ('ttfb_14', models.BigIntegerField(default=0)),
                ('ttfb_15', models.BigIntegerField(default=0)),
                ('ttfb_16', models.BigIntegerField(default=0)),
                ('ttfb_17', models.BigIntegerField(default=0)),
                ('ttfb_18', models.BigIntegerField(default=0)),
                ('ttfb_19', models.BigIntegerField(default=0)),
                ('ttfb_20', models.BigIntegerField(default=0)),
                ('ttfb_21', models.BigIntegerField(default=0)),
                ('ttfb_22', models.BigIntegerField(default=0)),
                ('ttfb_23', models.BigIntegerField(default=0)),
            ],
            options={
                'indexes': [models.Index(fields=['account_id', 'start'], name='dashboard_u_account_3129b0_idx')],
                'constraints': [models.UniqueConstraint(fields=('start', 'account_id'), name='usage_hour_per_account')],
            },
        ),
        migrations.RunPython(backfill, migrations.RunPython.noop),
    ]
