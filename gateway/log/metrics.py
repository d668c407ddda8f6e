"""Prometheus metrics: per-request figures read off the request-log record, account states at scrape time.

:class:`RequestMetrics` is a request-log observer (``gateway.log.writer.LogWriter``): each finished
request's :class:`~gateway.log.record.LogRecord` is noted when it is submitted and counted once, so no view
or dispatch step carries a metric call. The label children of each (protocol, provider, model,
client key name) are looked up once and kept, and records are counted a batch at a time
(measured below). Client keys appear by their name, never the key.

Model labels come from a bounded set, the configuration's (:class:`ModelLabels`): a name that is an
exact alias or in a provider's model list is its own label; any other routed name is labelled by the
glob alias that routed it, ``<provider>/*`` for a ``provider/model`` name, or ``(other)``; an unrouted
name is ``(unrouted)``. Whatever a client makes up, then, opens no series: 1,000 made-up names
matching a glob alias once opened 47,000 series and grew a scrape from 535 KB to 11.6 MB.

Several processes (``PROMETHEUS_MULTIPROC_DIR`` set) keep their values in that directory through
prometheus_client's multi-process mode and a scrape of any process sums them all. Account
states are not counted per process: :class:`AccountsCollector` reads them from the database at
each scrape (one grouped query), so every process answers the same.
"""

from __future__ import annotations

import logging
import os
import threading
from bisect import bisect_left
from collections import deque
from collections.abc import Callable, Iterator, Mapping, Sequence
from fnmatch import fnmatchcase
from typing import TYPE_CHECKING, Any

from django.db import DatabaseError
from prometheus_client import CollectorRegistry, Counter, Histogram, generate_latest
from prometheus_client.core import GaugeMetricFamily, Metric
from prometheus_client.multiprocess import MultiProcessCollector
from prometheus_client.registry import Collector

from .record import request_costs

if TYPE_CHECKING:
    from decimal import Decimal

    from accounts.outcomes import Verdict

    from ..state import AliasInfo, ProviderInfo
    from .record import LogRecord

log = logging.getLogger(__name__)

# Measured with timeit (2 shared cores): one successful record counted on its own, label children
# cached, took 6 µs (no price, one attempt) to 12 µs (priced: Decimal arithmetic; two attempts); in
# multi-process mode, where each value is an mmap'd file, 12 to 17 µs. Looking the children up each time
# cost 19 µs. So the request's thread only notes a record, and a batch is summed per label set and
# added with one increment per value: 2.3 µs a record (no price) to 8.6 µs (priced), against 7.1 and 15.6
# counted one by one (thread CPU, the best of 7 batches of 1,000 on a busy machine); py-spy, c=16: 0.8-1.5 %
# of the gateway's samples before, 0.3 % after.

LABELS = ("client_protocol", "provider", "model", "client_key")
UNROUTED = "(unrouted)"  # the model label of a request no provider took (see the module's docstring)
OTHER = "(other)"  # a routed name the configuration names nowhere (parenthesised: no model is called so)
MAX_LABEL = 120
# Records noted and not yet counted, at most: the writer counts them once a batch (a scrape first); when
# more wait, the request that notes the last counts them (a pause of 2 to 9 ms a thousand) rather than
# keeping written records alive. The writer's queue holds as many until they are written, so this is
# no more memory than a second's rows; at 1,000, a process serving 1,500 requests a second made one
# request in 1,000 pause for the count (``make bench`` profile: 0.5 % of the request path).
PENDING_BOUND = 10_000
# LLM answers take seconds to minutes; Prometheus's default buckets stop at 10 s.
LATENCY_BUCKETS = (0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 20, 30, 60, 120, 300)
TTFB_BUCKETS = (0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60)
# "input" counts all input; "cached" (read from the provider's prompt cache) and "uncached_input" (the rest)
# split it in two, and "cache_write" (of the uncached, what was written to the cache; "cache_write_1h": of those,
# kept an hour) splits the rest further. The cache hit rate: rate(cached) / rate(input) (README, "Prices").
TOKEN_KINDS = ("input", "output", "cached", "reasoning", "uncached_input", "cache_write", "cache_write_1h")


def multiprocess_dir() -> str:
    """The shared directory of multi-process mode, "" when each process counts alone."""

    return os.environ.get("PROMETHEUS_MULTIPROC_DIR", "")


class RequestMetrics:
    """The per-request metrics of one process, fed by the request-log writer's observer hook.

    ``providers``: the configuration's providers by id as the app has them now (names and prices).
    """

    def __init__(self, providers: Callable[[], Mapping[int, ProviderInfo]],
                 aliases: Callable[[], Sequence[AliasInfo]] = tuple) -> None:
        self._providers = providers
        self.model_label = ModelLabels(providers, aliases)
        # Our own registry, not prometheus_client's global one: a test builds as many apps as it likes.
        self.registry = CollectorRegistry(auto_describe=True)
        r = self.registry
        self.requests = Counter("gateway_requests", "Requests finished", LABELS, registry=r)
        self.errors = Counter("gateway_errors", "Requests that failed, by error class",
                              (*LABELS, "error_class"), registry=r)
        self.latency = Histogram("gateway_request_duration_seconds", "Time from request to the answer's end",
                                 LABELS, buckets=LATENCY_BUCKETS, registry=r)
        self.ttfb = Histogram("gateway_time_to_first_byte_seconds", "Time from request to the first byte sent",
                              LABELS, buckets=TTFB_BUCKETS, registry=r)
        self.tokens = Counter("gateway_tokens", "Tokens of finished requests, by kind", (*LABELS, "kind"),
                              registry=r)
        self.cost = Counter("gateway_cost_usd", "What successful requests cost (USD), by the provider's prices",
                            LABELS, registry=r)
        self.attempts = Counter("gateway_upstream_attempts", "Upstream attempts, by verdict",
                                (*LABELS, "verdict"), registry=r)
        self.affinity = Counter("gateway_session_affinity", "Requests of a session: kept on its account, assigned "
                                "one, or moved (with the reason)", ("provider", "decision", "reason"), registry=r)
        self._children: dict[tuple[str, ...], _Children] = {}
        self._affinity: dict[tuple[str, str, str], Any] = {}
        self._pending: deque[LogRecord] = deque()  # noted, not yet counted (appends and pops are thread-safe)
        self._applying = threading.Lock()  # the writer's thread and a scrape's

    def observe(self, record: LogRecord) -> None:
        """Note a finished request (on the request's thread: an append); it is counted at the next
        :meth:`apply`, which the log writer runs once a batch and a scrape runs first."""

        self._pending.append(record)
        if len(self._pending) >= PENDING_BOUND:  # nothing applied them (no writer thread): never hold more
            self.apply()

    def apply(self) -> None:
        """Count the noted requests: summed per label set first, then one increment per value that changed."""

        with self._applying:
            pending = self._pending
            records = [pending.popleft() for _ in range(len(pending))]
            if not records:
                return
            providers = self._providers()
            costs = request_costs(records, {pid: p.prices for pid, p in providers.items() if p.prices})
            sums: dict[tuple[str, ...], _Sums] = {}
            affinity: dict[tuple[str, str, str], int] = {}
            for record, usd in zip(records, costs):
                provider = providers.get(record.provider_id) if record.provider_id is not None else None
                labels = (record.client_protocol, provider.name if provider else "",
                          self.model_label(record.model_requested) if provider else UNROUTED,
                          record.client_key_name[:MAX_LABEL])
                s = sums.get(labels)
                if s is None:
                    s = sums[labels] = _Sums()
                s.add(record, usd)
                if record.affinity:
                    key = (labels[1], record.affinity, record.affinity_reason)
                    affinity[key] = affinity.get(key, 0) + 1
            for label_set, figures in sums.items():
                self._count(label_set, figures)
            for key, n in affinity.items():
                counter = self._affinity.get(key)
                if counter is None:
                    counter = self._affinity[key] = self.affinity.labels(*key)
                counter.inc(n)

    def _count(self, labels: tuple[str, ...], s: _Sums) -> None:
        c = self._children.get(labels)
        if c is None:
            c = self._children[labels] = _Children(self, labels)
        c.requests.inc(s.requests)
        for error_class, n in s.errors.items():
            self.errors.labels(*labels, error_class).inc(n)
        _observe_many(c.latency, s.latency_sum, s.latency)
        if s.ttfb_count:
            _observe_many(c.ttfb, s.ttfb_sum, s.ttfb)
        for child, n in zip(c.tokens, s.tokens):
            if n:
                child.inc(n)
        if s.cost:
            c.cost.inc(s.cost)
        for verdict, n in s.attempts.items():
            counter = c.attempts.get(verdict)
            if counter is None:
                counter = c.attempts[verdict] = self.attempts.labels(*labels, verdict.value)
            counter.inc(n)

    def exposition(self, collectors: tuple[Collector, ...] = ()) -> bytes:
        """The text a scrape gets: this process's metrics (all processes' in multi-process mode) and
        ``collectors`` (read now; synchronous: run it through ``hop`` when one reads the database)."""

        self.apply()
        shared = multiprocess_dir()
        if shared:
            registry = CollectorRegistry()
            MultiProcessCollector(registry, shared)  # type: ignore[no-untyped-call]  # untyped __init__
        else:
            registry = self.registry
        scrape = CollectorRegistry()
        scrape.register(_Joined(registry, collectors))
        return generate_latest(scrape)


class HeadroomCollector(Collector):
    """What each account has left of its provider's rate limits, as the gateway last wrote it
    (``Account.headroom``, every few seconds: gateway.exchange.headroom), read at scrape time."""

    def collect(self) -> Iterator[Metric]:
        import time

        from accounts.headroom import Headroom
        from accounts.models import Account

        try:
            rows = list(Account.objects.filter(headroom__isnull=False).values_list(
                "provider__name", "label", "headroom"))
        except DatabaseError as exc:
            log.warning("headroom metric not read: %s", type(exc).__name__)
            return
        remaining = GaugeMetricFamily("gateway_account_rate_limit_remaining",
                                      "What an account has left of a rate limit, as its provider last reported it",
                                      labels=("provider", "account", "kind"))
        limit = GaugeMetricFamily("gateway_account_rate_limit", "An account's rate limit, as its provider reports it",
                                  labels=("provider", "account", "kind"))
        reset = GaugeMetricFamily("gateway_account_rate_limit_reset_seconds",
                                  "Seconds until an account's rate limit is full again (0: it is)",
                                  labels=("provider", "account", "kind"))
        now = time.time()
        for provider, label, stored in rows:
            headroom = Headroom.from_json(stored)
            if headroom is None:
                continue
            for kind, lim in sorted(headroom.limits.items()):
                labels = (provider, label[:MAX_LABEL], kind)
                full = bool(lim.reset_at) and lim.reset_at <= now
                remaining.add_metric(labels, lim.limit if full and lim.limit is not None else max(lim.remaining, 0))
                if lim.limit is not None:
                    limit.add_metric(labels, lim.limit)
                reset.add_metric(labels, max(0.0, lim.reset_at - now) if lim.reset_at else 0.0)
        yield remaining
        yield limit
        yield reset
class ModelLabels:
    """A routed request's model label, from the configuration (``providers``, ``aliases``: as the app has
    them now): the name itself when an exact alias or a provider's model list names it; else the glob
    alias that routes it (the highest priority, then the most specific, as routing chooses),
    ``<provider>/*`` for a ``provider/model`` name, ``(other)`` for the rest.

    The label of each name is kept (up to ``CACHE`` names, then forgotten at once), and everything is
    worked out again when the configuration is re-read: a request costs a dictionary lookup.
    """

    CACHE = 4096

    def __init__(self, providers: Callable[[], Mapping[int, ProviderInfo]],
                 aliases: Callable[[], Sequence[AliasInfo]]) -> None:
        self._providers = providers
        self._aliases = aliases
        self._of: tuple[object, object] | None = None  # the configuration the tables below were made from
        self._names: frozenset[str] = frozenset()
        self._globs: list[str] = []
        self._served: dict[str, frozenset[str]] = {}  # provider name → its model list
        self._labels: dict[str, str] = {}

    def __call__(self, model: str) -> str:
        providers, aliases = self._providers(), self._aliases()
        if self._of is None or self._of[0] is not providers or self._of[1] is not aliases:
            self._learn(providers, aliases)
        label = self._labels.get(model)
        if label is None:
            if len(self._labels) >= self.CACHE:
                self._labels = {}
            label = self._labels[model] = self._label(model)[:MAX_LABEL]
        return label

    def _learn(self, providers: Mapping[int, ProviderInfo], aliases: Sequence[AliasInfo]) -> None:
        self._of = (providers, aliases)
        self._served = {p.name: frozenset(getattr(p, "served_models", ())) for p in providers.values()}
        exact = {a.pattern for a in aliases if not a.is_glob}
        self._names = frozenset(exact.union(*self._served.values()))
        globs = [a for a in aliases if a.is_glob]
        # As gateway.exchange.routing picks among globs: priority, then the most literal characters.
        globs.sort(key=lambda a: (a.priority, len(a.pattern) - sum(a.pattern.count(c) for c in "*?")), reverse=True)
        self._globs = [a.pattern for a in globs]
        self._labels = {}

    def _label(self, model: str) -> str:
        if model in self._names:
            return model
        for pattern in self._globs:
            if fnmatchcase(model, pattern):
                return pattern
        prefix, slash, rest = model.partition("/")
        served = self._served.get(prefix) if slash else None
        if served is not None:
            return model if rest in served else f"{prefix}/*"
        return OTHER


class _Children:
    """One label set's metric children, looked up once (``labels()`` takes a lock and builds a key)."""

    __slots__ = ("requests", "latency", "ttfb", "tokens", "cost", "attempts")

    def __init__(self, m: RequestMetrics, labels: tuple[str, ...]) -> None:
        self.requests = m.requests.labels(*labels)
        self.latency = m.latency.labels(*labels)
        self.ttfb = m.ttfb.labels(*labels)
        self.tokens = tuple(m.tokens.labels(*labels, kind) for kind in TOKEN_KINDS)
        self.cost = m.cost.labels(*labels)
        self.attempts: dict[Verdict, Counter] = {}  # by verdict, as they come


class _Sums:
    """One label set's figures over a batch of records: what :meth:`RequestMetrics._count` adds at once."""

    __slots__ = ("requests", "errors", "latency", "latency_sum", "ttfb", "ttfb_sum", "ttfb_count", "tokens", "cost",
                 "attempts")

    def __init__(self) -> None:
        self.requests = 0
        self.errors: dict[str, int] = {}
        self.latency = [0] * (len(LATENCY_BUCKETS) + 1)  # observations per bucket, the last one +Inf
        self.latency_sum = 0.0
        self.ttfb = [0] * (len(TTFB_BUCKETS) + 1)
        self.ttfb_sum = 0.0
        self.ttfb_count = 0
        self.tokens = [0] * len(TOKEN_KINDS)
        self.cost = 0.0
        self.attempts: dict[Verdict, int] = {}

    def add(self, record: LogRecord, usd: Decimal | None) -> None:
        self.requests += 1
        if record.error_class:
            self.errors[record.error_class.value] = self.errors.get(record.error_class.value, 0) + 1
        seconds = record.latency_ms / 1000
        self.latency[bisect_left(LATENCY_BUCKETS, seconds)] += 1  # the first bound ≥ it, as observe() files it
        self.latency_sum += seconds
        if record.ttfb_ms is not None:
            seconds = record.ttfb_ms / 1000
            self.ttfb[bisect_left(TTFB_BUCKETS, seconds)] += 1
            self.ttfb_sum += seconds
            self.ttfb_count += 1
        t = self.tokens  # in the order of TOKEN_KINDS
        t[0] += record.input_tokens
        t[1] += record.output_tokens
        t[2] += record.cached_tokens
        t[3] += record.reasoning_tokens
        t[4] += max(record.input_tokens - record.cached_tokens, 0)
        t[5] += record.cache_write_tokens
        t[6] += record.cache_write_1h_tokens
        if usd:
            self.cost += float(usd)
        for attempt in record.attempts:
            self.attempts[attempt.verdict] = self.attempts.get(attempt.verdict, 0) + 1


def _observe_many(child: Histogram, total: float, counts: list[int]) -> None:
    """``counts[i]`` observations in the i-th bucket, summing to ``total``, left as that many ``observe()``
    calls leave them: prometheus_client has no bulk observe, so this adds to the values observe() adds to
    (its ``_sum`` and its per-bucket ``_buckets``, which a scrape makes cumulative)."""

    child._sum.inc(total)
    for value, n in zip(child._buckets, counts):
        if n:
            value.inc(n)


class _Joined(Collector):
    def __init__(self, registry: CollectorRegistry, collectors: tuple[Collector, ...]) -> None:
        self._registry = registry
        self._collectors = collectors

    def collect(self) -> Iterator[Metric]:
        yield from self._registry.collect()
        for collector in self._collectors:
            yield from collector.collect()


class AccountsCollector(Collector):
    """Accounts by status per provider, read from the database at scrape time (two small queries)."""

    def collect(self) -> Iterator[Metric]:
        from django.db.models import Count

        from accounts.models import Account, Provider

        try:
            names = dict(Provider.objects.values_list("pk", "name"))
            counts = list(Account.objects.values_list("provider_id", "status").annotate(n=Count("pk")).order_by())
        except DatabaseError as exc:  # the rest of the scrape is still worth having
            log.warning("accounts metric not read: %s", type(exc).__name__)
            return
        family = GaugeMetricFamily("gateway_accounts", "Accounts by status, per provider",
                                   labels=("provider", "status"))
        # Every status of every provider, zeros included: "no active account" is what one alerts on.
        table = {(pk, status): 0 for pk in names for status, _ in Account.STATUS_CHOICES}
        for provider_id, status, n in counts:
            table[(provider_id, status)] = n
        for (pk, status), n in sorted(table.items()):
            family.add_metric((names.get(pk, str(pk)), status), n)
        yield family
