"""Claude Code's telemetry through a real gateway (httpx, bodies built with opentelemetry-proto): OTLP/HTTP
metrics, logs and traces in protobuf and JSON answered 200, kept per client key, bounded in size and rate,
forwarded to a collector on loopback, pruned, and shown on the dashboard beside the gateway's figures."""

from __future__ import annotations

import datetime as dt
import threading
import uuid
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, HTTPServer
from typing import Any

import httpx
import pytest
from django.contrib.auth import get_user_model
from django.core.management import call_command
from django.test import Client
from google.protobuf import json_format
from opentelemetry.proto.collector.logs.v1.logs_service_pb2 import ExportLogsServiceRequest
from opentelemetry.proto.collector.metrics.v1.metrics_service_pb2 import ExportMetricsServiceRequest
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest
from opentelemetry.proto.common.v1.common_pb2 import AnyValue, KeyValue
from opentelemetry.proto.logs.v1.logs_pb2 import LogRecord
from opentelemetry.proto.metrics.v1.metrics_pb2 import AggregationTemporality, Metric, NumberDataPoint
from opentelemetry.proto.trace.v1.trace_pb2 import Span

from accounts.models import ApiKey
from telemetry.models import ReportedFigure
from telemetry.store import figures_of, reported_by_key
from tests.servers import Server, free_port, own_gateway

pytestmark = pytest.mark.django_db(transaction=True)

PROTOBUF = {"content-type": "application/x-protobuf"}
JSON = {"content-type": "application/json"}
DELTA = AggregationTemporality.AGGREGATION_TEMPORALITY_DELTA
CUMULATIVE = AggregationTemporality.AGGREGATION_TEMPORALITY_CUMULATIVE


class Collector:
    """An OTLP/HTTP collector on loopback that keeps what it is sent."""

    def __init__(self) -> None:
        self.received: list[tuple[str, dict[str, str], bytes]] = []
        collector = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:  # noqa: N802 - http.server's name
                body = self.rfile.read(int(self.headers["content-length"]))
                collector.received.append((self.path, {k.lower(): v for k, v in self.headers.items()}, body))
                self.send_response(200)
                self.send_header("content-length", "0")
                self.end_headers()

            def log_message(self, *args: Any) -> None:
                pass

        self.port = free_port()
        self.server = HTTPServer(("127.0.0.1", self.port), Handler)
        threading.Thread(target=self.server.serve_forever, daemon=True).start()

    def stop(self) -> None:
        self.server.shutdown()


@pytest.fixture(scope="module")
def collector() -> Iterator[Collector]:
    c = Collector()
    yield c
    c.stop()


@pytest.fixture(scope="module")
def telemetry_gateway(django_db_setup: Any, django_db_blocker: Any, collector: Collector) -> Iterator[Server]:
    env = {"GATEWAY_TELEMETRY_MAX_BYTES": "20000", "GATEWAY_TELEMETRY_PER_MINUTE": "5",
           "GATEWAY_OTLP_FORWARD_URL": f"http://127.0.0.1:{collector.port}",
           "GATEWAY_OTLP_FORWARD_HEADERS": "authorization=Bearer collector-token"}
    with own_gateway(django_db_blocker, env) as server:
        yield server


@pytest.fixture
def key(transactional_db: Any) -> tuple[str, ApiKey]:
    plain = f"gw-otel-{uuid.uuid4().hex}"
    row = ApiKey(name=plain[-12:])
    row.set_key(plain)
    row.save()
    return plain, row


def attrs(**values: Any) -> list[KeyValue]:
    return [KeyValue(key=k.replace("__", "."), value=AnyValue(string_value=str(v))) for k, v in values.items()]


def point(value: float, **labels: Any) -> NumberDataPoint:
    return NumberDataPoint(as_double=value, attributes=attrs(session__id="s-1", **labels))


def metrics(*parts: tuple[str, int, list[NumberDataPoint]]) -> ExportMetricsServiceRequest:
    req = ExportMetricsServiceRequest()
    scope = req.resource_metrics.add(resource={"attributes": attrs(service__name="claude-code")}).scope_metrics.add()
    for name, temporality, points in parts:
        metric = Metric(name=name)
        metric.sum.aggregation_temporality = temporality
        metric.sum.is_monotonic = True
        metric.sum.data_points.extend(points)
        scope.metrics.append(metric)
    return req


def session_metrics(cost: float, temporality: int = DELTA) -> ExportMetricsServiceRequest:
    return metrics(
        ("claude_code.session.count", DELTA, [point(1)]),
        ("claude_code.cost.usage", temporality, [point(cost, model="claude-sonnet-4-5")]),
        ("claude_code.token.usage", DELTA, [point(100, type="input", model="claude-sonnet-4-5"),
                                            point(40, type="output", model="claude-sonnet-4-5")]),
        ("claude_code.lines_of_code.count", DELTA, [point(12, type="added"), point(3, type="removed")]),
    )


def decisions(*pairs: tuple[str, str]) -> ExportLogsServiceRequest:
    req = ExportLogsServiceRequest()
    scope = req.resource_logs.add().scope_logs.add(scope={"name": "com.anthropic.claude_code.events"})
    for decision, tool in pairs:
        scope.log_records.append(LogRecord(body=AnyValue(string_value="claude_code.tool_decision"),
                                           attributes=attrs(event__name="tool_decision", decision=decision,
                                                            tool_name=tool, session__id="s-1")))
    return req


def post(gateway: Server, signal: str, key: str | None, body: bytes, headers: dict[str, str]) -> httpx.Response:
    sent = {**headers, **({"authorization": f"Bearer {key}"} if key else {})}
    return httpx.post(f"{gateway.url}/v1/{signal}", content=body, headers=sent, timeout=30)


def shown(key_row: ApiKey) -> dict[str, float]:
    return reported_by_key(dt.datetime.now(dt.timezone.utc) - dt.timedelta(hours=2)).get(key_row.pk, {})


def test_metrics_in_protobuf_and_json_are_answered_200_and_kept_per_key(
        telemetry_gateway: Server, key: tuple[str, ApiKey]) -> None:
    plain, row = key
    as_protobuf = post(telemetry_gateway, "metrics", plain, session_metrics(0.05).SerializeToString(), PROTOBUF)
    assert as_protobuf.status_code == 200 and as_protobuf.headers["content-type"] == "application/x-protobuf"
    as_json = post(telemetry_gateway, "metrics", plain, json_format.MessageToJson(session_metrics(0.07)).encode(), JSON)
    assert as_json.status_code == 200 and as_json.json() == {}
    figures = shown(row)
    assert figures["sessions"] == 2 and figures["cost_usd"] == pytest.approx(0.12)
    assert figures["tokens"] == 280 and figures["lines_added"] == 24 and figures["lines_removed"] == 6
    tokens = {(f["detail"], f["model"]): f["value"] for f in figures_of(row.pk) if f["name"] == "claude_code.token.usage"}
    assert tokens == {("input", "claude-sonnet-4-5"): 200, ("output", "claude-sonnet-4-5"): 80}


def test_a_cumulative_series_keeps_its_running_total_not_the_sum(telemetry_gateway: Server,
                                                                 key: tuple[str, ApiKey]) -> None:
    plain, row = key
    for total in (0.10, 0.25, 0.25):
        assert post(telemetry_gateway, "metrics", plain,
                    session_metrics(total, CUMULATIVE).SerializeToString(), PROTOBUF).status_code == 200
    assert shown(row)["cost_usd"] == pytest.approx(0.25)


def test_tool_decisions_from_the_logs_signal_and_spans_from_traces_are_counted(
        telemetry_gateway: Server, key: tuple[str, ApiKey]) -> None:
    plain, row = key
    events = decisions(("accept", "Edit"), ("accept", "Write"), ("reject", "Bash"))
    assert post(telemetry_gateway, "logs", plain, events.SerializeToString(), PROTOBUF).status_code == 200
    assert post(telemetry_gateway, "logs", plain, json_format.MessageToJson(decisions(("accept", "Edit"))).encode(),
                JSON).status_code == 200
    figures = shown(row)
    assert (figures["accepted"], figures["rejected"]) == (3, 1)
    spans = ExportTraceServiceRequest()
    scope = spans.resource_spans.add().scope_spans.add()
    for name in ("claude_code.interaction", "claude_code.llm_request"):
        scope.spans.append(Span(name=name, trace_id=bytes(16), span_id=bytes(8)))
    assert post(telemetry_gateway, "traces", plain, spans.SerializeToString(), PROTOBUF).status_code == 200
    assert [f["value"] for f in figures_of(row.pk) if f["name"] == "trace:spans"] == [2]


def test_a_caller_must_be_known_and_a_body_that_is_no_otlp_is_dropped_with_a_200(
        telemetry_gateway: Server, key: tuple[str, ApiKey]) -> None:
    plain, row = key
    refused = post(telemetry_gateway, "metrics", None, session_metrics(1).SerializeToString(), PROTOBUF)
    assert refused.status_code == 401 and refused.headers["x-should-retry"] == "false"
    assert post(telemetry_gateway, "metrics", "gw-nope", b"", PROTOBUF).status_code == 401
    for garbage, headers in ((b"\xff\x00not protobuf", PROTOBUF), (b'{"resourceMetrics": 7}', JSON)):
        assert post(telemetry_gateway, "metrics", plain, garbage, headers).status_code == 200
    assert figures_of(row.pk) == []


def test_exports_are_bounded_in_size_and_rate(telemetry_gateway: Server, key: tuple[str, ApiKey]) -> None:
    plain, row = key
    big = metrics(("claude_code.cost.usage", DELTA, [point(0.01, model="m" * 90, pad=str(i) * 50)
                                                     for i in range(300)]))
    too_big = post(telemetry_gateway, "metrics", plain, big.SerializeToString(), PROTOBUF)
    assert too_big.status_code == 413 and too_big.json()["error"]["type"] == "request_too_large"
    answers = [post(telemetry_gateway, "metrics", plain, session_metrics(0.01).SerializeToString(), PROTOBUF)
               for _ in range(8)]
    assert {a.status_code for a in answers} == {200}  # past the rate: answered, and dropped
    assert shown(row)["sessions"] <= 5  # GATEWAY_TELEMETRY_PER_MINUTE (one minute boundary may split them)


def test_exports_are_forwarded_as_they_came_to_the_configured_collector(
        telemetry_gateway: Server, key: tuple[str, ApiKey], collector: Collector) -> None:
    plain, _ = key
    body = session_metrics(0.5).SerializeToString()
    assert post(telemetry_gateway, "metrics", plain, body, PROTOBUF).status_code == 200
    for _ in range(50):
        if any(b == body for _, _, b in collector.received):
            break
        threading.Event().wait(0.1)
    path, headers, received = next(r for r in collector.received if r[2] == body)
    assert path == "/v1/metrics" and headers["content-type"] == "application/x-protobuf"
    assert headers["authorization"] == "Bearer collector-token"  # the collector's, never the client's key
    assert plain not in str(headers)


def test_old_figures_are_pruned_and_the_dashboard_shows_them_beside_the_gateways(
        telemetry_gateway: Server, key: tuple[str, ApiKey]) -> None:
    plain, row = key
    assert post(telemetry_gateway, "logs", plain, decisions(("reject", "Edit")).SerializeToString(),
                PROTOBUF).status_code == 200
    assert post(telemetry_gateway, "metrics", plain, session_metrics(0.42).SerializeToString(),
                PROTOBUF).status_code == 200
    staff = get_user_model().objects.create_user(f"ops-{uuid.uuid4().hex[:6]}", password="x", is_staff=True)
    browser = Client()
    browser.force_login(staff)
    page = browser.get("/dashboard/claude-code/").content.decode()
    assert row.name in page and "$0.4200" in page
    old = ReportedFigure.objects.create(hour=dt.datetime.now(dt.timezone.utc) - dt.timedelta(days=400),
                                        client_key=row, name="claude_code.cost.usage", value=9.0)
    call_command("prunelogs", days=365)
    assert not ReportedFigure.objects.filter(pk=old.pk).exists()
    assert ReportedFigure.objects.filter(client_key=row).exists()  # the recent ones stay (30 days by default)
