"""The dispatch loop: pick an account, call the upstream, classify, retry — one loop for all nine paths.

When client and upstream speak the same protocol the exchange is a passthrough:
the client's body goes up (model replaced), and the upstream's JSON, SSE events
and error bodies come back as they are (``translation.passthrough`` says what
the one rewrite is), while a tap — the same decoder — reads usage, finish and
errors beside them. Otherwise both directions are translated through the IR.

Retrying is possible until the first byte has gone to the client. A streaming
upstream is therefore read until its first content event before the response
is committed; an error before that (HTTP status, in-stream error event,
network failure, silence past the idle timeout) is classified exactly like a
non-2xx answer. After the commit, a failure ends the stream cleanly in the
client's protocol (the encoder's error ending).
"""

from __future__ import annotations

import asyncio
import dataclasses
import datetime as dt
import email.utils
import functools
import logging
import time
import weakref
from collections.abc import AsyncGenerator, Callable, Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, NoReturn

import orjson
from django.utils import timezone

from accounts.headroom import Need
from accounts.outcomes import ErrorClass, Verdict
from accounts.redact import redact
from accounts.rules import classify
from signin import hints
from translation import ir, registry, sse
from translation.fold import Folder
from translation.passthrough import model_rewrite
from translation.protocol import EncodeContext, ProtocolModule

from ..edge.responses import ApiResponse, EventStream, raw_json_response
from ..errors import (
    InvalidRequest,
    NestingTooDeep,
    NoAccounts,
    UpstreamFailed,
    UpstreamUnavailable,
    passable,
    upstream_message,
)
from ..limits import Hold
from ..limits.estimate import input_tokens_of
from ..log.record import Attempt, LogRecord
from ..log.streamlog import SPELLED, SpelledText, kept_stream
from ..log.writer import LogWriter
from ..state import KeyInfo
from . import conversation
from .clientstream import ClientStream, Encoding, Forwarding
from .forwarding import Forwarded, forwarded, passed_back
from .neterrors import NetworkFailure, client_message, failure_kind, trace_text
from .relay import (
    TIMEOUT,
    Batch,
    Bounds,
    Decoding,
    OpenStreams,
    Reader,
    Tapping,
    UpstreamStream,
    read_until_content,
)
from .routing import Route
from .session import Session
from .upstream import NETWORK_ERRORS, Headers, TooLarge, UpstreamResponse, UpstreamTarget

if TYPE_CHECKING:
    from ..app import Gateway

log = logging.getLogger(__name__)

ERROR_BODY_LIMIT = 64 * 1024
# What a stream whose client has left is read on for, at most, besides the time: a model writes far less
# in the few seconds a drain lasts; an upstream that streams faster is not read on at will.
DRAIN_BYTES = 1024 * 1024
PING = b'event: ping\ndata: {"type": "ping"}\n\n'  # Anthropic's keepalive event, as its API sends it


@dataclass
class Exchange:
    """One client request on its way through the gateway."""

    request_id: str
    client: ProtocolModule
    key: KeyInfo
    body: dict[str, Any]
    request: ir.Request
    route: Route
    # The client's headers and query string: what of them reaches the upstream is gateway.exchange.forwarding's call.
    headers: Mapping[str, str] = field(default_factory=dict)
    query: str = ""
    # Responses: the conversation previous_response_id names, and whether the answer is kept (gateway.exchange.conversation).
    previous: conversation.Previous | None = None
    keep: bool = False
    # Where on the provider the body goes when not the protocol's own PATH (``/responses/compact``).
    upstream_path: str | None = None
    started: float = field(default_factory=time.monotonic)
    record: LogRecord = field(init=False)
    # What the request holds against its key's limits; whoever ends the request settles it.
    hold: Hold | None = field(default=None, init=False)
    # The conversation the request belongs to (gateway.exchange.session) and the account that served it last.
    session: Session | None = None
    session_account: int | None = field(default=None, init=False)
    # The account whose concurrency slot the request holds, given back when it ends (gateway.exchange.selection).
    release: Callable[[], None] | None = field(default=None, init=False)
    # What goes upstream (the body with any conversation written out) and its size in bytes: what the
    # input is estimated from, for the accounts' rate limits and when a stream ends before the upstream
    # says what it used.
    sent: tuple[dict[str, Any], int] | None = field(default=None, init=False)

    def __post_init__(self) -> None:
        self.record = LogRecord(
            request_id=self.request_id, client_protocol=self.client.NAME, client_key_id=self.key.id,
            client_key_name=self.key.name, upstream_protocol=self.route.provider.protocol,
            provider_id=self.route.provider.id, model_requested=self.request.model,
            model_sent=self.route.upstream_model, stream=self.request.stream,
            user_id=self.key.user_id, team_id=self.key.team_id, surface=self.key.surface,
            **hints.read(self.headers),
        )

    def elapsed_ms(self) -> int:
        return int((time.monotonic() - self.started) * 1000)

    def input_estimate(self) -> int:
        body, size = self.sent if self.sent is not None else (self.body, len(sse.dumps(self.body)))
        return input_tokens_of(self.client.NAME, body, size)

    def settle(self) -> None:
        """The request has ended: its slot and reservations go back, charged with what its record shows."""

        hold, self.hold = self.hold, None
        if hold is not None:
            hold.settle(self.record)
        self.let_go()

    def let_go(self) -> None:
        """Give back the account slot the request holds (its attempt ended)."""

        release, self.release = self.release, None
        if release is not None:
            release()

    @functools.cached_property
    def need(self) -> Need:
        """What the request takes of an account's rate limits (asked only when some are known)."""

        return Need(input_tokens=self.input_estimate())

    @property
    def previous_account(self) -> int | None:
        """The account that answered the stored response this request continues, on this provider."""

        if self.previous is None:
            return None
        last = self.previous.entries[-1]
        return last.account_id if last.provider_id == self.route.provider.id and last.account_id else None

    @property
    def passthrough(self) -> bool:
        return self.route.provider.protocol == self.client.NAME


class _Retry(Exception):
    """This attempt failed in a way another account may fix, for the client if every account fails so:
    ``unreachable``, a network failure's kind (the attempt trace keeps the details); ``failure``, the
    upstream's error as the client would get it, when the upstream answered one."""

    def __init__(self, unreachable: NetworkFailure | None = None, failure: UpstreamFailed | None = None) -> None:
        super().__init__(unreachable)
        self.unreachable = unreachable
        self.failure = failure


def upstream_request(ex: Exchange, proto: ProtocolModule, account_id: int = 0) -> tuple[bytes, Forwarded]:
    """The upstream's body, and the headers and query string that go with it; ``account_id``: the
    account it goes to, which matters only to a passthrough that continues a stored conversation."""

    provider, model = ex.route.provider, ex.route.upstream_model
    if ex.passthrough:
        # Same protocol: the client's own body, so fields we don't model still reach the upstream.
        client_body = ex.body
        if ex.previous is not None:
            client_body = ex.previous.passthrough_body(ex.body, provider.id, account_id)
        body = proto.passthrough_request(client_body, model, provider.caps)
        betas: list[str] = []
    else:
        try:
            body = proto.build_request(ex.request, model, provider.caps)
        except ir.InvalidRequest as exc:  # something the upstream's protocol cannot carry
            raise InvalidRequest(exc.message, exc.param) from exc
        betas = proto.required_betas(body)
        cache_key(body, provider.protocol, ex.session)
    fwd = forwarded(ex.headers, ex.query, ex.client.NAME, provider.protocol, betas, provider.caps.request_tags)
    try:
        return sse.dumps(body).encode(), fwd
    except TypeError as exc:
        # Refused here, where the body is serialised anyway, not by a second dump of every body.
        raise NestingTooDeep from exc


# Upstreams that route their prompt cache by a ``prompt_cache_key`` (OpenAI's Chat and Responses).
CACHE_KEYED = frozenset({"openai_chat", "responses"})


def cache_key(body: dict[str, Any], upstream: str, session: Session | None) -> None:
    """A translated request to an OpenAI-protocol upstream carries its session as ``prompt_cache_key``
    (a Claude Code conversation has its turns cached together there, as Codex's are): the session's
    digest, never the client's own id. A key the client set itself is kept."""

    if session is not None and upstream in CACHE_KEYED and not body.get("prompt_cache_key"):
        body["prompt_cache_key"] = session.hex


async def dispatch(gw: Gateway, ex: Exchange) -> ApiResponse:
    provider = ex.route.provider
    proto = registry.get(provider.protocol)
    body, fwd = upstream_request(ex, proto)
    per_account = ex.passthrough and ex.previous is not None  # the previous response's account gets its id
    tried: list[int] = []
    last_network_error: NetworkFailure | None = None
    last_failure: UpstreamFailed | None = None
    ex.let_go()  # a slot an earlier dispatch of this exchange held (compaction's summary first)
    for _ in range(gw.options.max_attempts):
        account = await gw.selector.pick(ex, tried)
        if account is None:
            break
        ex.release = functools.partial(gw.selector.release, account.pk)
        tried.append(account.pk)
        ex.record.account_id = account.pk
        if per_account:
            body, fwd = upstream_request(ex, proto, account.pk)
        secret = account.get_secret()
        attempt = Attempt(account.pk, account.label, None, Verdict.OK, 0)
        ex.record.attempts.append(attempt)
        t0 = time.monotonic()
        try:
            return await _attempt(gw, ex, proto, UpstreamTarget(provider, secret, ex.upstream_path or proto.PATH, fwd),
                                  body, attempt, secret)
        except _Retry as retry:
            ex.let_go()
            last_network_error, last_failure = retry.unreachable, retry.failure
            continue
        finally:
            attempt.latency_ms = int((time.monotonic() - t0) * 1000)
    if last_network_error is not None:
        # Only the kind: aiohttp's text names the upstream's host and port, which the client must not learn.
        raise UpstreamUnavailable(client_message(last_network_error))
    if last_failure is not None and last_failure.upstream_status >= 500:
        # The upstream itself failing (a 5xx, Anthropic's 529 overloaded) on the last account tried:
        # the client hears what it said, as before such answers were retried, not "no accounts".
        raise last_failure
    raise NoAccounts("No active upstream accounts are available for this model; try again later")


async def _attempt(gw: Gateway, ex: Exchange, proto: ProtocolModule, target: UpstreamTarget, body: bytes,
                   attempt: Attempt, secret: str) -> ApiResponse:
    provider = target.provider
    try:
        response = await gw.upstream.send(target, body)
    except NETWORK_ERRORS as exc:
        attempt.verdict, attempt.error = Verdict.NETWORK, trace_text(exc, [secret])
        raise _Retry(failure_kind(exc)) from exc
    attempt.status = response.status_code
    gw.selector.headroom.observe(provider.id, attempt.account_id or 0, response.status_code, response.headers)
    if response.status_code >= 400:
        raw = await _read_capped(response, provider.first_byte_timeout)
        err = proto.parse_error(response.status_code, raw)
        await _judge(gw, ex, attempt, err, raw.decode("utf-8", "replace"), secret, response.headers,
                     raw if ex.passthrough else None)
    if ex.request.stream:
        return await _open_stream(gw, ex, proto, response, attempt, secret)
    return await _json(gw, ex, proto, response, attempt, secret)


async def _judge(gw: Gateway, ex: Exchange, attempt: Attempt, err: ir.Error, text: str, secret: str,
                 headers: Headers | None = None, raw: bytes | None = None) -> NoReturn:
    """Apply the classifier's verdict to a failed attempt: raise _Retry or the client's error.

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
                              excerpt=redact(text or err.message, [secret]), cooldown_until=_retry_after(headers),
                              retest_after=ruling.retest_after)
        raise _Retry(failure=failure)
    if ruling.action == Verdict.RETRY:
        raise _Retry(failure=failure)
    raise failure


def _retry_after(headers: Headers | None) -> dt.datetime | None:
    value = headers.get("retry-after") if headers is not None else None
    if not value:
        return None
    try:
        return timezone.now() + dt.timedelta(seconds=float(value))
    except ValueError:
        parsed = email.utils.parsedate_to_datetime(value) if value else None
        return parsed if parsed and parsed.tzinfo else None


async def _read_capped(response: UpstreamResponse, timeout: float) -> bytes:
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


async def _json(gw: Gateway, ex: Exchange, proto: ProtocolModule, response: UpstreamResponse,
                attempt: Attempt, secret: str) -> ApiResponse:
    provider = ex.route.provider
    try:
        async with asyncio.timeout(provider.first_byte_timeout + provider.idle_timeout):
            raw = await response.read_within(gw.options.max_upstream_bytes)
    except NETWORK_ERRORS as exc:
        attempt.verdict, attempt.error = Verdict.NETWORK, trace_text(exc, [secret])
        raise _Retry(failure_kind(exc)) from exc
    except TooLarge as exc:
        attempt.verdict, attempt.error = Verdict.MALFORMED, str(exc)
        raise _Retry from exc
    finally:
        await response.aclose()
    try:
        obj = sse.loads(raw)
        resp = proto.parse_response(obj)
        if sum(len(block.text) for block in resp.blocks) > gw.options.max_answer_chars:
            raise TooLarge(f"the upstream's answer exceeds {gw.options.max_answer_chars} characters of text")
    except (ValueError, ir.DecodeError, TooLarge) as exc:
        attempt.verdict, attempt.error = Verdict.MALFORMED, redact(str(exc), [secret])
        raise _Retry from exc
    if resp.error is not None:
        await _judge(gw, ex, attempt, resp.error, "", secret, None, raw if ex.passthrough else None)
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
    _finish_record(ex, 200, resp.usage, resp.finish)
    ex.record.response_body = gw.log.keep_body(out)
    gw.log.submit(ex.record)
    return raw_json_response(out, 200)


async def _open_stream(gw: Gateway, ex: Exchange, proto: ProtocolModule, response: UpstreamResponse,
                       attempt: Attempt, secret: str) -> EventStream:
    provider = ex.route.provider
    reader: Reader
    client: ClientStream
    if ex.passthrough:
        tap = proto.stream_tap(model_rewrite(ex.route.upstream_model, ex.request.model), ex.request.model)
        reader, client = Tapping(tap, secret), Forwarding(tap)
    else:
        reader = Decoding(proto.stream_decoder(), secret)
        client = Encoding(ex.client.stream_encoder(EncodeContext(model=ex.request.model, request=ex.request,
                                                                 body=ex.body)))
    keepalive = gw.options.keepalive_seconds
    bounds = Bounds(gw.options.max_upstream_event_bytes, gw.options.max_upstream_bytes, gw.options.max_answer_chars)
    stream = UpstreamStream(response, reader, provider.idle_timeout, gw.streams, bounds)
    try:
        first, why = await read_until_content(stream, keepalive)
    except BaseException:
        stream.close()
        raise
    events = [e for batch in first for e in batch.events]
    if why == "error" and not any(isinstance(e, (ir.BlockStart, ir.BlockDelta)) for e in events):
        stream.close()
        err = next(e for e in events if isinstance(e, ir.Error))
        if err.transport:
            attempt.verdict, attempt.error = Verdict.NETWORK, err.message
            raise _Retry(NetworkFailure.TIMEOUT if err.error_type == ir.TransportFailure.TIMEOUT
                         else NetworkFailure.LOST)
        await _judge(gw, ex, attempt, err, "", secret)
    if ex.keep and isinstance(client, Forwarding):
        upstream_id = next((e.id for e in events if isinstance(e, ir.MessageStart) and e.id), None)
        shown = await conversation.shown_id(ex, upstream_id, gw.conversations)
        if shown is not None and upstream_id is not None:
            client.show_id(upstream_id, shown)
    ex.record.ttfb_ms = ex.elapsed_ms()
    writer = _StreamWriter(ex, stream, client, keepalive, gw.log, gw.conversations,
                           gw.options.abandoned_stream_seconds, gw.streams)
    body = writer.body(first)
    # A body the server never starts iterating (the client left in between) runs no
    # finally: when it is collected, the upstream is still closed and the row still written.
    weakref.finalize(body, writer.abandon)
    return EventStream(body)


class _StreamWriter:
    """Writes the stream for the client, with keepalives, idle timeout and a clean end.

    A stream that ends before the upstream said what it used (the client left, the upstream broke
    off) is still charged: the upstream generated what it sent. When the client leaves, the upstream
    is read on, for at most ``drain`` seconds (and ``DRAIN_BYTES``) without writing anything, for the usage every
    protocol reports at its end (the gateway asks a Chat stream for it); what never comes is
    estimated: the input from what was sent (``gateway.limits.estimate``), the output from the
    deltas read (one token each, or a quarter of their characters if more), and the row says so
    (``usage_estimated``).
    """

    def __init__(self, ex: Exchange, stream: UpstreamStream, client: ClientStream, keepalive: float,
                 log_writer: LogWriter, stored: conversation.Conversations, drain: float = 0.0,
                 streams: OpenStreams | None = None) -> None:
        self.ex = ex
        self.drain = drain
        self.streams = streams
        self.deltas = 0  # content deltas read from the upstream, and their characters
        self.delta_chars = 0
        self.finished = False  # the upstream said how the answer finished
        self.gone = False  # the client left before the end
        self.draining = False  # read on after the client left (_drain)
        self.stored = stored
        self.stream = stream
        self.client = client
        self.keepalive = keepalive
        self.log_writer = log_writer
        self.tap = Folder()
        self.upstream_id: str | None = None  # the upstream's own response id, as its stream gave it
        self.kept = not ex.keep  # nothing to keep, or kept already
        self.status = 200
        self.error_class = ErrorClass.NONE
        self.logged = False
        # The stream outlives api_call, so it ends the request's hold and account slot, not api_call.
        self.hold, ex.hold = ex.hold, None
        self.release, ex.release = ex.release, None
        # The streamed body as sent, kept only with body logging on (and only up to twice the cap).
        limit = log_writer.body_limit
        self.sent: bytearray | None = bytearray() if limit is not None else None
        self.sent_cap = 2 * (limit or 0)
        self.spelled = SpelledText(self.sent_cap) if limit is not None else None  # see gateway.log.streamlog

    def _note(self, events: list[ir.Event]) -> None:
        for event in events:
            if isinstance(event, ir.MessageStart):
                self.upstream_id = self.upstream_id or event.id
                if event.usage is not None:  # Anthropic's input, at the start: counted should the end not come
                    self.tap.feed(event)
            elif isinstance(event, ir.BlockDelta):
                if event.kind in SPELLED:
                    self.deltas += 1
                    self.delta_chars += len(event.text)
                if self.spelled is not None:
                    self.spelled.feed(event)
            elif isinstance(event, (ir.Usage, ir.Finish, ir.Error)):
                if isinstance(event, ir.Finish):
                    self.finished = True
                self.tap.feed(event)
                if isinstance(event, ir.Error):
                    self.error_class = (ErrorClass.SHUTTING_DOWN if self.stream.aborted else
                                        ErrorClass.of_stream_error(event.error_type, event.transport))

    def _sent(self, out: bytes) -> bytes:
        if self.sent is not None and len(self.sent) < self.sent_cap:
            self.sent += out
        return out

    def _feed(self, batch: Batch) -> bytes:
        self._note(batch.events)
        return self._sent(self.client.feed(batch))

    def _fail(self, error: ir.Error) -> bytes:
        self._note([error])
        return self._sent(self.client.fail(error))

    async def body(self, first: list[Batch]) -> AsyncGenerator[bytes, None]:
        stream = self.stream
        try:
            # What one upstream read brought goes out as one write: each write costs the server a
            # message and a syscall, and these events arrived together anyway.
            # Bytes on the wire now, even before the first token.
            opening = b"".join([self._feed(batch) for batch in first])
            if not self.kept:
                self._keep()
            # Silence is filled with SSE comments until the stream has begun; on an Anthropic stream, once its
            # message_start is out, with Anthropic's own ping event: a client's idle timer that counts events
            # (not bytes) sees those, and the SDKs drop them (Claude Code's watchdogs take either).
            pinging = bool(opening) and self.ex.client.NAME == "anthropic"
            yield opening or sse.comment()
            while True:
                wait = min(self.keepalive, stream.idle_timeout - stream.idle_for())
                item = await stream.next(wait)
                if item is None:
                    break
                if item == TIMEOUT:
                    if stream.idle_for() >= stream.idle_timeout:
                        stream.close()
                        yield self._fail(ir.transport_error(ir.TransportFailure.TIMEOUT,
                                                            "upstream stalled past its idle timeout", 504))
                        break
                    yield PING if pinging else sse.comment()
                    continue
                out = self._feed(item)
                if not self.kept:
                    self._keep()
                if out:
                    pinging = self.ex.client.NAME == "anthropic"
                    yield out
            out = self._sent(self.client.finish())
            if not self.kept:
                self._keep()
            if out:
                yield out
        except (asyncio.CancelledError, GeneratorExit):
            self.error_class = self.error_class or ErrorClass.CLIENT_DISCONNECTED
            self.gone = True
            raise
        except Exception:
            # The status line is out, so an escaping exception would leave the client waiting
            # forever (the server cannot answer 500 any more): end the stream, in protocol if we can.
            log.exception("stream to the client failed")
            self.error_class = ErrorClass.INTERNAL
            try:
                yield self.client.fail(ir.Error("The gateway failed while streaming; it has been logged"))
            except Exception:  # noqa: BLE001 - the encoder itself is what failed: just end the body
                pass
        finally:
            if not (self.gone and self.drain > 0 and not self._reported() and not stream.ended
                    and self._drain_later()):
                stream.close()
                self._log()

    def _reported(self) -> bool:
        """Whether the upstream has said how the answer finished and what it used."""

        return self.finished and self.tap.result().usage.output_tokens is not None

    def _drain_later(self) -> bool:
        """Read on in a task of its own; False when there is no loop to run it (then end now)."""

        try:
            task = asyncio.get_running_loop().create_task(self._drain())
        except RuntimeError:
            return False
        self.draining = True  # the body is collected now: its finalizer must leave the stream to the drain
        if self.streams is not None:
            self.streams.keep(task)
        return True

    async def _drain(self) -> None:
        """The client has left: read on (nothing is written) until the upstream reports its usage, the
        stream ends, or ``drain`` seconds pass; then close the upstream and write the row."""

        stream = self.stream
        deadline = time.monotonic() + self.drain
        left = DRAIN_BYTES
        try:
            while not self._reported() and left > 0:
                wait = min(deadline - time.monotonic(), stream.idle_timeout - stream.idle_for())
                if wait <= 0:
                    break
                item = await stream.next(wait)
                if item is None:
                    break
                if item != TIMEOUT:
                    left -= item.size
                    self._note(item.events)
        finally:
            stream.close()
            self._log()

    def _keep(self) -> None:
        """Keep the answer once its whole object is known, before the event that ends it goes out: a
        follow-up the client sends on that event then finds it (in this process's cache at once; on
        another process once committed, which its read waits for)."""

        if self.client.final is not None:
            self.kept = True
            conversation.keep(self.ex, self.client.final, self.upstream_id, self.stored)

    def abandon(self) -> None:
        if not self.logged and not self.draining:
            self.stream.close()
            self.error_class = self.error_class or ErrorClass.CLIENT_DISCONNECTED
            self._log()

    def _log(self) -> None:
        if self.logged:
            return
        self.logged = True
        resp = self.tap.result()
        usage = resp.usage
        if not self._reported():
            usage = _estimated(self.ex, usage, self.deltas, self.delta_chars)
            self.ex.record.usage_estimated = True
        _finish_record(self.ex, self.status, usage, resp.finish)
        if self.error_class:
            self.ex.record.error_class = self.error_class
        if self.sent is not None and self.spelled is not None:
            self.ex.record.response_body = kept_stream(self.log_writer, self.sent.decode("utf-8", "replace"),
                                                       self.spelled)
        self.log_writer.submit(self.ex.record)
        if self.hold is not None:
            self.hold.settle(self.ex.record)
        if self.release is not None:
            self.release()


def _estimated(ex: Exchange, usage: ir.Usage, deltas: int, chars: int) -> ir.Usage:
    """What a stream that ended without the upstream's final usage is charged: what the upstream
    reported so far (Anthropic's input, at the start), the rest estimated."""

    output = max(usage.output_tokens or 0, deltas, chars // 4)
    return dataclasses.replace(usage, input_tokens=usage.input_tokens or ex.input_estimate(), output_tokens=output)


def _finish_record(ex: Exchange, status: int, usage: ir.Usage, finish: ir.Finish | None) -> None:
    rec = ex.record
    rec.status = status
    rec.latency_ms = ex.elapsed_ms()
    rec.input_tokens = usage.input_tokens or 0
    rec.output_tokens = usage.output_tokens or 0
    rec.cached_tokens = usage.cached_tokens or 0
    rec.cache_write_tokens = usage.cache_creation_tokens or 0
    rec.cache_write_1h_tokens = usage.cache_creation_1h_tokens or 0
    rec.reasoning_tokens = usage.reasoning_tokens or 0
    rec.finish_reason = finish.reason.value if finish else ""
