"""The gateway's settings, read once into a frozen snapshot that the app object hands out.

Django's ``settings`` are read when the app is built (``gateway.asgi``), not by
modules at import time or per request: a settings lookup per request showed in
the profile, and a value read at import time could not be changed by a test
that builds its own app.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from typing import Any


@dataclass(frozen=True)
class Options:
    max_body_bytes: int = 32 * 1024 * 1024
    max_page_body_bytes: int = 10 * 1024 * 1024
    body_timeout: float = 30.0
    max_head_bytes: int = 64 * 1024
    head_timeout: float = 30.0
    keepalive_seconds: float = 10.0
    max_attempts: int = 10
    config_ttl: float = 2.0
    config_check_interval: float = 0.5
    pool_ttl: float = 1.0
    log_batch_seconds: float = 1.0
    log_bodies: bool = False
    log_body_limit: int = 16384
    upstream_max_connections: int = 4096
    max_upstream_event_bytes: int = 8 * 1024 * 1024
    max_upstream_bytes: int = 32 * 1024 * 1024
    max_answer_chars: int = 2 * 1024 * 1024
    models_cache_ttl: float = 300.0
    token_usage_ttl: float = 5.0
    reserve_output_tokens: int = 4096
    shutdown_grace: float = 10.0
    probe_interval: float = 5.0
    lease_ttl: float = 10.0
    redis_url: str = ""
    affinity_cap: int = 200_000  # sessions remembered in this process (GATEWAY_AFFINITY_SESSIONS)
    pool_quota: bool = True  # picks skip accounts their rate limits would refuse (GATEWAY_POOL_QUOTA)
    # GATEWAY_METRICS_TOKEN: /metrics wants it as a bearer token; "" answers /metrics 404. Kept out of repr.
    metrics_token: str = dataclasses.field(default="", repr=False)
    alert_retry_seconds: float = 10.0
    alert_timeout: float = 10.0
    # How long a read of a stored Responses answer this process does not have waits for another
    # process to commit it before it says unknown (answers are written behind).
    responses_wait: float = 1.0
    # Committed answers each process keeps at hand for follow-ups, in bytes (GATEWAY_RESPONSES_CACHE_MB).
    responses_cache_bytes: int = 8 * 1024 * 1024
    database_vendor: str = "sqlite"  # "sqlite" | "postgresql": which pool the app builds
    database_name: str = ""  # SQLite: the file the configuration's version is read from (gateway.configwatch)
    # What compaction summaries are sealed with (gateway.endpoints.sealing); kept out of any repr.
    sealing_key: str = dataclasses.field(default="", repr=False)
    budget_help: str = "ask your gateway's administrators if you need it raised"
    billing_group_tag: str = ""
    telemetry_max_bytes: int = 4 * 1024 * 1024
    telemetry_per_minute: int = 120
    otlp_forward_url: str = ""
    otlp_forward_headers: str = dataclasses.field(default="", repr=False)  # may hold a collector's credential
    compaction_item_days: float = 30.0  # how long a sealed compaction item opens (0: for ever)
    max_sockets_per_key: int = 32  # open Responses websockets per client key (0: no cap)
    abandoned_stream_seconds: float = 5.0  # a stream's upstream read on after its client left, for the usage

    @classmethod
    def from_settings(cls, settings: Any) -> Options:
        engine = settings.DATABASES["default"]["ENGINE"]
        return cls(
            max_body_bytes=settings.GATEWAY_MAX_BODY_BYTES,
            max_page_body_bytes=settings.GATEWAY_MAX_PAGE_BODY_BYTES,
            body_timeout=settings.GATEWAY_BODY_TIMEOUT,
            max_head_bytes=settings.GATEWAY_MAX_HEAD_BYTES,
            head_timeout=settings.GATEWAY_HEAD_TIMEOUT,
            keepalive_seconds=settings.GATEWAY_KEEPALIVE_SECONDS,
            max_attempts=settings.GATEWAY_MAX_ATTEMPTS,
            config_ttl=settings.GATEWAY_CONFIG_TTL,
            config_check_interval=settings.GATEWAY_CONFIG_CHECK_SECONDS,
            pool_ttl=settings.GATEWAY_POOL_TTL,
            log_batch_seconds=settings.GATEWAY_LOG_BATCH_SECONDS,
            log_bodies=settings.GATEWAY_LOG_BODIES,
            log_body_limit=settings.GATEWAY_LOG_BODY_LIMIT,
            upstream_max_connections=settings.GATEWAY_UPSTREAM_MAX_CONNECTIONS,
            max_upstream_event_bytes=settings.GATEWAY_MAX_UPSTREAM_EVENT_BYTES,
            max_upstream_bytes=settings.GATEWAY_MAX_UPSTREAM_BYTES,
            max_answer_chars=settings.GATEWAY_MAX_ANSWER_CHARS,
            models_cache_ttl=settings.GATEWAY_MODELS_CACHE_TTL,
            token_usage_ttl=settings.GATEWAY_TOKEN_USAGE_TTL,
            reserve_output_tokens=settings.GATEWAY_RESERVE_OUTPUT_TOKENS,
            shutdown_grace=settings.GATEWAY_SHUTDOWN_GRACE,
            probe_interval=settings.GATEWAY_PROBE_INTERVAL,
            lease_ttl=settings.GATEWAY_LEASE_TTL,
            redis_url=settings.REDIS_URL,
            affinity_cap=settings.GATEWAY_AFFINITY_SESSIONS,
            pool_quota=settings.GATEWAY_POOL_QUOTA,
            metrics_token=settings.GATEWAY_METRICS_TOKEN,
            alert_retry_seconds=settings.GATEWAY_ALERT_RETRY_SECONDS,
            alert_timeout=settings.GATEWAY_ALERT_TIMEOUT,
            responses_wait=settings.GATEWAY_RESPONSES_WAIT_SECONDS,
            responses_cache_bytes=int(settings.GATEWAY_RESPONSES_CACHE_MB * 1024 * 1024),
            database_vendor="postgresql" if engine.endswith("postgresql") else "sqlite",
            database_name=str(settings.DATABASES["default"]["NAME"]),
            sealing_key=settings.GATEWAY_ENCRYPTION_KEY or settings.SECRET_KEY,
            budget_help=settings.GATEWAY_BUDGET_HELP,
            billing_group_tag=settings.GATEWAY_BILLING_GROUP_TAG,
            telemetry_max_bytes=settings.GATEWAY_TELEMETRY_MAX_BYTES,
            telemetry_per_minute=settings.GATEWAY_TELEMETRY_PER_MINUTE,
            otlp_forward_url=settings.GATEWAY_OTLP_FORWARD_URL,
            otlp_forward_headers=settings.GATEWAY_OTLP_FORWARD_HEADERS,
            compaction_item_days=settings.GATEWAY_COMPACTION_ITEM_DAYS,
            max_sockets_per_key=settings.GATEWAY_MAX_SOCKETS_PER_KEY,
            abandoned_stream_seconds=settings.GATEWAY_ABANDONED_STREAM_SECONDS,
        )

    def replace(self, **changes: Any) -> Options:
        return dataclasses.replace(self, **changes)
