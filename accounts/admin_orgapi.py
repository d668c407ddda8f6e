"""The admin of the organization admin API: its keys (shown once, stored hashed) and the audit trail
of the changes made with them (read-only)."""

from __future__ import annotations

from typing import Any

from django.contrib import admin
from django.http import HttpRequest, HttpResponse
from django.shortcuts import render
from django.urls import reverse
from django.utils.cache import add_never_cache_headers

from .models import AdminAuditEvent, AdminKey
from .secrets import new_admin_key


@admin.register(AdminKey)
class AdminKeyAdmin(admin.ModelAdmin[AdminKey]):
    list_display = ["name", "key_hint", "scope", "active", "created_at", "last_used_at"]
    list_filter = ["scope", "active"]
    search_fields = ["name", "key_hint"]
    readonly_fields = ["key_hint", "created_at", "last_used_at"]
    fields = ["name", "scope", "active", "key_hint", "created_at", "last_used_at"]

    def save_model(self, request: HttpRequest, obj: AdminKey, form: Any, change: bool) -> None:
        if not change:
            plain = new_admin_key()
            obj.set_key(plain)
            request._new_admin_key = plain  # type: ignore[attr-defined]  # for response_add only
        super().save_model(request, obj, form, change)

    def response_add(self, request: HttpRequest, obj: AdminKey, post_url_continue: str | None = None) -> HttpResponse:
        plain = getattr(request, "_new_admin_key", None)
        if plain is None:
            return super().response_add(request, obj, post_url_continue)
        context = {**self.admin_site.each_context(request), "opts": self.model._meta, "title": "New admin key",
                   "key": plain, "obj": obj, "change_url": reverse("admin:accounts_adminkey_change", args=[obj.pk])}
        response = render(request, "admin/accounts/adminkey/created.html", context)
        add_never_cache_headers(response)
        return response


@admin.register(AdminAuditEvent)
class AdminAuditEventAdmin(admin.ModelAdmin[AdminAuditEvent]):
    list_display = ["created_at", "actor", "action", "target", "before", "after"]
    list_filter = ["action", "created_at"]
    search_fields = ["actor", "target"]
    readonly_fields = ["created_at", "actor", "action", "target", "before", "after"]
    date_hierarchy = "created_at"

    def has_add_permission(self, request: HttpRequest) -> bool:
        return False

    def has_change_permission(self, request: HttpRequest, obj: AdminAuditEvent | None = None) -> bool:
        return False

    def has_delete_permission(self, request: HttpRequest, obj: AdminAuditEvent | None = None) -> bool:
        return False
