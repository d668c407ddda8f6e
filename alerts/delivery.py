"""Sending the outbox: a background worker in each gateway process, sending in one at a time.

Every process writes the alerts it noticed on the request path (a budget reached) to the outbox a
tick later (:meth:`AlertWorker.note` only appends to a list: a request never waits on the
database or a webhook for an alert). The process holding the ``alerts`` lease (the pool-health
lease's mechanism, ``gateway.background.lease``) sends what is due: each POST bounded by a timeout, a
failure (no answer, 5xx, 408, 429, a redirect) tried again after a doubling wait, given up after
:data:`MAX_ATTEMPTS`. A permanent answer (404, 410, any other 4xx) ends the tries at once: the
delivery is marked failed with the answer as its reason, for ops to fix the webhook and send again. A holder that stalls past its lease may send a delivery its successor
sends too: at least once, in that rare case twice, never lost.

Errors kept on a delivery name the failure's kind or status, never the URL (a Slack webhook's URL
is its secret) nor the receiver's answer.
"""

from __future__ import annotations

import asyncio
import datetime as dt
import logging
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, Protocol

import aiohttp
import httpx
from django.utils import timezone

from accounts.db import hop, rounds

from .events import Alert, enqueue
from .models import Delivery, Webhook

log = logging.getLogger(__name__)

LEASE_NAME = "alerts"
TICK = 1.0
BATCH = 20  # deliveries sent at once per tick
MAX_ATTEMPTS = 8
MAX_WAIT = 3600.0  # seconds: the doubling wait stops growing here
MAX_NOTED = 1000  # alerts waiting for the database in memory; past it they are dropped (and logged)


class Lease(Protocol):
    ttl: float

    def hold(self) -> bool: ...

    def release(self) -> None: ...


@dataclass(frozen=True)
class Due:
    id: int
    url: str
    format: str
    payload: dict[str, Any]
    attempts: int


@dataclass(frozen=True)
class Result:
    id: int
    error: str  # "" when delivered
    permanent: bool = False  # the receiver's answer will not change by trying again


def answered(id: int, status: int) -> Result:
    """The result of an answer with ``status``: delivered (2xx), worth another try (5xx, 408, 429,
    3xx), or permanent (any other 4xx: the URL is wrong or gone, the receiver refuses the body)."""

    if 200 <= status < 300:
        return Result(id, "")
    if 400 <= status < 500 and status not in (408, 429):
        return Result(id, f"HTTP {status}, permanent: not tried again", permanent=True)
    return Result(id, f"HTTP {status}")


def body(format: str, payload: dict[str, Any]) -> dict[str, Any]:
    """What a webhook receives: the alert's fields, or Slack's ``{"text": …}``."""

    return {"text": payload["text"]} if format == Webhook.SLACK else payload


def wait_after(attempts: int, base: float) -> float:
    """Seconds before the next try after ``attempts`` failed ones: base, 2×, 4× … up to an hour."""

    return float(min(base * 2 ** (attempts - 1), MAX_WAIT))


def claim_due(now: dt.datetime, limit: int = BATCH) -> list[Due]:
    rows = (Delivery.objects.filter(status=Delivery.PENDING, next_attempt_at__lte=now, webhook__enabled=True)
            .select_related("webhook").order_by("next_attempt_at", "id")[:limit])
    return [Due(d.pk, d.webhook.url, d.webhook.format, d.payload, d.attempts) for d in rows]


def record(results: Sequence[Result], attempts: dict[int, int], now: dt.datetime, base: float) -> None:
    for result in results:
        tried = attempts[result.id] + 1
        if not result.error:
            Delivery.objects.filter(pk=result.id).update(status=Delivery.SENT, attempts=tried, sent_at=now,
                                                         last_error="")
        elif tried >= MAX_ATTEMPTS or result.permanent:
            Delivery.objects.filter(pk=result.id).update(status=Delivery.FAILED, attempts=tried,
                                                         last_error=result.error)
            log.warning("alert delivery %s given up after %d attempt(s) (%s)", result.id, tried, result.error)
        else:
            Delivery.objects.filter(pk=result.id).update(
                attempts=tried, last_error=result.error,
                next_attempt_at=now + dt.timedelta(seconds=wait_after(tried, base)))


class AlertWorker:
    def __init__(self, lease: Lease, *, retry_base: float = 10.0, timeout: float = 10.0, tick: float = TICK) -> None:
        """``retry_base``: seconds before the first retry (then doubling); ``timeout``: one POST's bound."""

        self.lease = lease
        self.retry_base = retry_base
        self.timeout = timeout
        self.tick = min(tick, lease.ttl / 3)
        self._noted: list[Alert] = []
        self._session: aiohttp.ClientSession | None = None

    def note(self, alert: Alert) -> None:
        """An alert met on the request path: written to the outbox at the next tick (never waits)."""

        if len(self._noted) < MAX_NOTED:
            self._noted.append(alert)
        else:
            log.error("alert %s dropped: %d alerts wait for the database", alert.key, MAX_NOTED)

    async def run(self) -> None:
        await rounds(self.run_once, self.tick, "alert")

    async def run_once(self) -> int:
        """Write noted alerts; if this process holds the lease, send what is due. Returns deliveries tried."""

        if self._noted:
            noted, self._noted = self._noted, []
            try:
                await hop(enqueue, noted)
            except Exception:
                self._noted[:0] = noted  # kept for the next round
                raise
        if not await hop(self.lease.hold):
            return 0
        due = await hop(claim_due, timezone.now())
        if not due:
            return 0
        results = await asyncio.gather(*(self._send(d) for d in due))
        await hop(record, results, {d.id: d.attempts for d in due}, timezone.now(), self.retry_base)
        return len(due)

    async def _send(self, due: Due) -> Result:
        if self._session is None:
            self._session = aiohttp.ClientSession(timeout=aiohttp.ClientTimeout(total=self.timeout))
        try:
            async with self._session.post(due.url, json=body(due.format, due.payload),
                                          allow_redirects=False) as answer:
                return answered(due.id, answer.status)
        except asyncio.TimeoutError:
            return Result(due.id, f"no answer within {self.timeout:g} s")
        except (aiohttp.ClientError, OSError, ValueError) as exc:
            return Result(due.id, type(exc).__name__)

    async def aclose(self) -> None:
        if self._session is not None:
            await self._session.close()
        try:
            await hop(self.lease.release)
        except Exception:  # noqa: BLE001 - stopping anyway; the lease runs out by itself
            log.warning("alerts lease not released; it runs out in %.0f s", self.lease.ttl)


def send_now(webhook: Webhook, alert: Alert, timeout: float) -> Delivery:
    """Post ``alert`` to ``webhook`` at once, from a synchronous caller (the admin's "Send a test
    alert"), and keep the delivery with its outcome, as the worker keeps its own."""

    # Due only after this post has had its time: the outbox's worker would otherwise take the row as it
    # stands and post it a second time (the receiver got two test alerts); if this caller dies midway,
    # the worker sends it then.
    due = timezone.now() + dt.timedelta(seconds=timeout + 30)
    delivery = Delivery.objects.create(webhook=webhook, event=alert.event, event_key=alert.key[:200],
                                       payload=alert.payload(), attempts=1, next_attempt_at=due)
    try:
        answer = httpx.post(webhook.url, json=body(webhook.format, delivery.payload), timeout=timeout,
                            follow_redirects=False)
        result = answered(delivery.pk, answer.status_code)
    except httpx.TimeoutException:
        result = Result(delivery.pk, f"no answer within {timeout:g} s")
    except (httpx.HTTPError, OSError, ValueError) as exc:
        result = Result(delivery.pk, type(exc).__name__)
    delivery.status = Delivery.FAILED if result.error else Delivery.SENT
    delivery.last_error = result.error
    delivery.sent_at = None if result.error else timezone.now()
    delivery.save(update_fields=["status", "last_error", "sent_at"])
    return delivery
