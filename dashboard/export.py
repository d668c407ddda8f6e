"""CSV downloads: the request log as filtered on its page, and spend per key (with its team), team, model
or provider.

The log may hold ten million rows, so its export is streamed: an asynchronous iterator (Django
consumes a synchronous one whole before sending it under ASGI) that reads one keyset page at a
time (newest first, cut by ``logsearch.older_than``) on a worker thread and writes it as CSV.
No bodies, attempt errors or key hints go out: nothing that could carry a secret. Text a client chose (a model name)
is written so that a spreadsheet does not run it as a formula.
"""

from __future__ import annotations

import csv
import datetime as dt
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
SPEND_COLUMNS = ("requests", "errors", "input_tokens", "output_tokens", "cached_tokens", "cache_write_tokens",
                 "cost_usd")


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


# (column in the CSV, what is read from the log): plain values, no model instances (a third of the time).
REQUEST_FIELDS = (
    ("created_at", "created_at"), ("request_id", "request_id"), ("client_key", "client_key_name"),
    ("team", "team__name"),
    ("client_protocol", "client_protocol"), ("upstream_protocol", "upstream_protocol"),
    ("provider", "provider__name"), ("account", "account__label"), ("model_requested", "model_requested"),
    ("model_sent", "model_sent"), ("stream", "stream"), ("status", "status"), ("error_class", "error_class"),
    ("attempts", "attempt_count"), ("latency_ms", "latency_ms"), ("ttfb_ms", "ttfb_ms"),
    ("input_tokens", "input_tokens"), ("output_tokens", "output_tokens"), ("cached_tokens", "cached_tokens"),
    ("cache_write_tokens", "cache_write_tokens"), ("cache_write_1h_tokens", "cache_write_1h_tokens"),
    ("reasoning_tokens", "reasoning_tokens"), ("finish_reason", "finish_reason"), ("cost_usd", "cost"),
)
REQUEST_COLUMNS = tuple(column for column, _ in REQUEST_FIELDS)


def _chunk(qs: QuerySet[RequestLog], after: tuple[dt.datetime, int] | None
           ) -> tuple[bytes, tuple[dt.datetime, int] | None]:
    """One chunk of the filtered log as CSV, and where the next one starts (None: this was the last)."""

    if after is not None:
        qs = logsearch.older_than(qs, *after)
    rows = list(qs.order_by(f"-{logsearch.time_column(qs)}", "-id")
                .values_list("id", *(name for _, name in REQUEST_FIELDS))[:CHUNK])
    cells = [(row[1].isoformat(), *("" if v is None else v for v in row[2:])) for row in rows]
    return csv_text(cells), ((rows[-1][1], rows[-1][0]) if len(rows) == CHUNK else None)


async def request_lines(qs: QuerySet[RequestLog]) -> AsyncIterator[bytes]:
    yield csv_text([REQUEST_COLUMNS])
    after: tuple[dt.datetime, int] | None = None
    while True:
        text, after = await hop(_chunk, qs, after)
        yield text
        if after is None:
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
    """Spend in the window per ``by``: key (the default; with each key's team), team (its keys' summed),
    model or provider."""

    window = stats.window_from(request.GET.get("window"))
    by = request.GET.get("by", "key")
    if by == "model":
        rows = spendstats.named(spendstats.by(window, "model"), {})
    elif by == "provider":
        rows = spendstats.named(spendstats.by(window, "provider"), spendstats.provider_names())
    elif by == "key":
        rows = spendstats.key_rows(window, "cost")
    elif by == "team":
        rows = spendstats.team_rows(window)
    else:
        return HttpResponse("by must be key, team, model or provider", status=400,
                            content_type="text/plain; charset=utf-8")
    extra = ("team",) if by == "key" else ("keys",) if by == "team" else ()
    lines = [(by, *extra, "window", *SPEND_COLUMNS)] + [
        (r["name"], *(r.get(column, "") for column in extra), window.key, r["spend"].requests, r["spend"].errors,
         r["spend"].input_tokens, r["spend"].output_tokens, r["spend"].cached_tokens, r["spend"].cache_write_tokens,
         r["spend"].cost)
        for r in rows]
    response = HttpResponse(csv_text(lines), content_type="text/csv; charset=utf-8")
    _attachment(response, f"spend-by-{by}-{window.key}.csv")
    return response
