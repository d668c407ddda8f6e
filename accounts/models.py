"""The upstream pool (providers, accounts), client keys, routing and the audit trail."""

from __future__ import annotations

import copy
import datetime as dt
from decimal import Decimal
from typing import Any

from django.conf import settings
from django.core.validators import MinValueValidator
from django.db import models
from django.utils import timezone

from atrest import EncryptedTextField

from . import formats, secrets
from .budgetwindows import TEAM, Subject
from .outcomes import ErrorClass, Verdict
from .pickorder import STRATEGIES, STRATEGY_NAMES
from .rules import DEFAULT_RULES

PROTOCOL_CHOICES = [
    ("openai_chat", "OpenAI Chat Completions"),
    ("anthropic", "Anthropic Messages"),
    ("responses", "OpenAI Responses"),
]


def default_rules() -> list[dict[str, object]]:
    return copy.deepcopy(DEFAULT_RULES)


class Provider(models.Model):
    SELECTION_CHOICES = list(STRATEGY_NAMES.items())

    name = models.SlugField(max_length=100, unique=True)
    protocol = models.CharField(max_length=20, choices=PROTOCOL_CHOICES)
    base_url = models.URLField(max_length=500, help_text="Version root, e.g. https://api.openai.com/v1")
    headers = models.JSONField(default=dict, blank=True, help_text="Extra headers sent upstream")
    served_models = models.JSONField(default=list, blank=True, help_text="Upstream model names this provider serves")
    selection = models.CharField(max_length=10, choices=SELECTION_CHOICES, default="lru",
                                 help_text="How an account is chosen for a request that no session ties to one "
                                           "(README \"Picking an account\")")
    affinity = models.BooleanField(
        "session affinity", default=True,
        help_text="Keep each conversation on the account that served it (where the provider caches its prompt)")
    affinity_ttl = models.FloatField(
        "affinity TTL", default=300.0, validators=[MinValueValidator(1.0)],
        help_text="Seconds a session stays on its account after its last request (the provider's cache "
                  "lifetime; a request that asks for a one-hour cache keeps it an hour)")
    connect_timeout = models.FloatField(default=10.0)
    first_byte_timeout = models.FloatField(default=120.0, help_text="Seconds until the upstream starts answering")
    idle_timeout = models.FloatField(default=120.0, help_text="Longest silence allowed between stream chunks")
    proxy_url = models.CharField(max_length=500, blank=True, default="")
    proxy_failed_at = models.DateTimeField(null=True, blank=True)
    accepts_thinking = models.BooleanField(default=True)
    accepts_cache_control = models.BooleanField(default=True)
    cache_breakpoints = models.BooleanField(
        default=True, help_text="Anthropic upstreams: mark the prompt's stable prefix for caching (cache_control on the "
                                "last tool, the system prompt and the conversation so far) in requests translated from "
                                "Chat or Responses, which OpenAI caches without being asked")
    accepts_structured_output = models.BooleanField(
        default=True, help_text="Anthropic upstreams: takes output_config.format (structured output); off drops it")
    accepts_adaptive_thinking = models.BooleanField(
        default=True, help_text="Anthropic upstreams: takes thinking type adaptive with an effort; off sends older "
                                "models a thinking budget instead")
    accepts_request_tags = models.BooleanField(
        default=True, help_text="Anthropic upstreams: takes request tags (top-level tags, beta request-tags-2026-08-21); "
                                "off leaves both out (Bedrock, Vertex and many compatible servers refuse them)")
    anthropic_version = models.CharField(max_length=20, default="2023-06-01")
    auto_prefix = models.BooleanField(
        default=False, help_text="The upstream wants vendor-prefixed names (anthropic/claude-…), as OpenRouter does")
    prices = models.JSONField(
        default=dict, blank=True,
        help_text='USD per million tokens by upstream model: {"gpt-5-mini": {"input": 0.25, "output": 2, '
                  '"cache_read": 0.025}}; cache_write and cache_write_1h (Anthropic) too. A cache rate left out is '
                  'a multiple of the input rate: read 0.1×, write 1.25×, 1-hour write 2×')
    rules = models.JSONField(default=default_rules, blank=True,
                             help_text="Error classification rules, first match wins")
    enabled = models.BooleanField(default=True)
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        constraints = [models.CheckConstraint(condition=models.Q(selection__in=STRATEGIES),
                                              name="provider_selection_known")]

    def __str__(self) -> str:
        return self.name


class UsageCounters(models.Model):
    """Running totals the request-log writer adds to (accounts, client keys, dashboard buckets)."""

    requests = models.BigIntegerField(default=0)
    errors = models.BigIntegerField(default=0)
    input_tokens = models.BigIntegerField(default=0)
    output_tokens = models.BigIntegerField(default=0)
    cached_tokens = models.BigIntegerField(default=0)  # input read from the provider's prompt cache
    cache_write_tokens = models.BigIntegerField(default=0)  # input written to it
    reasoning_tokens = models.BigIntegerField(default=0)

    class Meta:
        abstract = True


class Account(UsageCounters):
    ACTIVE, COOLING, DISABLED = "active", "cooling", "disabled"
    STATUS_CHOICES = [(ACTIVE, "Active"), (COOLING, "Cooling down"), (DISABLED, "Disabled")]

    provider = models.ForeignKey(Provider, on_delete=models.CASCADE, related_name="accounts")
    label = models.CharField(max_length=100)
    secret_encrypted = models.TextField(editable=False)
    key_hint = models.CharField(max_length=20, editable=False, default="")
    status = models.CharField(max_length=10, choices=STATUS_CHOICES, default=ACTIVE)
    cooldown_until = models.DateTimeField(null=True, blank=True)
    disabled_by_hand = models.BooleanField(default=False)
    # Eight decimal places: one request on a cheap model costs well under a hundredth of a cent.
    balance = models.DecimalField(max_digits=20, decimal_places=8, null=True, blank=True)
    weight = models.PositiveIntegerField(default=1, help_text="Share of new sessions under the weighted selection "
                                                              "(0: only when no other account can take them)")
    tier = models.PositiveSmallIntegerField(default=1, help_text="Priority tiers: tier 1 is filled first, then 2, …")
    max_concurrent = models.PositiveIntegerField(
        "concurrency cap", null=True, blank=True,
        help_text="Requests in flight on this account at once, per gateway process; empty: no cap")
    # The weighted selection's virtual time (accounts.pickorder): advanced by 1/weight at each pick.
    pick_due = models.FloatField(null=True, blank=True, editable=False)
    # The rate limits the provider last reported for this account (gateway.exchange.headroom), written
    # every few seconds by the process that saw them: for the dashboard and /metrics.
    headroom = models.JSONField(null=True, blank=True, editable=False)
    last_used_at = models.DateTimeField(null=True, blank=True)
    created_at = models.DateTimeField(auto_now_add=True)
    # A test asked for in the admin, run in the background by a gateway process (gateway.background.prober).
    probe_requested_at = models.DateTimeField(null=True, blank=True, editable=False)
    probed_at = models.DateTimeField(null=True, blank=True, editable=False)
    probe_ok = models.BooleanField(null=True, editable=False)
    probe_summary = models.CharField(max_length=300, blank=True, default="", editable=False)
    # A pool-disabled account's next scheduled test (its rule's retest_after), queued by the pool's
    # leader (gateway.background.poolhealth) when due; the interval doubles after each test that fails.
    retest_at = models.DateTimeField("next test", null=True, blank=True, editable=False)
    retest_interval = models.FloatField(null=True, blank=True, editable=False, help_text="Seconds")

    class Meta:
        constraints = [models.UniqueConstraint(fields=["provider", "label"], name="account_label_per_provider")]
        indexes = [models.Index(fields=["provider", "status", "last_used_at"])]

    def __str__(self) -> str:
        return f"{self.provider.name}/{self.label}"

    def set_secret(self, plain: str) -> None:
        self.secret_encrypted = secrets.encrypt(plain)
        self.key_hint = secrets.mask(plain)

    def get_secret(self) -> str:
        return secrets.decrypt(self.secret_encrypted)


class UsdBudgets(models.Model):
    """USD budgets over rolling windows, shared by client keys and teams."""

    # USD this key (or team, across its keys) may spend in a rolling window (the last 5 hours, 24 hours, 7 days, 30 days, each up to
    # one slice longer: accounts.budgetwindows), across gateway processes; priced by the providers' price
    # tables. Empty: no budget.
    usd_budget_5h = models.DecimalField(
        "USD budget per 5 hours", max_digits=14, decimal_places=6, null=True, blank=True,
        validators=[MinValueValidator(0)], help_text="In any 5 hours (rolling; up to 5 minutes more)")
    usd_budget_day = models.DecimalField(
        "USD budget per 24 hours", max_digits=14, decimal_places=6, null=True, blank=True,
        validators=[MinValueValidator(0)], help_text="In any 24 hours (rolling; up to 30 minutes more)")
    usd_budget_week = models.DecimalField(
        "USD budget per 7 days", max_digits=14, decimal_places=6, null=True, blank=True,
        validators=[MinValueValidator(0)], help_text="In any 7 days (rolling; up to 3 hours more)")
    usd_budget_month = models.DecimalField(
        "USD budget per 30 days", max_digits=14, decimal_places=6, null=True, blank=True,
        validators=[MinValueValidator(0)], help_text="In any 30 days (rolling; up to 12 hours more)")

    USD_BUDGETS = ("usd_budget_5h", "usd_budget_day", "usd_budget_week", "usd_budget_month")

    class Meta:
        abstract = True

    def usd_budget_limits(self) -> list[tuple[str, Decimal]]:
        """(window name in ``accounts.budgetwindows``, limit in USD) for each USD budget set."""

        return [(name.removeprefix("usd_budget_"), getattr(self, name)) for name in self.USD_BUDGETS
                if getattr(self, name) is not None]


class Team(UsdBudgets):
    """A group of client keys (and of signed-in developers' keys) with budgets and allowed models of
    its own, which apply across all of its keys on top of each key's own."""

    name = models.CharField(max_length=100, unique=True)
    allowed_models = models.JSONField(default=list, blank=True,
                                      help_text="Glob patterns its keys may use; empty allows all")
    # The identity provider's group whose members sign in as developers of this team (empty: none).
    idp_group = models.CharField("identity provider group", max_length=200, blank=True, default="")
    active = models.BooleanField(default=True)
    created_at = models.DateTimeField(auto_now_add=True)

    def __str__(self) -> str:
        return self.name


class ApiKey(UsageCounters, UsdBudgets):
    """A client key. Only its hash is stored; the plain key is shown once.

    A key with a ``user`` is that developer's own identity: the bearer tokens they get by signing in
    act as this key (its limits, budgets, team and request-log attribution)."""

    name = models.CharField(max_length=100, unique=True)
    key_hash = models.CharField(max_length=64, unique=True, editable=False)
    key_hint = models.CharField(max_length=20, editable=False, default="")
    allowed_models = models.JSONField(default=list, blank=True, help_text="Glob patterns; empty allows all")
    active = models.BooleanField(default=True)
    team = models.ForeignKey(Team, null=True, blank=True, on_delete=models.SET_NULL, related_name="keys")
    user = models.OneToOneField(settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.CASCADE,
                                related_name="client_key", help_text="The developer this key stands for")
    rate_limit_per_minute = models.PositiveIntegerField(null=True, blank=True)
    daily_token_limit = models.BigIntegerField(null=True, blank=True, help_text=(
        "Input + output tokens in any 24 hours, across gateway processes (a rolling window counted in "
        "half-hour slices: it reaches back up to 24.5 hours); empty: no limit"))
    max_concurrent_requests = models.PositiveIntegerField(
        null=True, blank=True, help_text="Requests in flight at once, across gateway processes; empty: no cap")
    expires_at = models.DateTimeField("expires", null=True, blank=True,
                                      help_text="Refused from this time on (both secrets); empty: never")
    # Stamped by the request-log writer, once a batch (a second) per key: never a write per request.
    last_used_at = models.DateTimeField("last used", null=True, blank=True, editable=False)
    # The secret before the last rotation (:meth:`rotate`): it keeps working until ``previous_key_until``,
    # then is refused and its refusals are logged under this key. One at a time: a second rotation
    # ends the first one's grace.
    previous_key_hash = models.CharField(max_length=64, null=True, blank=True, unique=True, editable=False)
    previous_key_hint = models.CharField(max_length=20, blank=True, default="", editable=False)
    previous_key_until = models.DateTimeField(
        "old secret works until", null=True, blank=True,
        help_text="After a rotation, the previous secret is refused from this time on")
    created_at = models.DateTimeField(auto_now_add=True)

    ROTATED_FIELDS = ("key_hash", "key_hint", "previous_key_hash", "previous_key_hint", "previous_key_until")

    class Meta:
        # What the README, the dashboard and the API's errors call it; the model's name is older.
        verbose_name = "client key"

    def __str__(self) -> str:
        return self.name

    def set_key(self, plain: str) -> None:
        self.key_hash = secrets.hash_client_key(plain)
        self.key_hint = secrets.mask(plain)

    def rotate(self, grace: dt.timedelta) -> str:
        """A new secret with the same settings; the current one keeps working for ``grace`` (0: refused
        at once). Saved (which bumps the configuration's version: every process sees it on its next
        request); returns the new secret, to be shown once."""

        plain = secrets.new_client_key()
        self.previous_key_hash, self.previous_key_hint = self.key_hash, self.key_hint
        self.previous_key_until = timezone.now() + grace
        self.set_key(plain)
        self.save(update_fields=list(self.ROTATED_FIELDS))
        return plain


def client_key_ids(subject: Subject) -> Any:
    """The client keys whose spending counts against ``subject``'s budgets, for a ``client_key_id__in``
    lookup: the key itself, or the keys in the team now (a key moved to another team takes its
    spending with it, as the dashboard's per-team figures do)."""

    if subject.kind == TEAM:
        return ApiKey.objects.filter(team_id=subject.id).values("pk")
    return [subject.id]


class ModelAlias(models.Model):
    name = models.CharField(max_length=200, help_text='What clients ask for; glob patterns such as "claude-*" allowed')
    provider = models.ForeignKey(Provider, on_delete=models.CASCADE, related_name="aliases")
    upstream_model = models.CharField(max_length=200, help_text='"*" keeps the client\'s model name')
    priority = models.IntegerField(default=0, help_text="Higher wins among matching patterns")
    metadata = models.JSONField(
        default=dict, blank=True,
        help_text='What GET /v1/models tells clients about these models: {"display_name": "…", "context_window": '
                  '200000, "created_at": "2025-05-14T00:00:00Z"}; Codex CLI reads its own fields too '
                  '(base_instructions, supported_reasoning_levels, …). See README "Model discovery".')

    class Meta:
        constraints = [models.UniqueConstraint(fields=["name", "provider"], name="alias_per_provider")]
        verbose_name_plural = "model aliases"

    def __str__(self) -> str:
        return f"{self.name} → {self.provider.name}:{self.upstream_model}"


class ConfigVersion(models.Model):
    """One row (id 1): bumped in the transaction of every change to what the gateways cache
    (providers, accounts, client keys, aliases, teams), so that each process can tell cheaply
    whether its copy is still current (``accounts.configversion``, ``gateway.state``)."""

    version = models.BigIntegerField(default=0)


class DisableEvent(models.Model):
    ENDED_BY = [("hand", "By hand"), ("cooldown", "End of cool-down"), ("probe", "Successful probe")]

    account = models.ForeignKey(Account, on_delete=models.CASCADE, related_name="disable_events")
    created_at = models.DateTimeField(default=timezone.now, db_index=True)
    rule = models.CharField(max_length=100, blank=True, default="")
    tier = models.CharField(max_length=50, blank=True, default="")
    status_code = models.IntegerField(null=True, blank=True)
    excerpt = models.TextField(blank=True, default="")
    cooldown_until = models.DateTimeField(null=True, blank=True)
    ended_at = models.DateTimeField(null=True, blank=True)
    ended_by = models.CharField(max_length=10, choices=ENDED_BY, blank=True, default="")

    class Meta:
        ordering = ["-created_at"]

    def __str__(self) -> str:
        return f"{self.account} disabled {formats.when(self.created_at)} ({self.tier})"


class Lease(models.Model):
    """Who runs a deployment-wide duty (gateway.background.lease): one row per duty, held until ``expires_at``."""

    name = models.CharField(max_length=50, primary_key=True)
    holder = models.CharField(max_length=200, blank=True, default="")
    expires_at = models.DateTimeField()

    def __str__(self) -> str:
        return f"{self.name}: {self.holder or 'nobody'} until {self.expires_at:%Y-%m-%d %H:%M:%S}"


class RequestLog(models.Model):
    created_at = models.DateTimeField(default=timezone.now, db_index=True)
    request_id = models.CharField(max_length=40, db_index=True)
    # No single-column index on the three references: the (reference, created_at) indexes below
    # serve the same lookups, and every index is paid for on each of the log's inserts.
    client_key = models.ForeignKey(ApiKey, null=True, blank=True, on_delete=models.SET_NULL, db_index=False)
    client_key_name = models.CharField(max_length=100, blank=True, default="")
    # Who the request was for: the developer (a signed-in bearer's, or a key's own), their team, and
    # the client application they signed in with (Claude Code's "surface": claude_code).
    user = models.ForeignKey(settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL,
                             db_index=False, related_name="+")
    team = models.ForeignKey(Team, null=True, blank=True, on_delete=models.SET_NULL, db_index=False,
                             related_name="+")
    surface = models.CharField(max_length=100, blank=True, default="")
    client_protocol = models.CharField(max_length=20)
    upstream_protocol = models.CharField(max_length=20, blank=True, default="")
    provider = models.ForeignKey(Provider, null=True, blank=True, on_delete=models.SET_NULL, db_index=False)
    account = models.ForeignKey(Account, null=True, blank=True, on_delete=models.SET_NULL, db_index=False)
    model_requested = models.CharField(max_length=200, blank=True, default="")
    model_sent = models.CharField(max_length=200, blank=True, default="")
    stream = models.BooleanField(default=False)
    # "websocket": a turn of a /v1/responses websocket (gateway.endpoints.websocket); else "http"
    transport = models.CharField(max_length=10, default="http")
    status = models.IntegerField()
    error_class = models.CharField(max_length=60, blank=True, default="", choices=ErrorClass.choices)
    attempts = models.JSONField(default=list)
    attempt_count = models.IntegerField(default=0)
    latency_ms = models.IntegerField(default=0)
    ttfb_ms = models.IntegerField(null=True, blank=True)
    input_tokens = models.IntegerField(default=0)
    output_tokens = models.IntegerField(default=0)
    # Parts of input_tokens: read from the provider's prompt cache, written to it (every TTL), and of the
    # writes those kept an hour (Anthropic's ttl "1h"); each is priced at its own rate (accounts.prices).
    cached_tokens = models.IntegerField(default=0)
    cache_write_tokens = models.IntegerField(default=0)
    cache_write_1h_tokens = models.IntegerField(default=0)
    reasoning_tokens = models.IntegerField(default=0)
    # The tokens are the gateway's count, not the upstream's: a stream ended (the client left, the
    # upstream broke off) before the upstream said what it used (gateway.exchange.dispatch)
    usage_estimated = models.BooleanField(default=False)
    finish_reason = models.CharField(max_length=40, blank=True, default="")
    # Session affinity (gateway.exchange.selection): what the pick did with the request's session —
    # "kept" on its account, "assigned" a first one, "moved" it (affinity_reason says why) — and
    # which of the client's signals named the session; "" when there was no session or affinity is off.
    affinity = models.CharField(max_length=10, blank=True, default="")
    affinity_reason = models.CharField(max_length=20, blank=True, default="")
    session_signal = models.CharField(max_length=30, blank=True, default="")
    cost = models.DecimalField(max_digits=20, decimal_places=8, null=True, blank=True,
                               help_text="USD, from the provider's price table; empty when no price is known")
    # Kept only with body logging on; encrypted at rest (atrest: the log writer seals what it inserts)
    request_body = EncryptedTextField(blank=True, default="")
    response_body = EncryptedTextField(blank=True, default="")
    # Claude Code's gateway hint headers, when sent (signin.hints): sensitive, never in a plain log.
    cc_request_class = models.CharField("request class", max_length=40, blank=True, default="")
    cc_agent_type = models.CharField("agent type", max_length=60, blank=True, default="")
    cc_prompt_id = models.CharField("prompt id", max_length=64, blank=True, default="")
    cc_settings_checksum = models.CharField("managed settings checksum", max_length=80, blank=True, default="")
    # The request's billing group: its request tag named by GATEWAY_BILLING_GROUP_TAG, when it sent one.
    billing_group = models.CharField(max_length=100, blank=True, default="")

    class Meta:
        ordering = ["-created_at"]
        indexes = [
            models.Index(fields=["account", "created_at"]),
            models.Index(fields=["provider", "created_at"]),
            models.Index(fields=["client_key", "created_at"]),
            models.Index(fields=["user", "created_at"]),
            models.Index(fields=["status", "created_at"]),
            # the dashboard's model filter: without it a rare model scans the whole log
            models.Index(fields=["model_requested", "created_at"]),
            # the dashboard's error-class filter, the same way; only failed requests pay for it
            models.Index(fields=["error_class", "created_at"], condition=~models.Q(error_class=""),
                         name="requestlog_error_class_at"),
        ]

    def __str__(self) -> str:
        return f"{self.request_id} {self.status}"


class AdminKey(models.Model):
    """A key for the organization admin API (``/v1/organizations/spend_limits``, ``…/analytics/cost``,
    Anthropic's shape): ``read`` lists caps and spend, ``write`` also sets and removes caps. Only its
    hash is stored; the plain key is shown once."""

    READ, WRITE = "read", "write"
    SCOPES = [(READ, "Read caps and spend"), (WRITE, "Read, set and remove caps")]

    name = models.CharField(max_length=100, unique=True)
    key_hash = models.CharField(max_length=64, unique=True, editable=False)
    key_hint = models.CharField(max_length=20, editable=False, default="")
    scope = models.CharField(max_length=10, choices=SCOPES, default=READ)
    active = models.BooleanField(default=True)
    created_at = models.DateTimeField(auto_now_add=True)
    last_used_at = models.DateTimeField(null=True, blank=True, editable=False)

    def __str__(self) -> str:
        return self.name

    def set_key(self, plain: str) -> None:
        self.key_hash = secrets.hash_admin_key(plain)
        self.key_hint = secrets.mask(plain)


class AdminAuditEvent(models.Model):
    """One change made through the organization admin API: who, what, and the before and after."""

    created_at = models.DateTimeField(default=timezone.now, db_index=True)
    actor = models.CharField(max_length=150, help_text='"admin-key:<name>"')
    action = models.CharField(max_length=60)
    target = models.CharField(max_length=200, help_text="The spend limit's id")
    before = models.JSONField(null=True, blank=True)
    after = models.JSONField(null=True, blank=True)

    class Meta:
        ordering = ["-created_at", "-id"]
        indexes = [models.Index(fields=["target", "created_at"])]

    def __str__(self) -> str:
        return f"{self.action} {self.target} by {self.actor}"
class RequestAttempt(models.Model):
    """One attempt of a logged request on one account, written by the request-log writer with the
    request's row: what finds every request an account was tried in, the ones it failed and that
    went on to another account too (``RequestLog.attempts`` holds the same trace as JSON, which no
    index can search). ``created_at`` is the request's, so that an account's attempts come newest
    first from the (account, created_at) index."""

    request = models.ForeignKey(RequestLog, on_delete=models.CASCADE, related_name="attempt_rows")
    account = models.ForeignKey(Account, null=True, on_delete=models.SET_NULL, db_index=False)
    created_at = models.DateTimeField()
    verdict = models.CharField(max_length=20, blank=True, default="", choices=Verdict.choices)
    status = models.IntegerField(null=True, blank=True)  # the upstream's; None: no answer (a network failure)

    class Meta:
        indexes = [models.Index(fields=["account", "created_at"])]

