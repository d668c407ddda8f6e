"""Usage buckets count the uses a request moved on from (dashboard.rollup: failed attempts count against their account)."""

from django.db import migrations, models


class Migration(migrations.Migration):

    dependencies = [
        ('dashboard', '0001_initial'),
    ]

    operations = [
        migrations.AddField(
            model_name='usagebucket',
            name='retried',
            field=models.BigIntegerField(default=0),
        ),
    ]
