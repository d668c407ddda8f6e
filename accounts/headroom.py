"""What an account has left of its provider's rate limits, as the provider said it: pure, no I/O.

Every answer of the providers carries its account's rate limits in one of two header families:

- Anthropic: ``anthropic-ratelimit-{requests,tokens,input-tokens,output-tokens}-{limit,remaining,reset}``,
  the reset an RFC 3339 time (docs.anthropic.com, "Rate limits", response headers);
- OpenAI: ``x-ratelimit-{limit,remaining,reset}-{requests,tokens}``, the reset a duration such as
  ``1s``, ``6m0s`` or ``20ms`` (platform.openai.com, "Rate limits", rate-limit headers).

:func:`parse` reads either into :class:`Limit` s by kind (``requests``, ``tokens``, ``input_tokens``,
``output_tokens``); a :class:`Headroom` holds them with the time they were reported and, after a
429, the time its ``retry-after`` named. :meth:`Headroom.short_until` says whether a request of a
given :class:`Need` would take the account past what it has left, and until when. A limit whose
reset has passed is full again; one reported without a reset counts for :data:`UNTIMED_SECONDS`.

What a request needs: one request, its estimated input tokens (``gateway.limits.estimate``: on
the high side) of the ``tokens`` and ``input_tokens`` limits, and one output token. Not its
``max_tokens``: Claude Code asks for 32,000 output tokens on every turn, more than the output
tokens per minute of Anthropic's first tiers, and is served — the provider checks what is left,
not the cap.
"""

from __future__ import annotations

import datetime as dt
import email.utils
import functools
import re
import time
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

KINDS = ("requests", "tokens", "input_tokens", "output_tokens")
UNTIMED_SECONDS = 60.0  # a limit reported without a reset time is believed this long
_ANTHROPIC = {"requests": "requests", "tokens": "tokens", "input_tokens": "input-tokens",
              "output_tokens": "output-tokens"}
_OPENAI = {"requests": "requests", "tokens": "tokens"}
_DURATION = re.compile(r"(\d+(?:\.\d+)?)(ms|us|µs|ns|h|m|s)")
_UNIT = {"h": 3600.0, "m": 60.0, "s": 1.0, "ms": 1e-3, "us": 1e-6, "µs": 1e-6, "ns": 1e-9}


@dataclass
class Limit:
    remaining: int
    reset_at: float  # Unix seconds; 0: not said
    limit: int | None = None


@dataclass(frozen=True)
class Need:
    """What one request takes of an account's limits."""

    input_tokens: int = 0
    requests: int = 1
    output_tokens: int = 1

    def of(self, kind: str) -> int:
        if kind == "requests":
            return self.requests
        if kind == "output_tokens":
            return self.output_tokens
        return self.input_tokens  # tokens, input_tokens


@dataclass
class Headroom:
    at: float  # when the provider reported it (Unix seconds)
    limits: dict[str, Limit] = field(default_factory=dict)
    blocked_until: float = 0.0  # a 429's retry-after

    def short_until(self, need: Need, now: float) -> float | None:
        """When the account can take a request of ``need`` again; None: it can now."""

        if self.blocked_until > now:
            return self.blocked_until
        until: float | None = None
        for kind, limit in self.limits.items():
            ends = limit.reset_at or self.at + UNTIMED_SECONDS
            if ends > now and limit.remaining < need.of(kind):
                until = max(until or 0.0, ends)
        return until

    def charge(self, need: Need) -> None:
        """A request was sent: take what it needs from what is left until the next report says better."""

        for kind, limit in self.limits.items():
            limit.remaining -= need.of(kind)

    def to_json(self) -> dict[str, Any]:
        return {"at": self.at, "blocked_until": self.blocked_until,
                "limits": {k: [v.remaining, v.reset_at, v.limit] for k, v in self.limits.items()}}

    @classmethod
    def from_json(cls, data: Any) -> Headroom | None:
        """The form :meth:`to_json` wrote (from Redis, from the database); None for anything else."""

        try:
            limits = {str(k): Limit(int(v[0]), float(v[1]), None if v[2] is None else int(v[2]))
                      for k, v in data["limits"].items() if k in KINDS}
            return cls(float(data["at"]), limits, float(data.get("blocked_until") or 0.0))
        except (KeyError, TypeError, ValueError, IndexError, AttributeError):
            return None


# (kind, remaining, reset, limit) header names of each family, spelt once: every answer is read.
_ANTHROPIC_HEADERS = tuple((kind, f"anthropic-ratelimit-{name}-remaining", f"anthropic-ratelimit-{name}-reset",
                            f"anthropic-ratelimit-{name}-limit") for kind, name in _ANTHROPIC.items())
_OPENAI_HEADERS = tuple((kind, f"x-ratelimit-remaining-{name}", f"x-ratelimit-reset-{name}",
                         f"x-ratelimit-limit-{name}") for kind, name in _OPENAI.items())


def parse(headers: Mapping[str, str], now: float | None = None) -> dict[str, Limit]:
    """The limits an answer's headers report, by kind (empty when it reports none)."""

    now = time.time() if now is None else now
    out: dict[str, Limit] = {}
    for kind, remaining_name, reset_name, limit_name in _ANTHROPIC_HEADERS:
        remaining = _int(headers.get(remaining_name))
        if remaining is not None:
            out[kind] = Limit(remaining, _rfc3339(headers.get(reset_name)), _int(headers.get(limit_name)))
    for kind, remaining_name, reset_name, limit_name in _OPENAI_HEADERS:
        remaining = _int(headers.get(remaining_name))
        if remaining is not None and kind not in out:
            seconds = duration(headers.get(reset_name))
            out[kind] = Limit(remaining, now + seconds if seconds is not None else 0.0, _int(headers.get(limit_name)))
    return out


def retry_after(headers: Mapping[str, str], now: float | None = None) -> float | None:
    """The Unix time a ``retry-after`` header names (seconds, or an HTTP date), or None."""

    now = time.time() if now is None else now
    value = (headers.get("retry-after") or "").strip()
    if not value:
        return None
    try:
        return now + max(0.0, float(value))
    except ValueError:
        pass
    try:
        parsed = email.utils.parsedate_to_datetime(value)
    except (TypeError, ValueError):
        return None
    return parsed.timestamp() if parsed.tzinfo else None


@functools.lru_cache(maxsize=1024)  # an account's answers repeat their resets; parsing one is most of a read
def duration(value: str | None) -> float | None:
    """OpenAI's reset durations (Go's form): ``1s``, ``6m0s``, ``20ms``, ``1h2m3.5s``; a bare number is seconds."""

    if not value:
        return None
    value = value.strip()
    try:
        return max(0.0, float(value))
    except ValueError:
        pass
    parts = _DURATION.findall(value)
    if not parts or "".join(n + u for n, u in parts) != value:
        return None
    return sum(float(n) * _UNIT[u] for n, u in parts)


@functools.lru_cache(maxsize=1024)
def _rfc3339(value: str | None) -> float:
    if not value:
        return 0.0
    try:
        when = dt.datetime.fromisoformat(value.strip().replace("Z", "+00:00"))
    except ValueError:
        return 0.0
    return when.timestamp() if when.tzinfo else 0.0


def _int(value: str | None) -> int | None:
    if value is None:
        return None
    try:
        return int(value)  # surrounding whitespace allowed
    except ValueError:
        try:
            return int(float(value))
        except ValueError:
            return None


def summary(data: Any, now: float | None = None) -> str:
    """The stored headroom as ops read it: ``requests 12/50, tokens 3,400/40,000 (reset in 14 s)``."""

    headroom = Headroom.from_json(data) if data is not None else None
    if headroom is None:
        return ""
    now = time.time() if now is None else now
    parts = []
    if headroom.blocked_until > now:
        parts.append(f"refused (429) for {headroom.blocked_until - now:.0f} s more")
    for kind in KINDS:
        limit = headroom.limits.get(kind)
        if limit is None:
            continue
        if limit.reset_at and limit.reset_at <= now:
            parts.append(f"{kind.replace('_', ' ')} full again")
            continue
        of = f"/{limit.limit:,}" if limit.limit is not None else ""
        reset = f" (reset in {limit.reset_at - now:.0f} s)" if limit.reset_at else ""
        parts.append(f"{kind.replace('_', ' ')} {max(limit.remaining, 0):,}{of}{reset}")
    return ", ".join(parts)
