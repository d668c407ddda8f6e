"""The overview's tiles and charts for a window: one function for the page and for its live updates
over the websocket (``live.overview``), so both show the same figures the same way."""

from __future__ import annotations

import datetime as dt
from typing import Any

from django.utils import timezone
from django.utils.safestring import SafeString

from accounts.models import RequestLog

from . import charts, stats

RATE_SECONDS = 60


def current_rate() -> int:
    """Requests in the last minute: the rate now, not the window's average. Rows of the last minute
    only, through the log's ``created_at`` index, whatever the size of the log."""

    since = timezone.now() - dt.timedelta(seconds=RATE_SECONDS)
    return RequestLog.objects.filter(created_at__gte=since).count()


def chart(points: list[dict[str, int]], field: str, title: str, window: stats.Window,
          with_errors: bool = False) -> SafeString:
    """A window's chart, titled with what one bar counts ("Requests per hour, last 24 hours")."""

    return charts.bar_chart([(p["t"], p[field]) for p in points], step=window.step,
                            title=f"{title} {charts.bucket_phrase(window.step)}, {window.label}",
                            errors=[p["errors"] for p in points] if with_errors else None)


def charts_of(points: list[dict[str, int]], window: stats.Window) -> dict[str, Any]:
    return {
        "bucket": charts.bucket_phrase(window.step),
        "requests_chart": chart(points, "requests", "Requests", window, with_errors=True),
        "errors_chart": chart(points, "errors", "Errors", window),
        "tokens_chart": chart(points, "tokens", "Tokens (in + out)", window),
    }


def figures(window: stats.Window) -> dict[str, Any]:
    totals = stats.totals(window)
    return {
        "window": window, "totals": totals, "per_minute": current_rate(),
        "ttfb": {p: totals.ttfb_percentile(p) for p in (50, 95, 99)},
        "by_status": stats.accounts_by_status(),
        **charts_of(stats.series(window), window),
    }
