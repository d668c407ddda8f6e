"""OTLP/HTTP export bodies (protobuf or JSON) → the figures the gateway keeps.

Claude Code's names (its monitoring documentation, and the names in its 2.1.332 binary):

- metrics: ``claude_code.session.count``, ``claude_code.cost.usage`` (USD, attribute ``model``),
  ``claude_code.token.usage`` (``type``: input, output, cacheRead, cacheCreation; ``model``),
  ``claude_code.lines_of_code.count`` (``type``: added, removed), ``claude_code.commit.count``,
  ``claude_code.pull_request.count``, ``claude_code.code_edit_tool.decision`` (``decision``,
  ``tool_name``), ``claude_code.active_time.total`` (s). Each data point carries ``session.id``.
- events (OTLP logs of the scope ``com.anthropic.claude_code.events``): ``event.name`` such as
  ``user_prompt``, ``api_request``, ``api_error``, ``tool_result``, ``tool_decision`` (``decision``,
  ``tool_name``); each is counted once.
- traces: spans are counted.

Any other metric is kept under its own name (bounded by the length of the name); an unknown event
likewise. Sums and gauges alike: a point's value, with its temporality (a cumulative sum is the
running total since its start: the store keeps the highest, a delta is added).
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

from google.protobuf import json_format
from google.protobuf.message import DecodeError, Message
from opentelemetry.proto.collector.logs.v1.logs_service_pb2 import ExportLogsServiceRequest
from opentelemetry.proto.collector.metrics.v1.metrics_service_pb2 import ExportMetricsServiceRequest
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest
from opentelemetry.proto.common.v1.common_pb2 import AnyValue, KeyValue
from opentelemetry.proto.metrics.v1.metrics_pb2 import AggregationTemporality

SIGNALS: dict[str, type[Message]] = {
    "metrics": ExportMetricsServiceRequest, "logs": ExportLogsServiceRequest, "traces": ExportTraceServiceRequest,
}
# The attribute that tells a series apart, by metric (else none).
DETAIL = {"claude_code.token.usage": ("type",), "claude_code.lines_of_code.count": ("type",),
          "claude_code.code_edit_tool.decision": ("decision", "tool_name")}
EVENT_DETAIL = {"tool_decision": ("decision", "tool_name"), "api_error": ("status_code",)}
MAX_FIGURES = 10_000  # per export: what one body may add, whatever it holds


class Unreadable(ValueError):
    """A body that is no OTLP export of its signal."""


@dataclass(frozen=True)
class Figure:
    name: str
    detail: str
    model: str
    session: str
    value: float
    cumulative: bool = False


def decode(signal: str, body: bytes, content_type: str) -> Message:
    message = SIGNALS[signal]()
    try:
        if content_type.split(";")[0].strip().lower() == "application/json":
            json_format.Parse(body, message, ignore_unknown_fields=True)
        else:
            message.ParseFromString(body)
    except (DecodeError, json_format.ParseError, ValueError, UnicodeDecodeError, RecursionError) as exc:
        raise Unreadable(f"not an OTLP {signal} export: {type(exc).__name__}") from exc
    return message


def _value(v: AnyValue) -> str:
    kind = v.WhichOneof("value")
    if kind is None or kind in ("array_value", "kvlist_value", "bytes_value"):
        return ""
    return str(getattr(v, kind))


def _attrs(attributes: Iterable[KeyValue]) -> dict[str, str]:
    return {kv.key: _value(kv.value) for kv in attributes}


def _short(text: str, limit: int = 100) -> str:
    return text[:limit]


def figures(signal: str, message: Any) -> list[Figure]:
    out: list[Figure] = []
    if signal == "metrics":
        for rm in message.resource_metrics:
            resource = _attrs(rm.resource.attributes)
            for sm in rm.scope_metrics:
                for metric in sm.metrics:
                    out += _metric_figures(metric, resource)
    elif signal == "logs":
        for rl in message.resource_logs:
            resource = _attrs(rl.resource.attributes)
            for sl in rl.scope_logs:
                for record in sl.log_records:
                    attrs = {**resource, **_attrs(record.attributes)}
                    body = _value(record.body)
                    event = attrs.get("event.name") or body.removeprefix("claude_code.")
                    if not event:
                        continue
                    keys = EVENT_DETAIL.get(event, ())
                    out.append(Figure(_short(f"event:{event}"), _short(":".join(attrs.get(k, "") for k in keys)),
                                      _short(attrs.get("model", "")), _short(attrs.get("session.id", ""), 64), 1.0))
    else:
        for rs in message.resource_spans:
            resource = _attrs(rs.resource.attributes)
            for ss in rs.scope_spans:
                for span in ss.spans:
                    attrs = {**resource, **_attrs(span.attributes)}
                    out.append(Figure("trace:spans", "", "", _short(attrs.get("session.id", ""), 64), 1.0))
    return out[:MAX_FIGURES]


def _metric_figures(metric: Any, resource: dict[str, str]) -> list[Figure]:
    kind = metric.WhichOneof("data")
    if kind not in ("sum", "gauge"):
        return []  # histograms and summaries: Claude Code sends none
    data = getattr(metric, kind)
    cumulative = kind == "gauge" or (
        data.aggregation_temporality == AggregationTemporality.AGGREGATION_TEMPORALITY_CUMULATIVE)
    keys = DETAIL.get(metric.name, ())
    out = []
    for point in data.data_points:
        attrs = {**resource, **_attrs(point.attributes)}
        value = point.as_double if point.WhichOneof("value") == "as_double" else float(point.as_int)
        out.append(Figure(_short(metric.name), _short(":".join(attrs.get(k, "") for k in keys)),
                          _short(attrs.get("model", "")), _short(attrs.get("session.id", ""), 64), value,
                          cumulative))
    return out
