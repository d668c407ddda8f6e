"""Stream translation on one core: upstream SSE bytes → SSEParser → decoder → encoder → client bytes.

The upstream bytes are what a real upstream sends: one text block of many word-sized
deltas, written by that protocol's own encoder (so the JSON is the real shape), cut
into one read per event as a streaming upstream delivers them. Every iteration
parses and decodes the JSON, builds IR events, and encodes the client's JSON, so
the figure includes both JSON decode and encode. Single-threaded: the figure is
per core.

Each pair runs in short rounds, the pairs' rounds interleaved. The target is
checked on the fastest round's CPU-seconds, the usual statistic for what code
costs (``timeit`` takes the minimum): on a shared virtual machine a neighbour's
load slows this process's CPU-seconds too, and one long run swung 2× between
runs on the same code. The overall rate of all rounds is printed beside it.
"""

from __future__ import annotations

import time
from dataclasses import dataclass

from translation import ir, registry
from translation.protocol import EncodeContext
from translation.sse import SSEParser

TARGET_EVENTS_PER_S = 100_000
DELTAS_PER_STREAM = 200
ROUNDS = 10
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
    best_round_deltas: int = 0
    best_round_cpu_seconds: float = 0.0

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

    @property
    def best_events_per_cpu_s(self) -> float:
        """The fastest round's rate: what the code costs when nothing else slows the core."""

        return self.best_round_deltas / self.best_round_cpu_seconds if self.best_round_cpu_seconds else 0.0

    def as_dict(self) -> dict[str, float | int | str]:
        return {"upstream": self.upstream, "client": self.client, "streams": self.streams,
                "text_delta_events": self.deltas, "seconds": round(self.seconds, 3),
                "cpu_seconds": round(self.cpu_seconds, 3),
                "events_per_s": round(self.events_per_s),
                "events_per_cpu_s": round(self.events_per_cpu_s),
                "best_round_events_per_cpu_s": round(self.best_events_per_cpu_s),
                "ratio_to_target": round(self.best_events_per_cpu_s / TARGET_EVENTS_PER_S, 2),
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


class Case:
    """One pair, measured in rounds: ``run`` interleaves the pairs' rounds, so a spell of
    host noise costs every pair one round instead of one pair all of its rounds."""

    def __init__(self, client: str, upstream: str, deltas: int = DELTAS_PER_STREAM) -> None:
        self.client, self.upstream, self.deltas = client, upstream, deltas
        self.chunks = upstream_chunks(upstream, deltas)
        req, body = _request(client)
        self.ctx = EncodeContext(model="bench-model", request=req, body=body)
        self.out_size = translate_once(client, upstream, self.chunks, self.ctx)  # warm-up, and the output size
        self.streams, self.seconds, self.cpu_seconds = 0, 0.0, 0.0
        self.best = (0, 0.0)  # the fastest round: (streams, CPU-seconds)

    def round(self, seconds: float) -> None:
        streams, t0, cpu0 = 0, time.perf_counter(), time.process_time()
        while True:  # at least one stream per round
            translate_once(self.client, self.upstream, self.chunks, self.ctx)
            streams += 1
            if time.perf_counter() - t0 >= seconds:
                break
        wall, cpu = time.perf_counter() - t0, time.process_time() - cpu0
        self.streams += streams
        self.seconds += wall
        self.cpu_seconds += cpu
        best_streams, best_cpu = self.best
        if cpu > 0 and (not best_cpu or streams / cpu > best_streams / best_cpu):
            self.best = (streams, cpu)

    def result(self) -> CaseResult:
        return CaseResult(self.client, self.upstream, self.streams, self.streams * self.deltas, self.seconds,
                          self.cpu_seconds, sum(map(len, self.chunks)), self.out_size,
                          self.best[0] * self.deltas, self.best[1])


def run_case(client: str, upstream: str, min_seconds: float = 1.0, deltas: int = DELTAS_PER_STREAM) -> CaseResult:
    case = Case(client, upstream, deltas)
    for _ in range(ROUNDS):
        case.round(min_seconds / ROUNDS)
    return case.result()


def run(quick: bool = False, min_seconds: float | None = None) -> dict[str, object]:
    seconds = min_seconds if min_seconds is not None else 1.0
    pairs = NAMED_PAIRS if quick else NAMED_PAIRS + OTHER_PAIRS
    cases = [Case(client, upstream) for client, upstream in pairs]
    for _ in range(ROUNDS):
        for case in cases:
            case.round(seconds / ROUNDS)
    results = [case.result() for case in cases]
    print_table(results)
    return {"target_events_per_s": TARGET_EVENTS_PER_S, "deltas_per_stream": DELTAS_PER_STREAM,
            "cases": {r.name: r.as_dict() for r in results}}


def print_table(results: list[CaseResult]) -> None:
    print("\n== Stream translation, one core (SSE parse + decode + encode, JSON both ways) ==")
    print(f"{'upstream→client':<24}{'text deltas/s':>15}{'per CPU-s':>12}{'best round':>12}{'× target':>10}"
          f"{'CPU/wall':>10}{'streams':>9}")
    for r in results:
        cpu = r.cpu_seconds / r.seconds if r.seconds else 0.0
        best = r.best_events_per_cpu_s
        print(f"{r.name:<24}{r.events_per_s:>15,.0f}{r.events_per_cpu_s:>12,.0f}{best:>12,.0f}"
              f"{best / TARGET_EVENTS_PER_S:>10.2f}{cpu:>10.2f}{r.streams:>9}")
    print(f"(target ≥ {TARGET_EVENTS_PER_S:,} text-delta events/s per core, on the best of {ROUNDS} rounds' "
          f"CPU-seconds; {DELTAS_PER_STREAM} deltas per stream, one upstream read per event; "
          "CPU/wall < 1 means other processes took the core)")
