"""A failed attempt judged: the classifier's verdict (``accounts.rules``) says whether another account
may fix it (:class:`Retry`), whether this account is disabled first, or whether the client gets the
upstream's error as it is."""

from __future__ import annotations

import asyncio
import datetime as dt
import email.utils
from typing import TYPE_CHECKING, NoReturn

from django.utils import timezone

from accounts.outcomes import Verdict
from accounts.redact import redact
from accounts.rules import classify
from translation import ir

from ..errors import UpstreamFailed, passable, upstream_message
from ..log.record import Attempt
from .exchange import Exchange
from .forwarding import passed_back
from .neterrors import NetworkFailure
from .upstream import NETWORK_ERRORS, Headers, UpstreamResponse

if TYPE_CHECKING:
    from ..app import Gateway

ERROR_BODY_LIMIT = 64 * 1024


class Retry(Exception):
    """This attempt failed in a way another account may fix, for the client if every account fails so:
    ``unreachable``, a network failure's kind (the attempt trace keeps the details); ``failure``, the
    upstream's error as the client would get it, when the upstream answered one."""

    def __init__(self, unreachable: NetworkFailure | None = None, failure: UpstreamFailed | None = None) -> None:
        super().__init__(unreachable)
        self.unreachable = unreachable
        self.failure = failure


async def judge(gw: Gateway, ex: Exchange, attempt: Attempt, err: ir.Error, text: str, secret: str,
                headers: Headers | None = None, raw: bytes | None = None) -> NoReturn:
    """Apply the classifier's verdict to a failed attempt: raise Retry or the client's error.

    ``raw``: the upstream's error body when the client speaks its protocol; it is then what the
    client gets (with the account's key taken out), not a re-rendering of it.
    """

    ruling = classify(ex.route.provider.rules, err.status, f"{err.message}\n{text}")
    attempt.verdict, attempt.tier = ruling.action, ruling.tier
    attempt.status = err.status
    attempt.error = redact(err.message or text, [secret])
    # As the client gets it: with the upstream's status, as it came on the same protocol, else in the
    # client's envelope with the upstream's type, code and param.
    failure = UpstreamFailed(err.status, upstream_message(err.message, secret, text, err.status), err.error_type,
                             headers=passed_back(headers), code=err.code, param=err.param, raw=passable(raw, secret))
    if ruling.action == Verdict.DISABLE:
        await gw.pool.disable(attempt.account_id or 0, rule=ruling.rule, tier=ruling.tier, status_code=err.status,
                              excerpt=redact(text or err.message, [secret]), cooldown_until=retry_after(headers),
                              retest_after=ruling.retest_after)
        raise Retry(failure=failure)
    if ruling.action == Verdict.RETRY:
        raise Retry(failure=failure)
    raise failure


def retry_after(headers: Headers | None) -> dt.datetime | None:
    value = headers.get("retry-after") if headers is not None else None
    if not value:
        return None
    try:
        return timezone.now() + dt.timedelta(seconds=float(value))
    except ValueError:
        parsed = email.utils.parsedate_to_datetime(value) if value else None
        return parsed if parsed and parsed.tzinfo else None


async def error_body(response: UpstreamResponse, timeout: float) -> bytes:
    """An error answer's body, at most ``ERROR_BODY_LIMIT`` bytes of it within ``timeout`` seconds."""

    chunks: list[bytes] = []
    size = 0
    try:
        async with asyncio.timeout(timeout):
            async for chunk in response.aiter_raw():
                chunks.append(chunk)
                size += len(chunk)
                if size > ERROR_BODY_LIMIT:
                    break
    except NETWORK_ERRORS:
        pass
    finally:
        await response.aclose()
    return b"".join(chunks)[:ERROR_BODY_LIMIT]
