"""Account test results (gateway.background.prober), the error classes as one vocabulary
(accounts.outcomes), and the PostgreSQL pick function rebuilt from its written spec
(accounts.pickorder; the same function as 0003's, now generated from the spec)."""

from django.db import migrations, models

# error_class as it was written before accounts.outcomes: gateway error class names and words.
OLD_CLASSES = {
    "InvalidRequest": "invalid_request", "NestingTooDeep": "invalid_request",
    "AuthenticationFailed": "authentication_failed", "PermissionDenied": "permission_denied",
    "ModelNotFound": "model_not_found", "PayloadTooLarge": "payload_too_large",
    "RateLimited": "rate_limited", "NoAccounts": "no_accounts",
    "UpstreamUnavailable": "upstream_unreachable", "UpstreamFailed": "upstream_error",
    "GatewayError": "internal_error", "cancelled": "client_disconnected",
}
KEPT = {"", "upstream_disconnected", "upstream_timeout", "upstream_truncated", "malformed_upstream",
        "client_disconnected", "internal_error"}


def classes_forward(apps, schema_editor):  # type: ignore[no-untyped-def]
    log = apps.get_model("accounts", "RequestLog")
    for old, new in OLD_CLASSES.items():
        log.objects.filter(error_class=old).update(error_class=new)
    # Whatever else was stored is the type of an error the upstream reported in its stream.
    log.objects.exclude(error_class__in=KEPT | set(OLD_CLASSES.values())).update(error_class="upstream_error")


def pick_function(apps, schema_editor):  # type: ignore[no-untyped-def]
    from accounts.pickorder import PG_FUNCTION

    if schema_editor.connection.vendor == "postgresql":
        schema_editor.execute(PG_FUNCTION)


class Migration(migrations.Migration):

    dependencies = [
        ('accounts', '0006_provider_structured_output_adaptive_thinking'),
    ]

    operations = [
        migrations.AddField(
            model_name='account',
            name='probe_ok',
            field=models.BooleanField(editable=False, null=True),
        ),
        migrations.AddField(
            model_name='account',
            name='probe_requested_at',
            field=models.DateTimeField(blank=True, editable=False, null=True),
        ),
        migrations.AddField(
            model_name='account',
            name='probe_summary',
            field=models.CharField(blank=True, default='', editable=False, max_length=300),
        ),
        migrations.AddField(
            model_name='account',
            name='probed_at',
            field=models.DateTimeField(blank=True, editable=False, null=True),
        ),
        migrations.AlterField(
            model_name='requestlog',
            name='error_class',
            field=models.CharField(blank=True, choices=[('', '—'), ('invalid_request', 'invalid request'), ('authentication_failed', 'authentication failed'), ('permission_denied', 'model not allowed for the key'), ('model_not_found', 'model not found'), ('payload_too_large', 'request too large'), ('rate_limited', 'rate limited'), ('no_accounts', 'no usable account'), ('unavailable', 'gateway dependency unavailable'), ('upstream_unreachable', 'upstream unreachable'), ('upstream_error', 'upstream error'), ('upstream_disconnected', 'upstream disconnected'), ('upstream_timeout', 'upstream timed out'), ('upstream_truncated', 'upstream stream truncated'), ('malformed_upstream', 'malformed upstream answer'), ('client_disconnected', 'client disconnected'), ('shutting_down', 'gateway shutting down'), ('internal_error', 'gateway failure')], default='', max_length=60),
        ),
        migrations.RunPython(classes_forward, migrations.RunPython.noop),
        migrations.RunPython(pick_function, migrations.RunPython.noop),
    ]
