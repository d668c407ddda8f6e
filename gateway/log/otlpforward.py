"""Telemetry exports forwarded as they came to the OTLP/HTTP collector ops configure
(``GATEWAY_OTLP_FORWARD_URL``): in the background, never holding the client's answer, at most
``MAX_IN_FLIGHT`` at once (past that an export is dropped and counted: a collector that is down must
not pile up the gateway's memory)."""

from __future__ import annotations

import asyncio
import logging

import aiohttp

log = logging.getLogger(__name__)

MAX_IN_FLIGHT = 64
TIMEOUT = 10.0


def parse_headers(text: str) -> dict[str, str]:
    """``"Name=value,Name2=value2"`` (OTEL_EXPORTER_OTLP_HEADERS' form) → a mapping."""

    out = {}
    for part in text.split(","):
        name, sep, value = part.partition("=")
        if sep and name.strip():
            out[name.strip()] = value.strip()
    return out


class OtlpForwarder:
    def __init__(self, base_url: str, headers: dict[str, str] | None = None) -> None:
        self.base_url = base_url.rstrip("/")
        self.headers = headers or {}
        self.dropped = 0
        self.failed = 0
        self._session: aiohttp.ClientSession | None = None
        self._tasks: set[asyncio.Task[None]] = set()

    @property
    def enabled(self) -> bool:
        return bool(self.base_url)

    def send(self, signal: str, body: bytes, content_type: str) -> None:
        if not self.enabled:
            return
        if len(self._tasks) >= MAX_IN_FLIGHT:
            self.dropped += 1
            return
        task = asyncio.get_running_loop().create_task(self._post(signal, body, content_type))
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    async def _post(self, signal: str, body: bytes, content_type: str) -> None:
        if self._session is None:
            self._session = aiohttp.ClientSession(timeout=aiohttp.ClientTimeout(total=TIMEOUT))
        try:
            async with self._session.post(f"{self.base_url}/v1/{signal}", data=body, allow_redirects=False,
                                          headers={**self.headers, "content-type": content_type}) as resp:
                await resp.read()
                if resp.status >= 300:
                    self.failed += 1
                    log.warning("OTLP collector answered %s to a %s export", resp.status, signal)
        except (aiohttp.ClientError, asyncio.TimeoutError, OSError) as exc:
            self.failed += 1
            log.warning("OTLP collector unreachable for a %s export (%s)", signal, type(exc).__name__)

    async def aclose(self) -> None:
        await asyncio.gather(*self._tasks, return_exceptions=True)
        if self._session is not None:
            await self._session.close()
