"""A pool-disabled account's next scheduled test (accounts.retests)."""

from django.db import migrations, models


class Migration(migrations.Migration):

    dependencies = [
        ('accounts', '0010_rules_upstream_unavailable'),
    ]

    operations = [
        migrations.AddField(
            model_name='account',
            name='retest_at',
            field=models.DateTimeField(blank=True, editable=False, null=True, verbose_name='next test'),
        ),
        migrations.AddField(
            model_name='account',
            name='retest_interval',
            field=models.FloatField(blank=True, editable=False, help_text='Seconds', null=True),
        ),
    ]
