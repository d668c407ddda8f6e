"""Webhooks in the admin: add, send a test alert, and see every delivery and why one failed."""

from __future__ import annotations

from django.conf import settings
from django.contrib import admin, messages
from django.db.models import QuerySet
from django.http import HttpRequest
from django.utils import timezone

from .delivery import send_now
from .events import test_alert
from .models import Delivery, Webhook


@admin.register(Webhook)
class WebhookAdmin(admin.ModelAdmin[Webhook]):
    list_display = ["name", "format", "enabled", "on_account_disabled", "on_provider_low", "min_active_accounts",
                    "on_budget"]
    list_filter = ["enabled", "format"]
    search_fields = ["name"]
    actions = ["send_test_alert"]

    @admin.action(description="Send a test alert")
    def send_test_alert(self, request: HttpRequest, queryset: QuerySet[Webhook]) -> None:
        """Posted at once, each webhook's outcome shown here and kept as a delivery (never the URL)."""

        for hook in queryset:
            delivery = send_now(hook, test_alert(hook.name), settings.GATEWAY_ALERT_TIMEOUT)
            if delivery.status == Delivery.SENT:
                self.message_user(request, f"Test alert delivered to {hook.name}.", messages.SUCCESS)
            else:
                self.message_user(request, f"Test alert to {hook.name} failed: {delivery.last_error}.",
                                  messages.ERROR)


@admin.register(Delivery)
class DeliveryAdmin(admin.ModelAdmin[Delivery]):
    list_display = ["created_at", "event", "webhook", "status", "attempts", "next_attempt_at", "last_error"]
    list_filter = ["status", "event", "webhook"]
    list_select_related = ["webhook"]
    search_fields = ["event_key"]
    readonly_fields = ["webhook", "event", "event_key", "payload", "status", "attempts", "next_attempt_at",
                       "last_error", "created_at", "sent_at"]
    actions = ["send_again"]

    def has_add_permission(self, request: HttpRequest) -> bool:
        return False

    @admin.action(description="Send again now")
    def send_again(self, request: HttpRequest, queryset: QuerySet[Delivery]) -> None:
        n = queryset.exclude(status=Delivery.SENT).update(status=Delivery.PENDING, attempts=0,
                                                          next_attempt_at=timezone.now())
        self.message_user(request, f"{n} delivery(ies) queued to be sent again.", messages.SUCCESS)
