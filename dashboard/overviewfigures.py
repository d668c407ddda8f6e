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


def title(what: str, window: stats.Window) -> str:
    """A chart's title: what one bar counts, over which window ("Requests per hour, last 24 hours")."""

    return f"{what} {charts.bucket_phrase(window.step)}, {window.label}"


def chart(points: list[dict[str, int]], field: str, what: str, window: stats.Window,
          with_errors: bool = False) -> SafeString:
    return charts.bar_chart([(p["t"], p[field]) for p in points], step=window.step, title=title(what, window),
                            errors=[p["errors"] for p in points] if with_errors else None)


CHARTS = (("requests", "Requests"), ("errors", "Errors"), ("tokens", "Tokens (in + out)"))


def charts_of(points: list[dict[str, int]], window: stats.Window) -> dict[str, Any]:
    """Each chart and its title, shown above it (the SVG carries the same title for screen readers)."""

    return {
        "bucket": charts.bucket_phrase(window.step),
        **{f"{field}_chart": chart(points, field, what, window, with_errors=field == "requests")
           for field, what in CHARTS},
        **{f"{field}_title": title(what, window) for field, what in CHARTS},
    }


def figures(window: stats.Window) -> dict[str, Any]:
    totals = stats.totals(window)
    return {
        "window": window, "totals": totals, "per_minute": current_rate(),
        "ttfb": {p: totals.ttfb_percentile(p) for p in (50, 95, 99)},
        "by_status": stats.accounts_by_status(),
        **charts_of(stats.series(window), window),
    }
