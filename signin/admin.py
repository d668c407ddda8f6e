"""Ops' view of developer sign-ins: who is signed in on which client (revoke), the managed settings
per team, and each developer's client as its hint headers describe it (stale or unknown settings
flagged)."""

from __future__ import annotations

from typing import Any

from django import forms
from django.contrib import admin, messages
from django.db.models import QuerySet
from django.http import HttpRequest
from django.utils.html import format_html

from . import flow, managed
from .hints import shown_checksum
from .models import ClientReport, DeviceAuthorization, Identity, ManagedSettings, SignIn


@admin.register(SignIn)
class SignInAdmin(admin.ModelAdmin[SignIn]):
    list_display = ["user", "surface", "user_agent", "created_at", "refreshed_at", "state"]
    list_filter = ["surface", ("revoked_at", admin.EmptyFieldListFilter)]
    search_fields = ["user__username", "user__email", "surface"]
    list_select_related = ["user"]
    readonly_fields = ["user", "surface", "user_agent", "created_at", "refreshed_at", "revoked_at"]
    actions = ["revoke"]

    def has_add_permission(self, request: HttpRequest) -> bool:
        return False

    @admin.display(description="State")
    def state(self, obj: SignIn) -> str:
        return "revoked" if obj.revoked_at else "active"

    @admin.action(description="Revoke: sign these clients out at their next request")
    def revoke(self, request: HttpRequest, queryset: QuerySet[SignIn]) -> None:
        ended = flow.end_sign_ins(queryset)
        self.message_user(request, f"{ended} sign-in(s) revoked.", messages.SUCCESS)


@admin.register(DeviceAuthorization)
class DeviceAuthorizationAdmin(admin.ModelAdmin[DeviceAuthorization]):
    list_display = ["__str__", "surface", "user", "status", "created_at", "expires_at"]
    list_filter = ["status", "surface"]
    search_fields = ["user__username", "user_code"]
    list_select_related = ["user"]
    readonly_fields = [f.name for f in DeviceAuthorization._meta.fields if f.name != "id"]

    def has_add_permission(self, request: HttpRequest) -> bool:
        return False


@admin.register(Identity)
class IdentityAdmin(admin.ModelAdmin[Identity]):
    list_display = ["subject", "issuer", "user", "created_at"]
    search_fields = ["subject", "user__username", "user__email"]
    list_select_related = ["user"]


class ManagedSettingsForm(forms.ModelForm[ManagedSettings]):
    class Meta:
        model = ManagedSettings
        fields = ["team", "settings", "accepted_checksums"]

    def clean_settings(self) -> Any:
        value = self.cleaned_data.get("settings")
        if not isinstance(value, dict):
            raise forms.ValidationError("The managed settings are a JSON object ({} for an empty policy)")
        return value

    def clean_accepted_checksums(self) -> str:
        text: str = self.cleaned_data.get("accepted_checksums") or ""
        bad = [line for line in text.split() if not line.startswith("sha256:")]
        if bad:
            raise forms.ValidationError(f"Each line is a checksum as clients send it (sha256:…), not {bad[0]!r}")
        return text


@admin.register(ManagedSettings)
class ManagedSettingsAdmin(admin.ModelAdmin[ManagedSettings]):
    form = ManagedSettingsForm
    list_display = ["__str__", "short_checksum", "updated_at"]
    list_select_related = ["team"]
    readonly_fields = ["uuid", "checksum", "updated_at", "versions"]

    @admin.display(description="Checksum")
    def short_checksum(self, obj: ManagedSettings) -> str:
        return shown_checksum(obj.checksum)

    @admin.display(description="Earlier checksums (machines reporting them are stale)")
    def versions(self, obj: ManagedSettings) -> str:
        earlier = obj.versions.exclude(checksum=obj.checksum).order_by("-created_at")
        return ", ".join(f"{shown_checksum(v.checksum)} ({v.created_at:%Y-%m-%d %H:%M})" for v in earlier) or "none"


@admin.register(ClientReport)
class ClientReportAdmin(admin.ModelAdmin[ClientReport]):
    """Each developer's client as its hint headers last described it: the managed settings it runs
    under against those the developer's team gets (current, accepted, stale, unknown, missing)."""

    list_display = ["user", "team", "surface", "settings", "checksum", "request_class", "agent_type", "last_seen"]
    list_filter = ["surface"]
    search_fields = ["user__username", "user__email"]
    list_select_related = ["user", "user__client_key__team"]
    readonly_fields = ["user", "surface", "checksum", "request_class", "agent_type", "last_seen"]
    exclude = ["settings_checksum"]

    def has_add_permission(self, request: HttpRequest) -> bool:
        return False

    @admin.display(description="Team")
    def team(self, obj: ClientReport) -> str:
        key = getattr(obj.user, "client_key", None)
        return str(key.team) if key is not None and key.team is not None else "—"

    @admin.display(description="Managed settings")
    def settings(self, obj: ClientReport) -> str:
        key = getattr(obj.user, "client_key", None)
        verdict = managed.verdict(obj.settings_checksum, key.team_id if key is not None else None)
        flagged = verdict in (managed.STALE, managed.UNKNOWN, managed.MISSING)
        return format_html("<strong>⚠ {}</strong>", verdict) if flagged else verdict

    @admin.display(description="Checksum reported")
    def checksum(self, obj: ClientReport) -> str:
        return shown_checksum(obj.settings_checksum) or "—"
