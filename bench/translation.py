"""Stream translation on one core: upstream SSE bytes → SSEParser → decoder → encoder → client bytes.

The upstream bytes are what a real upstream sends: one text block of many word-sized
deltas, written by that protocol's own encoder (so the JSON is the real shape), cut
into one read per event as a streaming upstream delivers them. Every iteration
parses and decodes the JSON, builds IR events, and encodes the client's JSON, so
the figure includes both JSON decode and encode. Single-threaded: the figure is
per core.
"""

from __future__ import annotations

import time
from dataclasses import dataclass

from translation import ir, registry
from translation.protocol import EncodeContext
from translation.sse import SSEParser

TARGET_EVENTS_PER_S = 100_000
DELTAS_PER_STREAM = 200
WORDS = ("The quick brown fox jumps over the lazy dog while the gateway translates every "
         "token of the stream without a pause").split()

# (client, upstream): the three pairs the issue names first, then the rest of the matrix.
NAMED_PAIRS = [("anthropic", "openai_chat"), ("responses", "anthropic"), ("openai_chat", "responses")]
OTHER_PAIRS = [("openai_chat", "openai_chat"), ("anthropic", "anthropic"), ("responses", "responses"),
               ("openai_chat", "anthropic"), ("anthropic", "responses"), ("responses", "openai_chat")]


@dataclass
class CaseResult:
    client: str
    upstream: str
    streams: int
    deltas: int
    seconds: float
    cpu_seconds: float
    bytes_in: int
    bytes_out: int

    @property
    def name(self) -> str:
        return f"{_short(self.upstream)}→{_short(self.client)}"

    @property
    def events_per_s(self) -> float:
        return self.deltas / self.seconds if self.seconds else 0.0

    @property
    def events_per_cpu_s(self) -> float:
        """The same per CPU-second: the per-core figure when other processes share the machine."""

        return self.deltas / self.cpu_seconds if self.cpu_seconds else 0.0

    def as_dict(self) -> dict[str, float | int | str]:
        return {"upstream": self.upstream, "client": self.client, "streams": self.streams,
                "text_delta_events": self.deltas, "seconds": round(self.seconds, 3),
                "cpu_seconds": round(self.cpu_seconds, 3),
                "events_per_s": round(self.events_per_s),
                "events_per_cpu_s": round(self.events_per_cpu_s),
                "ratio_to_target": round(self.events_per_s / TARGET_EVENTS_PER_S, 2),
                "upstream_bytes_per_stream": self.bytes_in, "client_bytes_per_stream": self.bytes_out}


def _short(proto: str) -> str:
    return {"openai_chat": "chat", "anthropic": "anthropic", "responses": "responses"}[proto]


def _ir_stream(deltas: int) -> list[ir.Event]:
    events: list[ir.Event] = [ir.MessageStart(id="msg_bench", model="bench-model",
                                              usage=ir.Usage(input_tokens=42)),
                              ir.BlockStart(0, "text")]
    events += [ir.BlockDelta(0, "text", ("" if i == 0 else " ") + WORDS[i % len(WORDS)])
               for i in range(deltas)]
    events += [ir.BlockStop(0), ir.Usage(input_tokens=42, output_tokens=deltas),
               ir.Finish(ir.FinishReason.STOP)]
    return events


def _request(client: str) -> tuple[ir.Request, dict[str, object]]:
    body: dict[str, object] = {"model": "bench-model", "stream": True, "max_tokens": 1024,
                               "messages": [{"role": "user", "content": "Tell me a story."}]}
    if client == "responses":
        body = {"model": "bench-model", "stream": True, "input": "Tell me a story."}
    return registry.get(client).parse_request(body), body


def upstream_chunks(upstream: str, deltas: int = DELTAS_PER_STREAM) -> list[bytes]:
    """What the upstream writes for one stream, one chunk per SSE event."""

    req, body = _request(upstream)
    encoder = registry.get(upstream).stream_encoder(EncodeContext(model="bench-model", request=req,
                                                                  body=body))
    chunks: list[bytes] = []
    for event in _ir_stream(deltas):
        chunks.extend(encoder.feed(event))
    chunks.extend(encoder.finish())
    return chunks


def translate_once(client: str, upstream: str, chunks: list[bytes], ctx: EncodeContext) -> int:
    """One stream through parser, decoder and encoder; returns the client bytes written."""

    parser = SSEParser()
    decoder = registry.get(upstream).stream_decoder()
    encoder = registry.get(client).stream_encoder(ctx)
    size = 0
    for chunk in chunks:
        for sse_event in parser.feed(chunk):
            for event in decoder.feed(sse_event):
                for out in encoder.feed(event):
                    size += len(out)
    for sse_event in parser.finish():
        for event in decoder.feed(sse_event):
            for out in encoder.feed(event):
                size += len(out)
    for event in decoder.finish():
        for out in encoder.feed(event):
            size += len(out)
    for out in encoder.finish():
        size += len(out)
    return size


def run_case(client: str, upstream: str, min_seconds: float = 1.0, max_streams: int = 100_000,
             deltas: int = DELTAS_PER_STREAM) -> CaseResult:
    chunks = upstream_chunks(upstream, deltas)
    req, body = _request(client)
    ctx = EncodeContext(model="bench-model", request=req, body=body)
    out_size = translate_once(client, upstream, chunks, ctx)  # warm-up, and the output size
    streams = 0
    cpu0, t0 = time.process_time(), time.perf_counter()
    elapsed = 0.0
    while streams < max_streams and elapsed < min_seconds:
        translate_once(client, upstream, chunks, ctx)
        streams += 1
        elapsed = time.perf_counter() - t0
    return CaseResult(client, upstream, streams, streams * deltas, elapsed, time.process_time() - cpu0,
                      sum(map(len, chunks)), out_size)


def run(quick: bool = False, min_seconds: float | None = None) -> dict[str, object]:
    seconds = min_seconds if min_seconds is not None else 1.0
    pairs = NAMED_PAIRS if quick else NAMED_PAIRS + OTHER_PAIRS
    results = [run_case(client, upstream, seconds) for client, upstream in pairs]
    print_table(results)
    return {"target_events_per_s": TARGET_EVENTS_PER_S, "deltas_per_stream": DELTAS_PER_STREAM,
            "cases": {r.name: r.as_dict() for r in results}}


def print_table(results: list[CaseResult]) -> None:
    print("\n== Stream translation, one core (SSE parse + decode + encode, JSON both ways) ==")
    print(f"{'upstream→client':<24}{'text deltas/s':>15}{'× target':>10}{'per CPU-s':>12}"
          f"{'CPU/wall':>10}{'streams':>9}")
    for r in results:
        cpu = r.cpu_seconds / r.seconds if r.seconds else 0.0
        print(f"{r.name:<24}{r.events_per_s:>15,.0f}{r.events_per_s / TARGET_EVENTS_PER_S:>10.2f}"
              f"{r.events_per_cpu_s:>12,.0f}{cpu:>10.2f}{r.streams:>9}")
    print(f"(target ≥ {TARGET_EVENTS_PER_S:,} text-delta events/s per core; {DELTAS_PER_STREAM} deltas "
          "per stream, one upstream read per event; CPU/wall < 1 means other processes took the core)")
