"""What the benchmark sends, and where: the bench config, the routes, raw HTTP requests.

A route is named client→upstream: ``chat→anthropic`` is an OpenAI Chat client
served by the Anthropic-protocol provider. Its baseline is the scripted upstream
called directly in the upstream's protocol, i.e. exactly the call the gateway
makes on the client's behalf.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

from .procs import HOST

CLIENT_KEY = "gw-bench-client-key"
UPSTREAM_KEY = "sk-bench-upstream-account"  # the scripted upstream accepts any key without a fault marker
PROMPT = "Hello! Please answer with a short greeting."
# A small pool per provider, as deployments have: selection (LRU) really chooses. With a single
# account, PostgreSQL's SKIP LOCKED selection answers 503 to requests that arrive while the
# row is locked by another selection (seen in this benchmark; reported, not worked around here).
ACCOUNTS_PER_PROVIDER = 8
SINGLE_ACCOUNT_PROVIDER = "up-chat-single"

SHORT = {"openai_chat": "chat", "anthropic": "anthropic", "responses": "responses"}
PATHS = {"openai_chat": "/v1/chat/completions", "anthropic": "/v1/messages", "responses": "/v1/responses"}
PROVIDERS = {"openai_chat": "up-chat", "anthropic": "up-anthropic", "responses": "up-responses"}
# Marker of each protocol's last stream event: a stream without it did not end properly.
TERMINATORS = {"openai_chat": "[DONE]", "anthropic": "message_stop", "responses": "response.completed"}

TEXT_MODEL = "mock-text"  # 6 text deltas, or one JSON answer
STREAM_MODEL = "mock-slow-20x0"  # 20 deltas, no pause: streams/s
PACED_MODEL = "mock-slow-64x20"  # 64 deltas, 20 ms apart: time to first byte and gaps


@dataclass(frozen=True)
class Route:
    client: str
    upstream: str

    @property
    def name(self) -> str:
        return f"{SHORT[self.client]}→{SHORT[self.upstream]}"


ROUTES = [Route("openai_chat", "openai_chat"), Route("openai_chat", "anthropic"),
          Route("anthropic", "openai_chat"), Route("responses", "openai_chat")]
UPSTREAMS = sorted({r.upstream for r in ROUTES})


def bench_config(upstream_url: str) -> str:
    """The gateway's config (TOML for ``loadconfig``): one provider per upstream protocol, one client key.

    The glob aliases are what a real deployment has; the benchmark's models
    (``up-chat/mock-text``) miss them and resolve by provider prefix, so each
    request also pays the alias scan.
    """

    lines = []
    for proto, name in PROVIDERS.items():
        lines += ["[[providers]]", f'name = "{name}"', f'protocol = "{proto}"',
                  f'base_url = "{upstream_url}/v1"', "models = []",
                  "first_byte_timeout = 30.0", "idle_timeout = 30.0", ""]
        for i in range(1, ACCOUNTS_PER_PROVIDER + 1):
            lines += ["[[providers.accounts]]", f'label = "bench-{i}"', f'api_key = "{UPSTREAM_KEY}-{proto}-{i}"', ""]
    # The same upstream behind a one-account pool, to show what selection does without spare accounts.
    lines += ["[[providers]]", f'name = "{SINGLE_ACCOUNT_PROVIDER}"', 'protocol = "openai_chat"',
              f'base_url = "{upstream_url}/v1"', "models = []", "[[providers.accounts]]", 'label = "only"',
              f'api_key = "{UPSTREAM_KEY}-single"', ""]
    for pattern, provider in (("claude-*", "up-anthropic"), ("gpt-5*", "up-responses"),
                              ("gpt-4*", "up-chat"), ("o3*", "up-responses")):
        lines += ["[[aliases]]", f'name = "{pattern}"', f'provider = "{provider}"', 'model = "*"', ""]
    lines += ["[[client_keys]]", 'name = "bench"', f'key = "{CLIENT_KEY}"', ""]
    return "\n".join(lines)


def body(proto: str, model: str, stream: bool) -> dict[str, Any]:
    messages = [{"role": "user", "content": PROMPT}]
    if proto == "anthropic":
        return {"model": model, "max_tokens": 512, "messages": messages, "stream": stream}
    if proto == "responses":
        return {"model": model, "input": PROMPT, "stream": stream}
    return {"model": model, "messages": messages, "stream": stream}


def raw_request(port: int, path: str, payload: dict[str, Any], key: str) -> str:
    data = json.dumps(payload, separators=(",", ":"))
    return (f"POST {path} HTTP/1.1\r\nHost: {HOST}:{port}\r\nContent-Type: application/json\r\n"
            f"Authorization: Bearer {key}\r\nAccept: */*\r\nContent-Length: {len(data)}\r\n\r\n{data}")


def target(name: str, port: int, proto: str, model: str, stream: bool, key: str) -> dict[str, Any]:
    """A load-generator target (see ``bench.loadgen.Target``)."""

    return {"name": name, "host": HOST, "port": port,
            "request": raw_request(port, PATHS[proto], body(proto, model, stream), key),
            "terminator": TERMINATORS[proto] if stream else None}


def gateway_target(route: Route, port: int, model: str, stream: bool, provider: str | None = None) -> dict[str, Any]:
    return target(f"gateway {route.name}", port, route.client,
                  f"{provider or PROVIDERS[route.upstream]}/{model}", stream, CLIENT_KEY)


def direct_target(upstream: str, port: int, model: str, stream: bool) -> dict[str, Any]:
    return target(f"direct {SHORT[upstream]}", port, upstream, model, stream, f"{UPSTREAM_KEY}-{upstream}")


def relay_target(upstream: str, port: int, model: str, stream: bool) -> dict[str, Any]:
    return target(f"bare relay {SHORT[upstream]}", port, upstream, model, stream, f"{UPSTREAM_KEY}-{upstream}")
