"""CSV downloads: the request log as filtered on its page, and spend per key, model or provider.

The log may hold ten million rows, so its export is streamed: an asynchronous iterator (Django
consumes a synchronous one whole before sending it under ASGI) that reads one keyset page at a time
(``logsearch.page``, newest first) on a worker thread and writes it as CSV. No bodies, attempt
errors or key hints go out: nothing that could carry a secret. Text a client chose (a model name)
is written so that a spreadsheet does not run it as a formula.
"""

from __future__ import annotations

import csv
import io
from collections.abc import AsyncIterator, Iterable, Sequence
from typing import Any

from django.db.models import QuerySet
from django.http import HttpRequest, HttpResponse, StreamingHttpResponse

from accounts.db import hop
from accounts.models import RequestLog

from . import logsearch, spendstats, stats
from .security import staff_page

CHUNK = 2000
REQUEST_COLUMNS = ("created_at", "request_id", "client_key", "client_protocol", "upstream_protocol", "provider",
                   "account", "model_requested", "model_sent", "stream", "status", "error_class", "attempts",
                   "latency_ms", "ttfb_ms", "input_tokens", "output_tokens", "cached_tokens", "reasoning_tokens",
                   "finish_reason", "cost_usd")
SPEND_COLUMNS = ("requests", "errors", "input_tokens", "output_tokens", "cost_usd")


def cell(value: Any) -> Any:
    # OWASP's advice for CSV injection: a leading quote keeps =, +, -, @ (and tab, CR) from being a formula.
    if isinstance(value, str) and value[:1] in ("=", "+", "-", "@", "\t", "\r"):
        return "'" + value
    return value


def csv_text(rows: Iterable[Sequence[Any]]) -> bytes:
    out = io.StringIO()
    writer = csv.writer(out)
    writer.writerows([cell(v) for v in row] for row in rows)
    return out.getvalue().encode()


def request_cells(r: RequestLog) -> tuple[Any, ...]:
    return (r.created_at.isoformat(), r.request_id, r.client_key_name, r.client_protocol, r.upstream_protocol,
            r.provider.name if r.provider else "", r.account.label if r.account else "", r.model_requested,
            r.model_sent, r.stream, r.status, r.error_class, r.attempt_count, r.latency_ms, r.ttfb_ms,
            r.input_tokens, r.output_tokens, r.cached_tokens, r.reasoning_tokens, r.finish_reason,
            "" if r.cost is None else r.cost)


def _chunk(qs: QuerySet[RequestLog], cursor: str | None) -> tuple[bytes, str | None]:
    page = logsearch.page(qs.defer("request_body", "response_body", "attempts"), cursor, CHUNK)
    return csv_text(request_cells(r) for r in page.rows), page.next_cursor


async def request_lines(qs: QuerySet[RequestLog]) -> AsyncIterator[bytes]:
    yield csv_text([REQUEST_COLUMNS])
    cursor: str | None = None
    while True:
        text, cursor = await hop(_chunk, qs, cursor)
        yield text
        if cursor is None:
            return


def _attachment(response: HttpResponse | StreamingHttpResponse, name: str) -> None:
    response["Content-Disposition"] = f'attachment; filename="{name}"'


@staff_page
def requests_csv(request: HttpRequest) -> HttpResponse:
    form = logsearch.RequestFilter(request.GET or None)
    qs = RequestLog.objects.all()
    if form.is_bound:
        if not form.is_valid():
            return HttpResponse(f"Invalid filter: {form.errors.as_text()}", status=400,
                                content_type="text/plain; charset=utf-8")
        qs = logsearch.apply(qs, form.cleaned_data)
    response = StreamingHttpResponse(request_lines(qs), content_type="text/csv; charset=utf-8")
    _attachment(response, "requests.csv")
    return response  # type: ignore[return-value]  # staff_page sets headers on any response


@staff_page
def spend_csv(request: HttpRequest) -> HttpResponse:
    """Spend in the window per ``by``: key (the default), model or provider."""

    window = stats.window_from(request.GET.get("window"))
    by = request.GET.get("by", "key")
    if by == "model":
        rows = spendstats.named(spendstats.by(window, "model"), {})
    elif by == "provider":
        rows = spendstats.named(spendstats.by(window, "provider"), spendstats.provider_names())
    elif by == "key":
        rows = spendstats.key_rows(window, "cost")
    else:
        return HttpResponse("by must be key, model or provider", status=400, content_type="text/plain; charset=utf-8")
    lines = [(by, "window", *SPEND_COLUMNS)] + [
        (r["name"], window.key, r["spend"].requests, r["spend"].errors, r["spend"].input_tokens,
         r["spend"].output_tokens, r["spend"].cost) for r in rows]
    response = HttpResponse(csv_text(lines), content_type="text/csv; charset=utf-8")
    _attachment(response, f"spend-by-{by}-{window.key}.csv")
    return response
