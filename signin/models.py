"""Developers signing in to the gateway (Claude Code's gateway protocol): device codes, sign-ins and
their tokens, the managed settings served to each team, and what each developer's client reports.

A developer is a Django user; their own client key (``accounts.ApiKey.user``) is who their bearer
tokens act as. Every secret here (device codes, access and refresh tokens) is stored as its keyed
hash only, like client keys (``accounts.secrets.hash_client_key``).
"""

from __future__ import annotations

import uuid
from typing import Any

from django.conf import settings
from django.db import models
from django.utils import timezone


class DeviceAuthorization(models.Model):
    """One run of the device flow (RFC 8628): a device code the client polls with, a user code the
    developer types on the verification page."""

    PENDING, APPROVED, DENIED, USED = "pending", "approved", "denied", "used"
    STATUS_CHOICES = [(PENDING, "Waiting for the developer"), (APPROVED, "Approved"), (DENIED, "Denied"),
                      (USED, "Tokens issued")]

    device_code_hash = models.CharField(max_length=64, unique=True, editable=False)
    # Eight letters of RFC 8628's base-20 set, without the dash shown to people.
    user_code = models.CharField(max_length=8, db_index=True)
    surface = models.CharField(max_length=100, blank=True, default="",
                               help_text="The client application signing in (claude_code)")
    user_agent = models.CharField(max_length=200, blank=True, default="")
    status = models.CharField(max_length=10, choices=STATUS_CHOICES, default=PENDING)
    user = models.ForeignKey(settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.CASCADE,
                             related_name="device_authorizations")
    interval = models.PositiveIntegerField(default=5, help_text="Seconds the client must wait between polls")
    created_at = models.DateTimeField(default=timezone.now)
    expires_at = models.DateTimeField(db_index=True)
    last_polled_at = models.DateTimeField(null=True, blank=True)
    decided_at = models.DateTimeField(null=True, blank=True)

    def __str__(self) -> str:
        return f"{self.user_code[:4]}-{self.user_code[4:]} ({self.status})"


class SignIn(models.Model):
    """A developer signed in on one client: the grant its access and refresh tokens belong to.
    Revoking it (sign-out, the admin, a revoked token) ends every token of it at once."""

    user = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="sign_ins")
    surface = models.CharField(max_length=100, blank=True, default="")
    user_agent = models.CharField(max_length=200, blank=True, default="")
    created_at = models.DateTimeField(default=timezone.now)
    refreshed_at = models.DateTimeField(null=True, blank=True)
    revoked_at = models.DateTimeField(null=True, blank=True, db_index=True)

    class Meta:
        ordering = ["-created_at"]
        verbose_name = "sign-in"

    def __str__(self) -> str:
        return f"{self.user} on {self.surface or 'a client'} since {self.created_at:%Y-%m-%d %H:%M}"

    @property
    def active(self) -> bool:
        return self.revoked_at is None


class Token(models.Model):
    """An access (bearer) or refresh token of a sign-in, by its hash."""

    ACCESS, REFRESH = "access", "refresh"
    KIND_CHOICES = [(ACCESS, "Access"), (REFRESH, "Refresh")]

    token_hash = models.CharField(max_length=64, unique=True, editable=False)
    kind = models.CharField(max_length=10, choices=KIND_CHOICES)
    sign_in = models.ForeignKey(SignIn, on_delete=models.CASCADE, related_name="tokens")
    created_at = models.DateTimeField(default=timezone.now)
    expires_at = models.DateTimeField(db_index=True)

    def __str__(self) -> str:
        return f"{self.kind} token of {self.sign_in_id}"


class VerificationAttempt(models.Model):
    """A user code entered on the verification page that matched nothing: the per-IP rate limit
    (RFC 8628 §5.1) counts these."""

    ip = models.GenericIPAddressField(unpack_ipv4=True)
    created_at = models.DateTimeField(default=timezone.now)

    class Meta:
        indexes = [models.Index(fields=["ip", "created_at"])]


def _new_uuid() -> str:
    return str(uuid.uuid4())


class ManagedSettings(models.Model):
    """A Claude Code ``managed-settings.json`` served at ``GET /managed/settings``: one per team, and
    one default (no team) for developers whose team has none."""

    team = models.OneToOneField("accounts.Team", null=True, blank=True, on_delete=models.CASCADE,
                                related_name="managed_settings",
                                help_text="Empty: the default, for developers whose team has no settings of its own")
    settings = models.JSONField(default=dict, blank=True, help_text=(
        'The managed-settings.json document, e.g. {"env": {"CLAUDE_CODE_GATEWAY_HINT_HEADERS": "1"}, '
        '"permissions": {"deny": ["WebFetch"]}}. An empty object is an empty policy, not none.'))
    accepted_checksums = models.TextField(blank=True, default="", help_text=(
        "Other checksums (sha256:…) that correctly set-up machines report for this policy, one a line: "
        "a client can change values as it loads them, and a settings file or MDM profile can add env entries"))
    uuid = models.CharField(max_length=36, default=_new_uuid, editable=False)
    checksum = models.CharField(max_length=80, editable=False, default="")
    updated_at = models.DateTimeField(auto_now=True)

    class Meta:
        verbose_name = "managed settings"
        verbose_name_plural = "managed settings"

    def __str__(self) -> str:
        return f"Managed settings for {self.team or 'everyone else (default)'}"

    def save(self, *args: Any, **kwargs: Any) -> None:
        from .checksum import checksum

        self.checksum = checksum(self.settings)
        super().save(*args, **kwargs)
        ManagedSettingsVersion.objects.get_or_create(policy=self, checksum=self.checksum)

    def accepted(self) -> set[str]:
        return {line.strip() for line in self.accepted_checksums.splitlines() if line.strip()}


class ManagedSettingsVersion(models.Model):
    """Every checksum a policy has had: a machine reporting an earlier one runs stale settings."""

    policy = models.ForeignKey(ManagedSettings, on_delete=models.CASCADE, related_name="versions")
    checksum = models.CharField(max_length=80)
    created_at = models.DateTimeField(default=timezone.now)

    class Meta:
        constraints = [models.UniqueConstraint(fields=["policy", "checksum"], name="one_version_per_checksum")]


class ClientReport(models.Model):
    """What a developer's client last said about itself in the hint headers, per client (surface):
    kept up to date by the request-log writer (``signin.hints.add``)."""

    user = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="client_reports")
    surface = models.CharField(max_length=100, blank=True, default="")
    settings_checksum = models.CharField(max_length=80, blank=True, default="")
    request_class = models.CharField(max_length=40, blank=True, default="")
    agent_type = models.CharField(max_length=60, blank=True, default="")
    last_seen = models.DateTimeField()

    class Meta:
        constraints = [models.UniqueConstraint(fields=["user", "surface"], name="one_report_per_client")]
        verbose_name = "developer's client"

    def __str__(self) -> str:
        return f"{self.user} on {self.surface or 'a client'}"


class Identity(models.Model):
    """A developer as the company's identity provider knows them (OpenID Connect's issuer and subject)."""

    user = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="identities")
    issuer = models.CharField(max_length=300)
    subject = models.CharField(max_length=255)
    created_at = models.DateTimeField(default=timezone.now)

    class Meta:
        constraints = [models.UniqueConstraint(fields=["issuer", "subject"], name="one_user_per_identity")]
        verbose_name_plural = "identities"

    def __str__(self) -> str:
        return f"{self.subject} at {self.issuer}"
