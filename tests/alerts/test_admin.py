"""Webhooks and deliveries in the admin, as ops use them."""

from __future__ import annotations

import pytest
from django.contrib.auth.models import Permission, User
from django.test import Client

from alerts.events import budget_reached, enqueue
from alerts.models import Delivery, Webhook

pytestmark = pytest.mark.django_db

SLACK_URL = "https://hooks.slack.example/services/T000/B000/very-secret-path"


@pytest.fixture
def staff(client: Client) -> Client:
    user = User.objects.create(username="ops", is_staff=True)
    user.user_permissions.set(Permission.objects.filter(content_type__app_label="alerts"))
    client.force_login(user)
    return client


def test_ops_add_a_webhook_in_the_admin(staff: Client) -> None:
    answer = staff.post("/admin/alerts/webhook/add/", {
        "name": "chat", "url": SLACK_URL, "format": "slack", "enabled": "on", "on_account_disabled": "on",
        "min_active_accounts": "2"})
    assert answer.status_code == 302, answer.content.decode()[:2000]
    hook = Webhook.objects.get()
    assert (hook.format, hook.on_account_disabled, hook.on_provider_low, hook.min_active_accounts) == \
        ("slack", True, False, 2)


def test_the_delivery_list_shows_failures_without_the_webhook_url_and_sends_again(staff: Client) -> None:
    hook = Webhook.objects.create(name="chat", url=SLACK_URL)
    enqueue([budget_reached("team", "tokens", 100, "today (UTC)", "s")])
    Delivery.objects.update(status=Delivery.FAILED, attempts=8, last_error="HTTP 500")
    page = staff.get("/admin/alerts/delivery/").content.decode()
    assert "HTTP 500" in page and "chat" in page
    assert "very-secret-path" not in page
    delivery = Delivery.objects.get(webhook=hook)
    staff.post("/admin/alerts/delivery/", {"action": "send_again", "_selected_action": [delivery.pk]})
    delivery.refresh_from_db()
    assert (delivery.status, delivery.attempts) == (Delivery.PENDING, 0)
