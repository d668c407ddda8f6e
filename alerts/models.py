"""Webhooks ops configure in the admin, and the outbox of alerts to deliver to them.

An alert is one :class:`Delivery` row per webhook, written in the transaction of the event it
reports (an account's disable event) or, for events met on the request path (a budget), by the
gateway's alert worker a second later. ``(webhook, event_key)`` is unique: the same event never
makes a second delivery, on any number of processes.
"""

from __future__ import annotations

from django.db import models
from django.utils import timezone


class Webhook(models.Model):
    JSON, SLACK = "json", "slack"
    FORMATS = [(JSON, "JSON (the alert's fields)"), (SLACK, 'Slack-compatible ({"text": …})')]

    name = models.CharField(max_length=100, unique=True)
    url = models.URLField(max_length=500, help_text="Kept out of logs and delivery errors: a Slack URL is a secret.")
    format = models.CharField(max_length=10, choices=FORMATS, default=JSON)
    enabled = models.BooleanField(default=True)
    on_account_disabled = models.BooleanField("account disabled", default=True)
    on_provider_low = models.BooleanField("provider under its minimum of usable accounts", default=True)
    min_active_accounts = models.PositiveIntegerField(
        default=1, help_text="Alert when a disable leaves a provider with fewer usable (active or cooling down) "
                             "accounts than this.")
    on_budget = models.BooleanField("client key budget reached", default=True)

    class Meta:
        ordering = ["name"]

    def __str__(self) -> str:
        return self.name


class Delivery(models.Model):
    PENDING, SENT, FAILED = "pending", "sent", "failed"
    STATUSES = [(PENDING, "Pending"), (SENT, "Sent"), (FAILED, "Gave up")]

    webhook = models.ForeignKey(Webhook, on_delete=models.CASCADE, related_name="deliveries")
    event = models.CharField(max_length=40)  # account_disabled | provider_low | budget_reached
    event_key = models.CharField(max_length=200)  # the same event, the same key: delivered once
    payload = models.JSONField()
    status = models.CharField(max_length=10, choices=STATUSES, default=PENDING, db_index=True)
    attempts = models.PositiveIntegerField(default=0)
    next_attempt_at = models.DateTimeField(default=timezone.now)
    last_error = models.CharField(max_length=200, blank=True, default="")
    created_at = models.DateTimeField(default=timezone.now)
    sent_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        ordering = ["-created_at"]
        verbose_name_plural = "deliveries"
        constraints = [models.UniqueConstraint(fields=["webhook", "event_key"], name="alert_once_per_webhook")]

    def __str__(self) -> str:
        return f"{self.event} to {self.webhook} ({self.status})"
