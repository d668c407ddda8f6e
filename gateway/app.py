"""The app object: everything process-wide that the request path uses, built once and handed on.

``gateway.asgi`` builds one :class:`Gateway` from Django's settings; the edge
hands it to each view, and the views hand the pieces an exchange needs (the
pool, the upstream client, the log writer, the options) to the dispatch loop.
Nothing on the request path is a module singleton, so a test builds its own app
with fakes (``Gateway(options, pool=FakePool(), upstream=FakeUpstream())``; tests/gateway/fakes.py).

Background work (the account prober, the pool's health duties, the limits' leases, the alerts'
delivery) starts with the first connection the server hands the app, on the server's event loop: neither uvicorn (lifespan off)
nor Daphne tells the app when it starts.
"""

from __future__ import annotations

import asyncio
import atexit
import logging
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from django.db.models.signals import post_delete, post_save
from django.utils.module_loading import import_string

from accounts import pool as pool_state
from accounts.configversion import config_changed
from accounts.db import LoopSqlite, hop
from accounts.models import Account, Provider
from accounts.testnow import test_requested
from alerts import delivery as alert_delivery
from alerts.events import budget_reached

from .background.lease import Lease
from .background.poolhealth import LEASE_NAME, PoolHealth
from . import configwatch
from .background.prober import Prober
from .edge.routes import RouteTable
from .endpoints.models_list import ModelCatalog
from .endpoints.sealing import Sealer
from .exchange import conversation
from .exchange.affinity import Affinity
from .exchange.headroom import HeadroomBook
from .exchange.nocount import NoCountEndpoint
from .exchange.selection import Selector
from .exchange.relay import OpenStreams
from .exchange.upstream import UpstreamClient
from .limits import Limits, UsdSpent
from .log.otlpforward import OtlpForwarder, parse_headers
from .log.knownsecrets import KnownSecrets
from .log.metrics import AccountsCollector, HeadroomCollector, RequestMetrics
from .log.spool import Spool, for_database
from .log.writer import LogWriter, Sink
from .options import Options
from .state import SnapshotCache

log = logging.getLogger(__name__)


def make_pool(options: Options) -> pool_state.Pool:
    """The pool of the deployment's database (``accounts.pool`` says why there are two)."""

    if options.database_vendor == "postgresql":
        from accounts.pgpool import PgPool

        return PgPool()
    from accounts.memorypool import MemoryPool

    return MemoryPool(options.pool_ttl)


class Gateway:
    def __init__(self, options: Options, routes: RouteTable, *,
                 upstream: UpstreamClient | None = None, pool: pool_state.Pool | None = None,
                 limits: Limits | None = None, log_writer: LogWriter | None = None,
                 config: SnapshotCache | None = None, sinks: Sequence[Sink] = (),
                 spool: Spool | None = None, prober: Prober | None = None,
                 health: PoolHealth | None = None, usd_spent: UsdSpent | None = None) -> None:
        self.options = options
        self.routes = routes
        self.upstream = upstream or UpstreamClient(options.upstream_max_connections)
        self.pool = pool or make_pool(options)
        # Session affinity and the accounts' rate limits on top of the pool (gateway.exchange.selection).
        self.selector = Selector(self.pool, Affinity(options.redis_url, options.affinity_cap),
                                 HeadroomBook(options.redis_url), quota=options.pool_quota)
        self.limits = limits or Limits(options.redis_url, options.token_usage_ttl,
                                       reserve_output_tokens=options.reserve_output_tokens, usd_spent=usd_spent,
                                       budget_help=options.budget_help)
        self.config = config or SnapshotCache(
            options.config_ttl, known_secrets=KnownSecrets() if options.log_bodies else None,
            watch=configwatch.for_database(options.database_vendor, options.database_name,
                                           options.config_check_interval),
            on_change=self.pool.invalidate)  # accounts changed elsewhere: the pool re-reads too
        self.metrics = RequestMetrics(lambda: self.config.latest.providers, lambda: self.config.latest.aliases)
        # Read at each scrape, on a worker thread.
        self.metrics_collectors = (AccountsCollector(), HeadroomCollector())
        # stored Responses answers: written behind, read through a cache of the recent ones
        self.conversations = conversation.Conversations(
            options.responses_cache_bytes, wait=options.responses_wait,
            loop_db=LoopSqlite.of(options.database_vendor, options.database_name))
        self.log = log_writer or LogWriter(options.log_batch_seconds, sinks,
                                           options.log_body_limit if options.log_bodies else None, spool,
                                           known_secrets=self.config.known_secrets,
                                           observers=[self.metrics.observe], ticks=[self.metrics.apply])
        self.models = ModelCatalog(self.upstream, options.models_cache_ttl)
        self.no_count_endpoint = NoCountEndpoint()  # providers that answered count_tokens 404/405/501
        self.sealer = Sealer(options.sealing_key, options.compaction_item_days * 86400)
        # Telemetry exports forwarded to the collector ops configure (gateway.endpoints.telemetry).
        self.otlp = OtlpForwarder(options.otlp_forward_url, parse_headers(options.otlp_forward_headers))
        self.streams = OpenStreams()
        self.prober = prober or Prober(self.config, self.upstream, options.probe_interval)
        self.health = health or PoolHealth(Lease(LEASE_NAME, options.lease_ttl), self.prober.wake)
        self.alerts = alert_delivery.AlertWorker(Lease(alert_delivery.LEASE_NAME, options.lease_ttl),
                                                 retry_base=options.alert_retry_seconds, timeout=options.alert_timeout)
        self.limits.budget_refused = lambda key, budget, scope: self.alerts.note(
            budget_reached(key.name, budget.unit, budget.limit, budget.window.phrase, scope,
                           team=budget.subject.name if budget.pool else ""))
        self._tasks: list[asyncio.Task[None]] = []
        self._started = False

    def connect_signals(self) -> None:
        """Let this app's pool hear of state changes and edits made in this process (weakly held)."""

        pool_state.state_changed.connect(self.pool.on_state_change)
        config_changed.connect(self.config.changed)
        test_requested.connect(self.prober.test_now)  # the dashboard's Test now, in this process
        for model in (Account, Provider):
            post_save.connect(self.pool.invalidate, sender=model)
            post_delete.connect(self.pool.invalidate, sender=model)

    def start(self) -> None:
        """Start the background work on the running loop (once; later calls return at once)."""

        if self._started:
            return
        self._started = True
        self.log.start()  # it first writes what a killed process left in the spool
        loop = asyncio.get_running_loop()
        self._tasks.append(loop.create_task(self.prober.run(), name="account-prober"))
        self._tasks.append(loop.create_task(self.health.run(), name="pool-health"))
        self._tasks.append(loop.create_task(self.limits.run(), name="limit-leases"))
        self._tasks.append(loop.create_task(self.alerts.run(), name="alert-delivery"))
        self._tasks.append(loop.create_task(self.selector.headroom.run(), name="account-headroom"))
        if self.config.watch is not None:
            self._tasks.append(loop.create_task(self.config.watch.listen(self.config.changed), name="config-listener"))

    def flush(self) -> None:
        """Write what is held back (log rows, pool stamps) and close the spool: when stopping, from a thread."""

        for what, flush in (("request log", self.log.close), ("account pool", self.pool.flush)):
            try:
                flush()
            except Exception:  # noqa: BLE001 - at exit there is nobody left to tell but the log
                log.exception("%s could not be flushed", what)

    async def aclose(self) -> None:
        """The gateway is stopping: background work ends, held-back writes are made, connections close."""

        for task in self._tasks:
            task.cancel()
        await asyncio.gather(*self._tasks, return_exceptions=True)
        self._tasks.clear()
        await self.health.aclose()
        await self.alerts.aclose()
        await self.conversations.flush()
        await hop(self.flush)
        await self.upstream.aclose()
        await self.pool.aclose()
        await self.limits.aclose()
        await self.otlp.aclose()
        await self.selector.headroom.aclose()
        await self.selector.affinity.aclose()


def log_sinks(settings: Any) -> list[Sink]:
    """What the request-log writer feeds each batch to (``GATEWAY_LOG_SINKS``: the dashboard's rollup)."""

    return [import_string(path) for path in settings.GATEWAY_LOG_SINKS]


def build(settings: Any, routes: RouteTable) -> Gateway:
    """The process's app, from Django's settings, serving ``routes``; flushed at interpreter exit."""

    spool = None
    if settings.GATEWAY_LOG_SPOOL_DIR:
        spool = Spool(for_database(Path(settings.GATEWAY_LOG_SPOOL_DIR), settings.DATABASES["default"]))
    usd_spent = import_string(settings.GATEWAY_USD_SPENT) if settings.GATEWAY_USD_SPENT else None
    gw = Gateway(Options.from_settings(settings), routes, sinks=log_sinks(settings), spool=spool,
                 usd_spent=usd_spent)
    gw.connect_signals()
    atexit.register(gw.flush)
    return gw
