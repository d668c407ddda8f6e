"""The admin of client keys and teams.

A key's secret is shown once, when it is made or rotated (with a copy button), and only its hash is
stored. Rotating gives a key a new secret with the same settings; the old one keeps working for the
grace period the operator chooses, then is refused (``gateway.state``). Deactivating many keys at
once is one update and one bump of the configuration's version (``accounts.configversion``): every
gateway process refuses them from their next request. A team carries USD budgets and allowed models
that apply across its keys (``gateway.limits.budgets``, ``gateway.exchange.routing``); its page lists
its keys.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Sequence
from decimal import Decimal
from typing import TYPE_CHECKING, Any

from django import forms
from django.contrib import admin
from django.contrib.admin import helpers
from django.db import transaction
from django.db.models import Count, QuerySet
from django.http import HttpRequest, HttpResponse
from django.template.response import TemplateResponse
from django.urls import reverse
from django.utils.cache import add_never_cache_headers
from django.utils.html import format_html

from . import configversion
from .adminfields import AmountInput, money_column
from .formats import money, short_when, when
from .models import ApiKey, Team
from .secrets import new_client_key

if TYPE_CHECKING:
    from django.contrib.admin.options import _FieldOpts, _FieldsetSpec
    from django.utils.functional import _StrPromise

INLINE_KEYS_MAX = 50  # beyond this a team's page links to its keys in the key list instead
MAX_GRACE_HOURS = 24 * 90


def clean_model_list(value: Any) -> list[str]:
    allowed = value or []
    if not isinstance(allowed, list) or not all(isinstance(m, str) and m for m in allowed):
        raise forms.ValidationError('allowed models must be a list of names or patterns: ["gpt-*"]')
    return allowed


def budgets_text(owner: ApiKey | Team) -> str:
    """``day $5.00 · month $100.00``: an owner's USD budgets in one list cell."""

    return " · ".join(f"{window} {money(limit)}" for window, limit in owner.usd_budget_limits()) or "—"


class ApiKeyForm(forms.ModelForm[ApiKey]):
    class Meta:
        model = ApiKey
        fields = ["name", "team", "allowed_models", "active", "expires_at", "rate_limit_per_minute",
                  "daily_token_limit", "max_concurrent_requests", *ApiKey.USD_BUDGETS, "previous_key_until"]
        widgets = {name: AmountInput() for name in ApiKey.USD_BUDGETS}

    def clean_allowed_models(self) -> Any:
        return clean_model_list(self.cleaned_data.get("allowed_models"))


class RotateForm(forms.Form):
    grace_hours = forms.DecimalField(
        label="Old secret keeps working for (hours)", min_value=Decimal(0), max_value=Decimal(MAX_GRACE_HOURS),
        decimal_places=4, initial=24,
        help_text="Time for the clients to move to the new secret; 0 refuses the old secret at once. "
                  "Fractions are fine (0.25: 15 minutes).")


def reveal(request: HttpRequest, admin_site: admin.AdminSite, revealed: Sequence[tuple[ApiKey, str]],
           title: str) -> HttpResponse:
    """The page that shows new secrets, once: stored nowhere else (not in a message, cookie or session),
    and never cached."""

    context = {**admin_site.each_context(request), "opts": ApiKey._meta, "title": title,
               "revealed": [{"obj": key, "key": plain,
                             "change_url": reverse("admin:accounts_apikey_change", args=[key.pk]),
                             "old_until": when(key.previous_key_until) if key.previous_key_hash else ""}
                            for key, plain in revealed]}
    response = TemplateResponse(request, "admin/accounts/apikey/created.html", context).render()
    add_never_cache_headers(response)
    return response


@admin.register(ApiKey)
class ApiKeyAdmin(admin.ModelAdmin[ApiKey]):
    form = ApiKeyForm
    list_display = ["name", "key_hint", "team", "active", "expires", "last_used", "requests", "errors",
                    "input_tokens", "output_tokens", money_column("usd_budget_day", "day budget"),
                    money_column("usd_budget_month", "month budget"), "created_at"]
    list_filter = ["active", "team", ("expires_at", admin.EmptyFieldListFilter)]
    list_select_related = ["team"]
    search_fields = ["name", "key_hint"]
    readonly_fields = ["key_hint", "last_use", "previous_key_hint", "requests", "errors", "input_tokens",
                       "output_tokens", "created_at"]
    actions = ["rotate_keys", "deactivate_keys", "activate_keys"]

    def get_fieldsets(self, request: HttpRequest, obj: ApiKey | None = None) -> _FieldsetSpec:
        key: tuple[str, ...] = ("name", "team", "allowed_models", "active", "expires_at")
        if obj is not None:
            key = ("name", "key_hint", "team", "allowed_models", "active", "expires_at", "last_use")
        sets: list[tuple[str | _StrPromise | None, _FieldOpts]] = [
            (None, {"fields": key}),
            ("Limits", {"fields": ("rate_limit_per_minute", "daily_token_limit", "max_concurrent_requests",
                                   *ApiKey.USD_BUDGETS)}),
        ]
        if obj is not None and obj.previous_key_hash:
            sets.append(("Rotation", {"fields": ("previous_key_hint", "previous_key_until"),
                                      "description": "The secret this key had before its last rotation."}))
        if obj is not None:
            sets.append(("Usage", {"fields": ("requests", "errors", "input_tokens", "output_tokens", "created_at")}))
        return sets

    @admin.display(description="expires", ordering="expires_at")
    def expires(self, obj: ApiKey) -> str:
        return short_when(obj.expires_at)

    @admin.display(description="last used", ordering="last_used_at")
    def last_used(self, obj: ApiKey) -> str:
        return short_when(obj.last_used_at)

    @admin.display(description="last used")
    def last_use(self, obj: ApiKey) -> str:
        return when(obj.last_used_at) if obj.last_used_at else "never"

    def save_model(self, request: HttpRequest, obj: ApiKey, form: Any, change: bool) -> None:
        if not change:
            plain = new_client_key()
            obj.set_key(plain)
            request._new_client_key = plain  # type: ignore[attr-defined]  # for response_add only
        super().save_model(request, obj, form, change)

    def response_add(self, request: HttpRequest, obj: ApiKey, post_url_continue: str | None = None) -> HttpResponse:
        plain = getattr(request, "_new_client_key", None)
        if plain is None:
            return super().response_add(request, obj, post_url_continue)
        return reveal(request, self.admin_site, [(obj, plain)], "New client key")

    @admin.action(description="Rotate selected keys (new secrets; the old ones work for a while)")
    def rotate_keys(self, request: HttpRequest, queryset: QuerySet[ApiKey]) -> HttpResponse | None:
        form = RotateForm(request.POST if "apply" in request.POST else None)
        if form.is_bound and form.is_valid():
            grace = dt.timedelta(hours=float(form.cleaned_data["grace_hours"]))
            with transaction.atomic():
                revealed = [(key, key.rotate(grace)) for key in queryset.select_for_update(of=("self",)).order_by("name")]
            return reveal(request, self.admin_site, revealed, "New secrets" if len(revealed) > 1 else "New secret")
        context = {**self.admin_site.each_context(request), "opts": self.model._meta, "title": "Rotate client keys",
                   "form": form, "keys": list(queryset.order_by("name")),
                   "action_checkbox_name": helpers.ACTION_CHECKBOX_NAME, "action": "rotate_keys"}
        return TemplateResponse(request, "admin/accounts/apikey/rotate.html", context)

    @admin.action(description="Deactivate selected keys (refused from their next request)")
    def deactivate_keys(self, request: HttpRequest, queryset: QuerySet[ApiKey]) -> None:
        n = set_active(queryset, False)
        self.message_user(request, f"Deactivated {n} key(s): every gateway process refuses them from their "
                                   "next request.")

    @admin.action(description="Activate selected keys")
    def activate_keys(self, request: HttpRequest, queryset: QuerySet[ApiKey]) -> None:
        n = set_active(queryset, True)
        self.message_user(request, f"Activated {n} key(s).")


def set_active(queryset: QuerySet[ApiKey], active: bool) -> int:
    """Switch many keys at once: one UPDATE (no save signals) and its version bump, in one transaction."""

    with transaction.atomic():
        n = queryset.exclude(active=active).update(active=active)
        if n:
            configversion.bump()
    return n


class TeamForm(forms.ModelForm[Team]):
    class Meta:
        model = Team
        fields = ["name", "active", "allowed_models", *Team.USD_BUDGETS, "idp_group"]
        widgets = {name: AmountInput() for name in Team.USD_BUDGETS}
        help_texts = {"allowed_models": "Glob patterns its keys may use, on top of each key's own list (a model "
                                         "must be allowed by both); empty allows all",
                      "active": "Off: every key of the team is refused"}

    def clean_allowed_models(self) -> Any:
        return clean_model_list(self.cleaned_data.get("allowed_models"))


class TeamKeyInline(admin.TabularInline[ApiKey, Team]):
    """The team's keys; each is made (and its secret shown) on the key's own add page."""

    model = ApiKey
    fields = ["name", "key_hint", "active", "expires_at", "last_used_at"]
    readonly_fields = ["name", "key_hint", "last_used_at"]
    extra = 0
    can_delete = False
    show_change_link = True
    verbose_name_plural = "keys in this team"

    def has_add_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return False


@admin.register(Team)
class TeamAdmin(admin.ModelAdmin[Team]):
    form = TeamForm
    list_display = ["name", "active", "keys_link", "models", "budgets", "created_at"]
    list_filter = ["active"]
    search_fields = ["name", "idp_group"]
    inlines = [TeamKeyInline]
    fieldsets = [
        (None, {"fields": ["name", "active", "allowed_models", "idp_group"]}),
        ("USD budgets, spent by all of the team's keys together", {"fields": list(Team.USD_BUDGETS)}),
    ]

    def get_queryset(self, request: HttpRequest) -> QuerySet[Team]:
        return super().get_queryset(request).annotate(n_keys=Count("keys"))

    def get_inline_instances(self, request: HttpRequest, obj: Any = None) -> list[Any]:
        # Hundreds of inline forms make a page nobody can use: the key list, filtered, instead.
        if obj is None or obj.keys.count() > INLINE_KEYS_MAX:
            return []
        return super().get_inline_instances(request, obj)

    def get_readonly_fields(self, request: HttpRequest, obj: Any = None) -> list[str]:
        return ["keys_link"] if obj is not None else []

    def get_fieldsets(self, request: HttpRequest, obj: Any = None) -> _FieldsetSpec:
        sets = list(self.fieldsets or [])
        if obj is not None:
            sets.append(("Keys", {"fields": ["keys_link"]}))
        return sets

    @admin.display(description="keys", ordering="n_keys")
    def keys_link(self, obj: Team) -> str:
        n = getattr(obj, "n_keys", None)
        if n is None:
            n = obj.keys.count()
        url = reverse("admin:accounts_apikey_changelist") + f"?team__id__exact={obj.pk}"
        return format_html('<a href="{}">{} key(s)</a>', url, n)

    @admin.display(description="allowed models")
    def models(self, obj: Team) -> str:
        return ", ".join(obj.allowed_models or []) or "all"

    @admin.display(description="USD budgets")
    def budgets(self, obj: Team) -> str:
        return budgets_text(obj)
