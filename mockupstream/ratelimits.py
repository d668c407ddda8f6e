"""Per-account rate limits, as the providers keep them: a window per API key, both header families, 429s.

An account (an API key) is limited when its key carries the marker ``rl<R>r[<T>t][<W>s]`` between
dashes or underscores (``sk-a-rl5r-1``: 5 requests per 60 s; ``sk-rl20r40000t10s-b``: 20 requests
and 40,000 tokens per 10 s), or when ``POST /_mock/ratelimits`` has set limits for every key
without a marker (``{"requests": 20, "tokens": 40000, "window": 60}``; ``{}`` lifts them).
``GET /_mock/ratelimits`` shows the defaults and each key's window (by its last 4 characters);
``POST /_mock/reset`` starts every window afresh and lifts the defaults.

A window opens with the key's first request and lasts ``W`` seconds. A request counts one request
and its input tokens (the mock's own usage figure: characters of its text // 4). Every answer of a
limited key carries what is left, in the family of the endpoint's protocol:

- ``/v1/messages``: ``anthropic-ratelimit-{requests,tokens,input-tokens,output-tokens}-{limit,remaining,reset}``,
  the reset an RFC 3339 time;
- ``/v1/chat/completions`` and ``/v1/responses``: ``x-ratelimit-{limit,remaining,reset}-{requests,tokens}``,
  the reset a duration (``1s``, ``6m0s``, ``20ms``).

A request past either limit gets the provider's 429 (its protocol's error envelope, type
``rate_limit_error``) with ``retry-after`` in whole seconds until the window ends, and the same
headers; it is not counted.
"""

from __future__ import annotations

import datetime as dt
import math
import re
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import orjson
from aiohttp import web

from translation.protocol import ProtocolModule

_MARKER = re.compile(r"(?:^|[-_])rl(\d+)r(?:(\d+)t)?(?:(\d+)s)?(?=$|[-_])")
DEFAULT_WINDOW = 60.0
UNLIMITED_TOKENS = 10**9
# Where an admitted request's headers wait for its response.
HEADERS_KEY = web.RequestKey("mock_ratelimit_headers", dict[str, str])


@dataclass(frozen=True)
class Limits:
    requests: int
    tokens: int = UNLIMITED_TOKENS
    window: float = DEFAULT_WINDOW


@dataclass
class Window:
    limits: Limits
    opened: float
    requests: int = 0
    tokens: int = 0

    @property
    def ends(self) -> float:
        return self.opened + self.limits.window


@dataclass
class RateLimits:
    default: Limits | None = None
    windows: dict[str, Window] = field(default_factory=dict)  # by API key
    refused: int = 0
    clock: Callable[[], float] = time.time

    def limits_for(self, key: str) -> Limits | None:
        if match := _MARKER.search(key):
            return Limits(int(match[1]), int(match[2]) if match[2] else UNLIMITED_TOKENS,
                          float(match[3]) if match[3] else DEFAULT_WINDOW)
        return self.default

    def admit(self, key: str, tokens: int) -> tuple[bool, Window | None]:
        """Count a request of ``tokens`` input tokens against ``key``'s window; False when over a limit."""

        limits = self.limits_for(key)
        if limits is None:
            return True, None
        now = self.clock()
        window = self.windows.get(key)
        if window is None or window.ends <= now or window.limits != limits:
            window = self.windows[key] = Window(limits, now)
        if window.requests + 1 > limits.requests or window.tokens + tokens > limits.tokens:
            self.refused += 1
            return False, window
        window.requests += 1
        window.tokens += tokens
        return True, window

    def reset(self) -> None:
        self.default = None
        self.windows.clear()
        self.refused = 0

    def stats(self) -> dict[str, Any]:
        now = self.clock()
        return {"default": vars(self.default) if self.default else None, "refused": self.refused,
                "windows": {"..." + key[-4:]: {"requests": w.requests, "tokens": w.tokens,
                                               "resets_in": round(max(0.0, w.ends - now), 3)}
                            for key, w in self.windows.items() if len(key) >= 8}}


def headers(window: Window, protocol: str, now: float) -> dict[str, str]:
    limits = window.limits
    left_requests = max(0, limits.requests - window.requests)
    left_tokens = max(0, limits.tokens - window.tokens)
    if protocol == "anthropic":
        reset = dt.datetime.fromtimestamp(math.ceil(window.ends), dt.timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")
        out: dict[str, str] = {}
        for name, limit, left in (("requests", limits.requests, left_requests), ("tokens", limits.tokens, left_tokens),
                                  ("input-tokens", limits.tokens, left_tokens),
                                  ("output-tokens", limits.tokens, limits.tokens)):
            out |= {f"anthropic-ratelimit-{name}-limit": str(limit),
                    f"anthropic-ratelimit-{name}-remaining": str(left),
                    f"anthropic-ratelimit-{name}-reset": reset}
        return out
    wait = go_duration(max(0.0, window.ends - now))
    return {"x-ratelimit-limit-requests": str(limits.requests), "x-ratelimit-remaining-requests": str(left_requests),
            "x-ratelimit-reset-requests": wait, "x-ratelimit-limit-tokens": str(limits.tokens),
            "x-ratelimit-remaining-tokens": str(left_tokens), "x-ratelimit-reset-tokens": wait}


def go_duration(seconds: float) -> str:
    """OpenAI's form (Go's ``time.Duration``): ``20ms``, ``1.5s``, ``6m0s``, ``1h2m3s``."""

    if seconds < 1:
        return f"{round(seconds * 1000)}ms"
    hours, rest = divmod(seconds, 3600)
    minutes, secs = divmod(rest, 60)
    text = f"{secs:.3f}".rstrip("0").rstrip(".") + "s"
    if hours:
        return f"{int(hours)}h{int(minutes)}m{text}"
    return f"{int(minutes)}m{text}" if minutes else text


# ----------------------------------------------------------------- the server's hook

STATE = web.AppKey("mock_ratelimits", RateLimits)


def install(app: web.Application) -> None:
    app[STATE] = RateLimits()
    app.on_response_prepare.append(_add_headers)
    app.router.add_get("/_mock/ratelimits", _show)
    app.router.add_post("/_mock/ratelimits", _set_default)


def admit(request: web.Request, key: str, proto: ProtocolModule, input_tokens: int) -> web.Response | None:
    """The 429 for a request over its key's limits, or None (its answer then carries the headers)."""

    state = request.app[STATE]
    ok, window = state.admit(key, input_tokens)
    if window is None:
        return None
    found = headers(window, proto.NAME, state.clock())
    if ok:
        request[HEADERS_KEY] = found
        return None
    wait = max(1, math.ceil(window.ends - state.clock()))
    body = proto.render_error(429, f"Rate limit reached for this account; try again in {wait}s.", "rate_limit_error")
    err = body.get("error")
    if isinstance(err, dict) and "code" in err:
        err["code"] = "rate_limit_exceeded"
    return web.Response(status=429, body=orjson.dumps(body), content_type="application/json",
                        headers={**found, "retry-after": str(wait)})


async def _add_headers(request: web.Request, response: web.StreamResponse) -> None:
    found = request.get(HEADERS_KEY)
    if found:
        response.headers.update(found)


async def _show(request: web.Request) -> web.Response:
    return web.json_response(request.app[STATE].stats())


async def _set_default(request: web.Request) -> web.Response:
    try:
        body = await request.json()
        state = request.app[STATE]
        state.default = Limits(int(body["requests"]), int(body.get("tokens", UNLIMITED_TOKENS)),
                               float(body.get("window", DEFAULT_WINDOW))) if body else None
        state.windows.clear()
    except (ValueError, KeyError, TypeError):
        return web.json_response({"error": 'expected {"requests": N, "tokens": M, "window": seconds} or {}'},
                                 status=400)
    return web.json_response(state.stats())
