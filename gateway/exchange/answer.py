"""The JSON answer: the upstream's whole body read within its bounds, judged like an error status when
it carries one, and written for the client (as it came on the same protocol, else translated)."""

from __future__ import annotations

import asyncio
from typing import TYPE_CHECKING

import orjson

from accounts.outcomes import Verdict
from accounts.redact import redact
from translation import ir, sse
from translation.passthrough import model_rewrite
from translation.protocol import EncodeContext, ProtocolModule

from ..edge.responses import ApiResponse, raw_json_response
from ..log.record import Attempt
from . import conversation
from .exchange import Exchange
from .finish import finish
from .judge import Retry, judge
from .neterrors import failure_kind, trace_text
from .upstream import NETWORK_ERRORS, TooLarge, UpstreamResponse

if TYPE_CHECKING:
    from ..app import Gateway


async def json_answer(gw: Gateway, ex: Exchange, proto: ProtocolModule, response: UpstreamResponse,
                attempt: Attempt, secret: str) -> ApiResponse:
    provider = ex.route.provider
    try:
        async with asyncio.timeout(provider.first_byte_timeout + provider.idle_timeout):
            raw = await response.read_within(gw.options.max_upstream_bytes)
    except NETWORK_ERRORS as exc:
        attempt.verdict, attempt.error = Verdict.NETWORK, trace_text(exc, [secret])
        raise Retry(failure_kind(exc)) from exc
    except TooLarge as exc:
        attempt.verdict, attempt.error = Verdict.MALFORMED, str(exc)
        raise Retry from exc
    finally:
        await response.aclose()
    try:
        obj = sse.loads(raw)
        resp = proto.parse_response(obj)
        if sum(len(block.text) for block in resp.blocks) > gw.options.max_answer_chars:
            raise TooLarge(f"the upstream's answer exceeds {gw.options.max_answer_chars} characters of text")
    except (ValueError, ir.DecodeError, TooLarge) as exc:
        attempt.verdict, attempt.error = Verdict.MALFORMED, redact(str(exc), [secret])
        raise Retry from exc
    if resp.error is not None:
        await judge(gw, ex, attempt, resp.error, "", secret, None, raw if ex.passthrough else None)
    ex.record.ttfb_ms = ex.elapsed_ms()
    if ex.passthrough:
        rewrite = model_rewrite(ex.route.upstream_model, ex.request.model)
        changed = rewrite is not None and rewrite.in_object(obj)
        shown = await conversation.shown_id(ex, resp.id, gw.conversations) if ex.keep else None
        if shown is not None and isinstance(obj, dict):
            obj["id"], changed = shown, True
        out = orjson.dumps(obj) if changed else raw
        answer = obj
    else:
        ctx = EncodeContext(model=ex.request.model, request=ex.request, body=ex.body)
        answer = ex.client.render_response(resp, ctx)
        out = orjson.dumps(answer)  # once, for the client and the log
    if ex.keep and isinstance(answer, dict):
        conversation.keep(ex, answer, resp.id, gw.conversations)
    ex.record.response_body = gw.log.keep_body(out)
    finish(gw.log, ex, 200, usage=resp.usage, end=resp.finish)
    return raw_json_response(out, 200)
