"""The Django admin as a real tool for ops: pool state at a glance, secrets masked, actions.

Account status changes only through the pool's own functions (the enable /
disable / test actions), so every change writes its DisableEvent and broadcast;
the change form shows the status but does not edit it.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from django import forms
from django.conf import settings
from django.contrib import admin, messages
from django.contrib.admin.views.main import ChangeList
from django.core.paginator import Paginator
from django.db.models import Count, F, Q, QuerySet, Sum
from django.http import HttpRequest, HttpResponse, HttpResponseRedirect
from django.shortcuts import render
from django.urls import path, reverse
from django.utils import timezone
from django.utils.functional import cached_property
from django.utils.html import format_html, format_html_join
from django.utils.module_loading import import_string

from . import imports, pool
from .adminfields import AmountInput
from .formats import money, short_when
from .headroom import summary as headroom_summary
from .model_metadata import validate_metadata
from .models import PROTOCOL_CHOICES, Account, DisableEvent, ModelAlias, Provider, RequestLog
from .outcomes import Verdict
from .prices import validate_prices
from .redact import redact
from .rules import validate_rules

if TYPE_CHECKING:
    from django.contrib.admin.options import _FieldGroups

# The lists need the width (they fit 1440 px with their usage columns; accounts/static/accounts/admin.css):
# no app sidebar beside them; the breadcrumbs and the index lead everywhere it did.
admin.site.enable_nav_sidebar = False
admin.site.site_header = "LLM gateway administration"
admin.site.site_title = "LLM gateway admin"
admin.site.index_title = "Providers, accounts, client keys and the request log"

INLINE_ACCOUNTS_MAX = 50  # beyond this the provider page links to the account list instead
SHORT_PROTOCOL = {"openai_chat": "chat", "anthropic": "messages", "responses": "responses"}


def clipped(text: str, limit: int) -> str:
    """A list cell's text cut to ``limit`` characters, the whole of it in the tooltip."""

    if not text:
        return "—"
    if len(text) <= limit:
        return text
    return format_html('<span title="{}">{}…</span>', text, text[:limit - 1])


class AccountForm(forms.ModelForm[Account]):
    # Write-only: the stored secret is never rendered back into the page.
    secret = forms.CharField(required=False, widget=forms.PasswordInput(render_value=False),
                             help_text="Upstream API key. Leave empty to keep the current one.")

    class Meta:
        model = Account
        fields = ["provider", "label", "secret", "balance", "weight", "tier", "max_concurrent"]
        widgets = {"balance": AmountInput()}
        help_texts = {"balance": "USD"}

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


class AccountInline(admin.TabularInline[Account, Provider]):
    model = Account
    form = AccountForm
    fields = ["label", "secret", "key_hint", "status", "balance", "weight", "tier", "max_concurrent", "last_used_at"]
    readonly_fields = ["key_hint", "status", "last_used_at"]
    extra = 0
    show_change_link = True


class ProviderForm(forms.ModelForm[Provider]):
    base_url = forms.URLField(max_length=500, assume_scheme="https",
                              help_text="Version root, e.g. https://api.openai.com/v1")

    class Meta:
        model = Provider
        exclude = ["proxy_failed_at"]

    def clean_rules(self) -> Any:
        rules = self.cleaned_data.get("rules")
        problems = validate_rules(rules)
        if problems:
            raise forms.ValidationError(problems)
        return rules

    def clean_prices(self) -> Any:
        prices = self.cleaned_data.get("prices") or {}
        problems = validate_prices(prices)
        if problems:
            raise forms.ValidationError(problems)
        return prices

    def clean_served_models(self) -> Any:
        served = self.cleaned_data.get("served_models") or []
        if not isinstance(served, list) or not all(isinstance(m, str) and m for m in served):
            raise forms.ValidationError("served models must be a list of model names")
        return served

    def clean_headers(self) -> Any:
        headers = self.cleaned_data.get("headers") or {}
        if not isinstance(headers, dict) or not all(isinstance(v, str) for v in headers.values()):
            raise forms.ValidationError('headers must be an object of strings: {"Name": "value"}')
        return headers


@admin.register(Provider)
class ProviderAdmin(admin.ModelAdmin[Provider]):
    form = ProviderForm
    list_display = ["name", "protocol", "base_url", "selection", "enabled", "accounts_link", "active_accounts"]
    list_filter = ["protocol", "enabled", "selection"]
    search_fields = ["name", "base_url"]
    readonly_fields = ["proxy_failed_at"]
    inlines = [AccountInline]

    def get_queryset(self, request: HttpRequest) -> QuerySet[Provider]:
        return super().get_queryset(request).annotate(
            n_accounts=Count("accounts"), n_active=Count("accounts", filter=Q(accounts__status=Account.ACTIVE)))

    def get_inline_instances(self, request: HttpRequest, obj: Any = None) -> list[Any]:
        # Hundreds of inline forms make a page nobody can use and a POST over Django's field limit.
        if obj is not None and obj.accounts.count() > INLINE_ACCOUNTS_MAX:
            return []
        return super().get_inline_instances(request, obj)

    def get_readonly_fields(self, request: HttpRequest, obj: Any = None) -> list[str]:
        return [*self.readonly_fields, "accounts_link"] if obj is not None else list(self.readonly_fields)

    @admin.display(description="accounts", ordering="n_accounts")
    def accounts_link(self, obj: Provider) -> str:
        n = getattr(obj, "n_accounts", None)
        if n is None:
            n = obj.accounts.count()
        url = reverse("admin:accounts_account_changelist") + f"?provider__id__exact={obj.pk}"
        return format_html('<a href="{}">{} account(s)</a>', url, n)

    @admin.display(description="active", ordering="n_active")
    def active_accounts(self, obj: Provider) -> int:
        return getattr(obj, "n_active", 0)


class WriteOnlyTextarea(forms.Textarea):
    """Never renders its value back: a form re-shown with errors must not put keys into the page."""

    def format_value(self, value: Any) -> None:
        return None


class BulkImportForm(forms.Form):
    provider = forms.ModelChoiceField(queryset=Provider.objects.all())
    keys = forms.CharField(required=False, widget=WriteOnlyTextarea(attrs={"rows": 12, "autocomplete": "off"}),
                           help_text="One key per line, or CSV lines: label,key,balance "
                                     "(not shown again if the form has errors: paste again)")
    file = forms.FileField(required=False, help_text="A text or CSV file in the same format")
    label_prefix = forms.SlugField(initial="acct", help_text="Labels for keys given without one: prefix-1, prefix-2 …")
    reset_balances = forms.BooleanField(
        required=False, label="Reset balances",
        help_text="Set existing accounts' balances to the file's; otherwise only new accounts (and those without "
                  "a balance) take the file's, and live balances are kept")

    def clean(self) -> dict[str, Any]:
        data = super().clean() or {}
        if not data.get("keys") and not data.get("file"):
            raise forms.ValidationError("Paste keys or choose a file.")
        return data


def _today_start() -> Any:
    return timezone.localtime().replace(hour=0, minute=0, second=0, microsecond=0)


def used_today(account_ids: list[int]) -> dict[int, tuple[int, int]]:
    """Today's (requests, tokens in + out) per account: from the dashboard's usage buckets
    (``GATEWAY_ACCOUNT_USAGE_SINCE``: every attempt on the account counts), else from the request log."""

    since = _today_start()
    if settings.GATEWAY_ACCOUNT_USAGE_SINCE:
        used: dict[int, tuple[int, int]] = import_string(settings.GATEWAY_ACCOUNT_USAGE_SINCE)(since, account_ids)
        return used
    rows = (RequestLog.objects.filter(account_id__in=account_ids, created_at__gte=since).values("account_id")
            .annotate(n=Count("pk"), t=Sum(F("input_tokens") + F("output_tokens"))).order_by())
    return {row["account_id"]: (row["n"], row["t"] or 0) for row in rows}


class AccountChangeList(ChangeList):
    """Today's usage is read after paging, for the page's accounts only: as a column of the list's query it
    was computed for every row the page skipped as well (PostgreSQL evaluates the select list below an
    OFFSET), 0.57 s for page 5 of 500 accounts over 10M log rows."""

    def get_results(self, request: HttpRequest) -> None:
        super().get_results(request)
        self.result_list = list(self.result_list)
        used = used_today([a.pk for a in self.result_list])
        for account in self.result_list:
            account.today_n, account.today_t = used.get(account.pk, (0, 0))


@admin.register(Account)
class AccountAdmin(admin.ModelAdmin[Account]):
    form = AccountForm
    # Fits 1440 px with the usage columns (today's and all time) in view: cool-down end and next
    # test share a column (only one applies at a time), times drop the year, money is $1,234.57.
    list_display = ["name", "key_hint", "status", "back_in_pool", "money_balance", "last_used",
                    "today_requests", "today_tokens", "requests", "errors", "last_test"]
    list_filter = ["status", "provider", "disabled_by_hand"]
    search_fields = ["label", "provider__name", "key_hint"]
    list_select_related = ["provider"]
    readonly_fields = ["key_hint", "status", "cooldown_until", "retest_at", "disabled_by_hand", "last_used_at",
                       "rate_limits", "requests", "errors", "input_tokens", "output_tokens", "cached_tokens",
                       "cache_write_tokens", "reasoning_tokens", "last_test", "dashboard_link"]
    actions = ["enable_accounts", "disable_accounts", "test_accounts"]
    change_list_template = "admin/accounts/account/change_list.html"

    def get_fields(self, request: HttpRequest, obj: Any = None) -> _FieldGroups:
        if obj is None:
            return ["provider", "label", "secret", "balance", "weight", "tier", "max_concurrent"]
        return ["dashboard_link", "provider", "label", "secret", "key_hint", "balance", "weight", "tier",
                "max_concurrent", "status",
                "cooldown_until", "retest_at", "disabled_by_hand", "last_used_at", "rate_limits", "requests", "errors",
                "input_tokens", "output_tokens", "cached_tokens", "cache_write_tokens", "reasoning_tokens", "last_test"]

    def get_changelist(self, request: HttpRequest, **kwargs: Any) -> type[ChangeList]:
        return AccountChangeList

    @admin.display(description="back in pool", ordering="cooldown_until")
    def back_in_pool(self, obj: Account) -> str:
        if obj.cooldown_until:
            return short_when(obj.cooldown_until)
        if obj.retest_at and obj.status == Account.DISABLED and not obj.disabled_by_hand:
            return f"test {short_when(obj.retest_at)}"
        return "—"

    @admin.display(description="on the dashboard")
    def dashboard_link(self, obj: Account) -> str:
        return format_html('<a href="{}">its usage, events and failed attempts; act on it</a>',
                           reverse("dashboard:account", args=[obj.pk]))

    @admin.display(description="rate limits left")
    def rate_limits(self, obj: Account) -> str:
        return headroom_summary(obj.headroom) or "—"

    @admin.display(description="account", ordering="provider__name")
    def name(self, obj: Account) -> str:
        return clipped(str(obj), 36)

    @admin.display(description="balance", ordering="balance")
    def money_balance(self, obj: Account) -> str:
        return money(obj.balance)

    @admin.display(description="last used", ordering="last_used_at")
    def last_used(self, obj: Account) -> str:
        return short_when(obj.last_used_at)

    @admin.display(description="today: requests")
    def today_requests(self, obj: Account) -> int:
        return getattr(obj, "today_n", 0)

    @admin.display(description="today: tokens")
    def today_tokens(self, obj: Account) -> int:
        return getattr(obj, "today_t", 0)

    @admin.action(description="Enable selected accounts")
    def enable_accounts(self, request: HttpRequest, queryset: QuerySet[Account]) -> None:
        n = sum(pool.enable_account(pk, how="hand") for pk in queryset.values_list("pk", flat=True))
        self.message_user(request, f"Enabled {n} account(s).")

    @admin.action(description="Disable selected accounts")
    def disable_accounts(self, request: HttpRequest, queryset: QuerySet[Account]) -> None:
        n = sum(pool.disable_by_hand(pk) for pk in queryset.values_list("pk", flat=True))
        self.message_user(request, f"Disabled {n} account(s).")

    @admin.display(description="last test")
    def last_test(self, obj: Account) -> str:
        if obj.probe_requested_at is not None:
            return "queued"
        if obj.probed_at is None:
            return "—"
        return clipped(f"{obj.probe_summary} ({short_when(obj.probed_at)})", 40)

    @admin.action(description="Test selected accounts (a minimal request each, in the background)")
    def test_accounts(self, request: HttpRequest, queryset: QuerySet[Account]) -> None:
        # A gateway process runs them (gateway.background.prober): any number, none holding up this page.
        n = queryset.update(probe_requested_at=timezone.now())
        self.message_user(request, f"{n} account(s) queued for a test. A gateway process sends each a minimal "
                                   "request within seconds; the outcome shows in the 'last test' column.",
                          messages.INFO)

    def get_urls(self) -> list[Any]:
        return [path("import/", self.admin_site.admin_view(self.import_view), name="accounts_account_import"),
                *super().get_urls()]

    def import_view(self, request: HttpRequest) -> HttpResponse:
        if not self.has_add_permission(request):
            return HttpResponseRedirect(reverse("admin:accounts_account_changelist"))
        form = BulkImportForm(request.POST or None, request.FILES or None)
        if request.method == "POST" and form.is_valid():
            text = form.cleaned_data["keys"] or ""
            if form.cleaned_data["file"]:
                text += "\n" + form.cleaned_data["file"].read().decode("utf-8-sig", "replace")
            try:
                rows = imports.parse(text)
            except imports.ImportProblem as exc:
                form.add_error("file" if form.cleaned_data["file"] else "keys", str(exc))
            else:
                result = imports.import_accounts(form.cleaned_data["provider"], rows,
                                                 form.cleaned_data["label_prefix"],
                                                 reset_balances=form.cleaned_data["reset_balances"])
                self.message_user(request, f"Imported {result.created} new and updated {result.updated} "
                                           f"account(s); {result.unchanged} unchanged.")
                return HttpResponseRedirect(reverse("admin:accounts_account_changelist"))
        context = {**self.admin_site.each_context(request), "form": form, "title": "Import accounts",
                   "opts": self.model._meta}
        return render(request, "admin/accounts/account/import.html", context)


class ModelAliasForm(forms.ModelForm[ModelAlias]):
    class Meta:
        model = ModelAlias
        fields = ["name", "provider", "upstream_model", "priority", "metadata"]

    def clean_metadata(self) -> Any:
        meta = self.cleaned_data.get("metadata") or {}
        problems = validate_metadata(meta)
        if problems:
            raise forms.ValidationError(problems)
        return meta


@admin.register(ModelAlias)
class ModelAliasAdmin(admin.ModelAdmin[ModelAlias]):
    form = ModelAliasForm
    list_display = ["name", "provider", "upstream_model", "priority"]
    list_filter = ["provider"]
    search_fields = ["name", "upstream_model"]
    list_select_related = ["provider"]


@admin.register(DisableEvent)
class DisableEventAdmin(admin.ModelAdmin[DisableEvent]):
    list_display = ["account", "created_at", "tier", "rule", "status_code", "cooldown_until", "ended_at", "ended_by"]
    list_filter = [("ended_at", admin.EmptyFieldListFilter), "tier", "ended_by", "status_code",
                   "account__provider", "created_at"]
    search_fields = ["account__label", "excerpt"]
    list_select_related = ["account", "account__provider"]
    readonly_fields = [f.name for f in DisableEvent._meta.fields]
    date_hierarchy = "created_at"

    def has_add_permission(self, request: HttpRequest) -> bool:
        return False


def fixed_filter(field: str, title: str, options: list[tuple[str, str]],
                 lookup: Callable[[str], Q] | None = None) -> type[admin.SimpleListFilter]:
    """A list filter whose options are known in advance: Django's own filter for a field without
    choices asks the table for its distinct values on every page, a scan of the whole log."""

    class Fixed(admin.SimpleListFilter):
        parameter_name = field

        def lookups(self, request: HttpRequest, model_admin: Any) -> list[tuple[str, str]]:
            return options

        def queryset(self, request: HttpRequest, queryset: QuerySet[Any]) -> QuerySet[Any]:
            value = self.value()
            if not value:
                return queryset
            return queryset.filter(lookup(value) if lookup else Q(**{field: value}))

    Fixed.title = title
    return Fixed


class AttemptedAccountFilter(admin.SimpleListFilter):
    """``?attempted_account=<id>``: every request the account was attempted in (answered, or failed
    and gone on to another account), through ``RequestAttempt``'s (account, created_at) index. The
    sidebar offers the account chosen only: 500 accounts are no list to pick from (the account's
    admin and dashboard pages link here)."""

    title = "account attempted"
    parameter_name = "attempted_account"

    def lookups(self, request: HttpRequest, model_admin: Any) -> list[tuple[str, str]]:
        value = self.value() or ""
        chosen = Account.objects.select_related("provider").filter(pk=int(value)).first() if value.isdigit() else None
        return [(str(chosen.pk), str(chosen))] if chosen else []

    def queryset(self, request: HttpRequest, queryset: QuerySet[Any]) -> QuerySet[Any]:
        value = self.value()
        if not value:
            return queryset
        return queryset.filter(attempt_rows__account=int(value)) if value.isdigit() else queryset.none()


def _status_class(value: str) -> Q:
    if value in ("2xx", "4xx", "5xx"):
        low = int(value[0]) * 100
        return Q(status__gte=low, status__lt=low + 100)
    return Q(status=int(value)) if value.isdigit() else Q()


class CappedPaginator(Paginator[RequestLog]):
    """Counts at most ``CAP`` rows: the admin counts its list on every page, and a count of a log
    of ten million rows is seconds on either database. Past the cap the list ends at page
    CAP / per page; the dashboard's request log (keyset-paged, filtered by index) reads the rest."""

    CAP = 10_000

    @cached_property
    def count(self) -> int:
        rows = self.object_list
        assert isinstance(rows, QuerySet)  # the admin pages querysets
        return len(rows.order_by()[:self.CAP].values_list("pk", flat=True))


@admin.register(RequestLog)
class RequestLogAdmin(admin.ModelAdmin[RequestLog]):
    # Fits 1440 px with tokens and cost in view: long names are cut (whole in their tooltip), the
    # protocols read as one short column; the request's page has everything in full.
    list_display = ["when", "short_id", "key_name", "protocols", "model_asked", "account_name", "status",
                    "attempt_count", "latency_ms", "input_tokens", "output_tokens", "money_cost"]
    list_filter = [
        fixed_filter("status", "status", [("2xx", "2xx"), ("4xx", "4xx"), ("429", "429"), ("5xx", "5xx")],
                     _status_class),
        fixed_filter("client_protocol", "client protocol", PROTOCOL_CHOICES),
        fixed_filter("upstream_protocol", "upstream protocol", PROTOCOL_CHOICES),
        "stream",
        fixed_filter("transport", "transport", [("http", "HTTP"), ("websocket", "websocket")]),
        "usage_estimated",
        AttemptedAccountFilter,
    ]
    # Exact matches only, each served by an index: a substring search reads the whole log.
    search_help_text = "A request id or a model name, exactly."
    search_fields = ["request_id"]

    @admin.display(description="time", ordering="created_at")
    def when(self, obj: RequestLog) -> str:
        return short_when(obj.created_at)

    @admin.display(description="request id")
    def short_id(self, obj: RequestLog) -> str:
        return clipped(obj.request_id, 12)

    @admin.display(description="client key", ordering="client_key_name")
    def key_name(self, obj: RequestLog) -> str:
        return clipped(obj.client_key_name, 14)

    @admin.display(description="protocols")
    def protocols(self, obj: RequestLog) -> str:
        client = SHORT_PROTOCOL.get(obj.client_protocol, obj.client_protocol)
        upstream = SHORT_PROTOCOL.get(obj.upstream_protocol, obj.upstream_protocol)
        return f"{client} → {upstream}" if upstream else client

    @admin.display(description="model requested", ordering="model_requested")
    def model_asked(self, obj: RequestLog) -> str:
        return clipped(obj.model_requested, 20)

    @admin.display(description="account")
    def account_name(self, obj: RequestLog) -> str:
        return clipped(str(obj.account) if obj.account else "", 20)

    @admin.display(description="cost", ordering="cost")
    def money_cost(self, obj: RequestLog) -> str:
        return money(obj.cost)
    list_select_related = ["account", "account__provider"]
    # No date_hierarchy: its drill-down asks the whole log for its distinct dates on every page.
    paginator = CappedPaginator
    show_full_result_count = False

    def get_search_results(self, request: HttpRequest, queryset: QuerySet[RequestLog],
                           search_term: str) -> tuple[QuerySet[RequestLog], bool]:
        term = search_term.strip()
        if not term:
            return queryset, False
        return queryset.filter(Q(request_id=term) | Q(model_requested=term)), False

    def has_add_permission(self, request: HttpRequest) -> bool:
        return False

    def has_change_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return False

    # The request's page: everything in full, times to the second, money in dollars, the attempts as a table.
    readonly_fields = ["money_cost", "attempt_trace", "trace_link"]
    fieldsets = [
        (None, {"fields": ["created_at", "request_id", "trace_link", "client_key_name", "client_key", "user", "team",
                           "surface", "client_protocol", "upstream_protocol", "transport", "provider", "account",
                           "model_requested", "model_sent", "stream", "status", "error_class", "finish_reason"]}),
        ("Attempts", {"fields": ["attempt_count", "attempt_trace"]}),
        ("Time, tokens and cost", {"fields": ["latency_ms", "ttfb_ms", "input_tokens", "output_tokens", "cached_tokens",
                                              "cache_write_tokens", "cache_write_1h_tokens", "reasoning_tokens",
                                              "usage_estimated", "money_cost", "billing_group"]}),
        ("Session", {"fields": ["affinity", "affinity_reason", "session_signal"]}),
        ("Claude Code", {"fields": ["cc_request_class", "cc_agent_type", "cc_prompt_id", "cc_settings_checksum"],
                         "classes": ["collapse"]}),
        ("Bodies (size-capped, secrets removed)", {"fields": ["request_body", "response_body"],
                                                   "classes": ["collapse"]}),
    ]

    @admin.display(description="on the dashboard")
    def trace_link(self, obj: RequestLog) -> str:
        return format_html('<a href="{}">the request and its attempt trace</a>',
                           reverse("dashboard:request", args=[obj.request_id]))

    @admin.display(description="attempts")
    def attempt_trace(self, obj: RequestLog) -> str:
        return attempts_table(obj.attempts or [], reverse("dashboard:request", args=[obj.request_id]))


def attempts_table(attempts: list[dict[str, Any]], trace_url: str) -> str:
    """The attempt trace as a table (the log keeps it as JSON), with the dashboard's trace a click away."""

    def verdict(value: Any) -> str:
        try:
            return str(Verdict(str(value)).label)
        except ValueError:
            return str(value or "—")

    def account(a: dict[str, Any]) -> str:
        label = a.get("account_label") or "—"
        if not a.get("account_id"):
            return format_html("{}", label)
        return format_html('<a href="{}">{}</a>', reverse("admin:accounts_account_change", args=[a["account_id"]]),
                           label)

    rows = format_html_join("", "<tr><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td></tr>", (
        (i, account(a), a.get("status") or "no answer", verdict(a.get("verdict")), a.get("tier") or "—",
         f"{a['latency_ms']:,} ms" if a.get("latency_ms") is not None else "—",
         redact(a.get("error") or "", limit=300) or "—")
        for i, a in enumerate(attempts, 1)))
    if not attempts:
        rows = format_html('<tr><td colspan="7">{}</td></tr>', "No upstream attempt (refused before dispatch).")
    return format_html(
        '<table class="attempt-trace"><thead><tr><th>#</th><th>Account</th><th>Upstream status</th><th>Verdict</th>'
        "<th>Tier</th><th>Latency</th><th>Error (redacted)</th></tr></thead><tbody>{}</tbody></table>"
        '<p><a href="{}">The attempt trace on the dashboard</a></p>', rows, trace_url)


from . import admin_keys, admin_orgapi  # noqa: E402,F401  - client keys and teams; the admin API's keys and audit trail
