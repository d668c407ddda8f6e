"""The lease of the deployment-wide duties: one gateway process at a time runs them (gateway.background.lease)."""

from django.db import migrations, models


class Migration(migrations.Migration):

    dependencies = [
        ('accounts', '0011_account_retest_schedule'),
    ]

    operations = [
        migrations.CreateModel(
            name='Lease',
            fields=[
                ('name', models.CharField(max_length=50, primary_key=True, serialize=False)),
                ('holder', models.CharField(blank=True, default='', max_length=200)),
                ('expires_at', models.DateTimeField()),
            ],
        ),
    ]
