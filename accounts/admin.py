"""The Django admin as a real tool for ops: pool state at a glance, secrets masked, actions."""

from __future__ import annotations

import csv
import io
from decimal import Decimal, InvalidOperation
from typing import Any

from django import forms
from django.contrib import admin, messages
from django.db import transaction
from django.db.models import QuerySet
from django.http import HttpRequest, HttpResponse, HttpResponseRedirect
from django.shortcuts import render
from django.urls import path, reverse

from . import pool
from .models import Account, ApiKey, DisableEvent, ModelAlias, Provider, RequestLog
from .probe import probe_account
from .rules import validate_rules
from .secrets import new_client_key


class AccountForm(forms.ModelForm):
    # Write-only: the stored secret is never rendered back into the page.
    secret = forms.CharField(required=False, widget=forms.PasswordInput(render_value=False),
                             help_text="Upstream API key. Leave empty to keep the current one.")

    class Meta:
        model = Account
        fields = ["provider", "label", "secret", "status", "cooldown_until", "balance", "weight"]

    def clean(self) -> dict[str, Any]:
        data = super().clean() or {}
        if not self.instance.pk and not data.get("secret"):
            self.add_error("secret", "A new account needs its API key.")
        return data

    def save(self, commit: bool = True) -> Account:
        account: Account = super().save(commit=False)
        if self.cleaned_data.get("secret"):
            account.set_secret(self.cleaned_data["secret"])
        if commit:
            account.save()
        return account


class AccountInline(admin.TabularInline):
    model = Account
    form = AccountForm
    fields = ["label", "secret", "key_hint", "status", "balance", "weight", "last_used_at"]
    readonly_fields = ["key_hint", "last_used_at"]
    extra = 0
    show_change_link = True


class ProviderForm(forms.ModelForm):
    base_url = forms.URLField(max_length=500, assume_scheme="https",
                              help_text="Version root, e.g. https://api.openai.com/v1")

    class Meta:
        model = Provider
        fields = "__all__"

    def clean_rules(self) -> Any:
        rules = self.cleaned_data.get("rules")
        problems = validate_rules(rules)
        if problems:
            raise forms.ValidationError(problems)
        return rules


@admin.register(Provider)
class ProviderAdmin(admin.ModelAdmin):
    form = ProviderForm
    list_display = ["name", "protocol", "base_url", "selection", "enabled", "account_count"]
    list_filter = ["protocol", "enabled", "selection"]
    search_fields = ["name", "base_url"]
    inlines = [AccountInline]

    @admin.display(description="accounts")
    def account_count(self, obj: Provider) -> int:
        return obj.accounts.count()


class BulkImportForm(forms.Form):
    provider = forms.ModelChoiceField(queryset=Provider.objects.all())
    keys = forms.CharField(required=False, widget=forms.Textarea(attrs={"rows": 12}),
                           help_text="One key per line, or CSV lines: label,key,balance")
    file = forms.FileField(required=False, help_text="A text or CSV file in the same format")
    label_prefix = forms.CharField(initial="acct", help_text="Used for lines without a label")


def parse_import(text: str, prefix: str) -> list[tuple[str, str, Decimal | None]]:
    """Lines of ``key`` or ``label,key[,balance]`` → (label, key, balance); blanks and # comments skipped."""

    rows: list[tuple[str, str, Decimal | None]] = []
    for n, fields in enumerate(csv.reader(io.StringIO(text)), start=1):
        fields = [f.strip() for f in fields]
        if not fields or not fields[0] or fields[0].startswith("#"):
            continue
        if len(fields) == 1:
            rows.append((f"{prefix}-{n}", fields[0], None))
            continue
        if fields[0].lower() == "label" and fields[1].lower() == "key":
            continue  # header line
        balance = None
        if len(fields) > 2 and fields[2]:
            try:
                balance = Decimal(fields[2])
            except InvalidOperation as exc:
                raise ValueError(f"line {n}: balance '{fields[2]}' is not a number") from exc
        rows.append((fields[0], fields[1], balance))
    return rows


@admin.register(Account)
class AccountAdmin(admin.ModelAdmin):
    form = AccountForm
    list_display = ["__str__", "key_hint", "status", "cooldown_until", "balance", "last_used_at",
                    "requests", "errors", "input_tokens", "output_tokens"]
    list_filter = ["status", "provider", "disabled_by_hand"]
    search_fields = ["label", "provider__name", "key_hint"]
    list_select_related = ["provider"]
    readonly_fields = ["key_hint", "last_used_at", "requests", "errors", "input_tokens", "output_tokens",
                       "cached_tokens", "reasoning_tokens", "disabled_by_hand"]
    actions = ["enable_accounts", "disable_accounts", "test_accounts"]
    change_list_template = "admin/accounts/account/change_list.html"

    def get_fields(self, request: HttpRequest, obj: Any = None) -> list[str]:
        return ["provider", "label", "secret", "key_hint", "status", "cooldown_until", "balance", "weight",
                "disabled_by_hand", "last_used_at", "requests", "errors", "input_tokens", "output_tokens",
                "cached_tokens", "reasoning_tokens"]

    @admin.action(description="Enable selected accounts")
    def enable_accounts(self, request: HttpRequest, queryset: QuerySet[Account]) -> None:
        for account in queryset:
            pool.enable_account(account.pk, how="hand")
        self.message_user(request, f"Enabled {queryset.count()} account(s).")

    @admin.action(description="Disable selected accounts")
    def disable_accounts(self, request: HttpRequest, queryset: QuerySet[Account]) -> None:
        for account in queryset:
            pool.disable_by_hand(account.pk)
        self.message_user(request, f"Disabled {queryset.count()} account(s).")

    @admin.action(description="Test selected accounts (send a minimal request)")
    def test_accounts(self, request: HttpRequest, queryset: QuerySet[Account]) -> None:
        for account in queryset.select_related("provider")[:20]:
            outcome = probe_account(account)
            level = messages.SUCCESS if outcome.ok else messages.ERROR
            self.message_user(request, f"{account}: {outcome.summary}", level)

    def get_urls(self) -> list[Any]:
        return [path("import/", self.admin_site.admin_view(self.import_view), name="accounts_account_import"),
                *super().get_urls()]

    def import_view(self, request: HttpRequest) -> HttpResponse:
        form = BulkImportForm(request.POST or None, request.FILES or None)
        if request.method == "POST" and form.is_valid():
            text = form.cleaned_data["keys"] or ""
            if form.cleaned_data["file"]:
                text += "\n" + form.cleaned_data["file"].read().decode("utf-8", "replace")
            try:
                rows = parse_import(text, form.cleaned_data["label_prefix"])
            except ValueError as exc:
                form.add_error("keys", str(exc))
            else:
                created, updated = import_accounts(form.cleaned_data["provider"], rows)
                self.message_user(request, f"Imported {created} new and updated {updated} account(s).")
                return HttpResponseRedirect(reverse("admin:accounts_account_changelist"))
        context = {**self.admin_site.each_context(request), "form": form, "title": "Import accounts",
                   "opts": self.model._meta}
        return render(request, "admin/accounts/account/import.html", context)


@transaction.atomic
def import_accounts(provider: Provider, rows: list[tuple[str, str, Decimal | None]]) -> tuple[int, int]:
    existing = {a.label: a for a in Account.objects.filter(provider=provider)}
    new: list[Account] = []
    updated = 0
    for label, key, balance in rows:
        account = existing.get(label)
        if account is None:
            account = Account(provider=provider, label=label, balance=balance)
            account.set_secret(key)
            new.append(account)
            existing[label] = account
        else:
            account.set_secret(key)
            if balance is not None:
                account.balance = balance
            account.save()
            updated += 1
    Account.objects.bulk_create(new, batch_size=500)
    return len(new), updated


class ApiKeyForm(forms.ModelForm):
    class Meta:
        model = ApiKey
        fields = ["name", "allowed_models", "active", "rate_limit_per_minute", "daily_token_limit"]


@admin.register(ApiKey)
class ApiKeyAdmin(admin.ModelAdmin):
    form = ApiKeyForm
    list_display = ["name", "key_hint", "active", "requests", "errors", "input_tokens", "output_tokens", "created_at"]
    list_filter = ["active"]
    search_fields = ["name", "key_hint"]
    readonly_fields = ["key_hint", "requests", "errors", "input_tokens", "output_tokens", "created_at"]

    def save_model(self, request: HttpRequest, obj: ApiKey, form: Any, change: bool) -> None:
        if not change:
            plain = new_client_key()
            obj.set_key(plain)
            # Shown once: only the hash is stored from here on.
            self.message_user(request, f"New key for '{obj.name}': {plain} — copy it now, it will not be shown again.",
                              messages.WARNING)
        super().save_model(request, obj, form, change)


@admin.register(ModelAlias)
class ModelAliasAdmin(admin.ModelAdmin):
    list_display = ["name", "provider", "upstream_model", "priority"]
    list_filter = ["provider"]
    search_fields = ["name", "upstream_model"]
    list_select_related = ["provider"]


@admin.register(DisableEvent)
class DisableEventAdmin(admin.ModelAdmin):
    list_display = ["account", "created_at", "tier", "rule", "status_code", "cooldown_until", "ended_at", "ended_by"]
    list_filter = ["tier", "ended_by", "account__provider"]
    search_fields = ["account__label", "excerpt"]
    list_select_related = ["account", "account__provider"]
    readonly_fields = [f.name for f in DisableEvent._meta.fields]

    def has_add_permission(self, request: HttpRequest) -> bool:
        return False


@admin.register(RequestLog)
class RequestLogAdmin(admin.ModelAdmin):
    list_display = ["created_at", "request_id", "client_key_name", "client_protocol", "upstream_protocol",
                    "model_requested", "account", "status", "attempt_count", "latency_ms", "input_tokens",
                    "output_tokens"]
    list_filter = ["status", "client_protocol", "upstream_protocol", "stream"]
    search_fields = ["request_id", "model_requested", "client_key_name"]
    list_select_related = ["account", "account__provider"]
    date_hierarchy = "created_at"
    show_full_result_count = False

    def has_add_permission(self, request: HttpRequest) -> bool:
        return False

    def has_change_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return False
