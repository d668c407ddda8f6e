"""Usage and spend aggregates the dashboard reads instead of scanning the request log.

Each is kept in three tiers, five minutes, an hour and a (UTC) day, written together by the request-log writer
(``dashboard.rollup``, ``dashboard.spend``): a window reads the coarsest buckets that fit inside it and the finer
ones only at its ragged start (``dashboard.buckets.pieces``), so a 7-day page of 500 busy accounts sums a few
thousand rows, not the million five-minute ones it spans.
"""

from __future__ import annotations

from django.db import models

from accounts.models import UsageCounters

from . import histogram

BUCKET_SECONDS = 300
HOUR_SECONDS = 3600
DAY_SECONDS = 86400


class UsageSums(UsageCounters):
    """One account's traffic over a bucket's span.

    Kept by the request-log writer in the same transaction as the rows it sums
    (``dashboard.rollup.add``), so the aggregates never disagree with the log.
    ``account_id`` is a plain number, not a foreign key: 0 stands for requests
    that never reached an account (rejected keys, unknown models, empty pools),
    and an account's history outlives its deletion.
    """

    start = models.BigIntegerField(help_text="Unix time of the bucket's first second (UTC)")
    account_id = models.BigIntegerField(default=0)
    latency_ms = models.BigIntegerField(default=0, help_text="Sum over the bucket's requests")
    # Uses of the account that the request moved on from (dashboard.rollup): the deployment's own
    # request and error counts are requests and errors less these.
    retried = models.BigIntegerField(default=0)
    # Of the errors, the requests the gateway refused the client (accounts.outcomes.CLIENT_REFUSALS).
    refused = models.BigIntegerField(default=0)
    # One counter per time-to-first-byte bucket (histogram.BOUNDS): percentiles add up.
    for _field in histogram.FIELDS:
        locals()[_field] = models.BigIntegerField(default=0)
    del _field

    class Meta:
        abstract = True

    def __str__(self) -> str:
        return f"account {self.account_id} @ {self.start}"


class UsageBucket(UsageSums):
    """Five minutes of one account's traffic."""

    class Meta:
        constraints = [models.UniqueConstraint(fields=["start", "account_id"], name="usage_bucket_per_account")]
        indexes = [models.Index(fields=["account_id", "start"])]


class UsageHour(UsageSums):
    """An hour of one account's traffic: the five-minute buckets' sums, kept beside them."""

    class Meta:
        constraints = [models.UniqueConstraint(fields=["start", "account_id"], name="usage_hour_per_account")]
        indexes = [models.Index(fields=["account_id", "start"])]


class UsageDay(UsageSums):
    """A UTC day of one account's traffic."""

    class Meta:
        constraints = [models.UniqueConstraint(fields=["start", "account_id"], name="usage_day_per_account")]
        indexes = [models.Index(fields=["account_id", "start"])]


class SpendSums(UsageCounters):
    """One client key's requests to one model through one provider over a bucket's span, with what they cost.

    Kept by the request-log writer in the same transaction as the rows it sums (``dashboard.spend.add``),
    like :class:`UsageSums`; it counts client requests (not uses of accounts), so the per-key, per-model
    and per-provider pages add up to the request log. Ids are plain numbers (0: none) for the same reasons.
    """

    start = models.BigIntegerField(help_text="Unix time of the bucket's first second (UTC)")
    client_key_id = models.BigIntegerField(default=0)
    provider_id = models.BigIntegerField(default=0)
    model = models.CharField(max_length=200, blank=True, default="", help_text="As the client asked for it")
    # Billionths of a dollar: an integer sums exactly on every database (the log keeps 8 decimal places).
    cost_nanos = models.BigIntegerField(default=0)

    class Meta:
        abstract = True

    def __str__(self) -> str:
        return f"key {self.client_key_id} {self.model} @ {self.start}"


class SpendBucket(SpendSums):
    """Five minutes of one client key's spend per provider and model."""

    class Meta:
        constraints = [models.UniqueConstraint(fields=["start", "client_key_id", "provider_id", "model"],
                                               name="spend_bucket_per_key_provider_model")]
        indexes = [models.Index(fields=["client_key_id", "start"]), models.Index(fields=["start"])]


class SpendHour(SpendSums):
    """An hour of one client key's spend per provider and model."""

    class Meta:
        constraints = [models.UniqueConstraint(fields=["start", "client_key_id", "provider_id", "model"],
                                               name="spend_hour_per_key_provider_model")]
        indexes = [models.Index(fields=["client_key_id", "start"])]


class SpendDay(SpendSums):
    """A UTC day of one client key's spend per provider and model."""

    class Meta:
        constraints = [models.UniqueConstraint(fields=["start", "client_key_id", "provider_id", "model"],
                                               name="spend_day_per_key_provider_model")]
        indexes = [models.Index(fields=["client_key_id", "start"])]
