"""Server-rendered SVG charts: no JavaScript library, nothing fetched at run time.

Each function returns markup that is safe to put in a template as is: every piece
of text in it is escaped here.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Sequence

from django.utils.html import escape
from django.utils.safestring import SafeString, mark_safe

WIDTH, HEIGHT = 640, 170
LEFT, RIGHT, TOP, BOTTOM = 56, 8, 14, 22


def label_time(t: int, step: int) -> str:
    when = dt.datetime.fromtimestamp(t, dt.timezone.utc)
    return when.strftime("%b %d") if step >= 86400 else when.strftime("%H:%M")


def bucket_phrase(step: int) -> str:
    """What one bar counts: "per 5 minutes", "per hour", "per day"."""

    if step % 86400 == 0:
        return "per day" if step == 86400 else f"per {step // 86400} days"
    if step % 3600 == 0:
        return "per hour" if step == 3600 else f"per {step // 3600} hours"
    return "per minute" if step == 60 else f"per {step // 60} minutes"


def _span(t: int, step: int) -> str:
    """A bar's time span for its tooltip: "05:05–05:10 UTC", or the day."""

    if step >= 86400:
        return label_time(t, step)
    return f"{label_time(t, step)}–{label_time(t + step, step)} UTC"


def number(value: float) -> str:
    """Compact figures for axis labels: 950, 12.3k, 4.5M."""

    for div, suffix in ((1e9, "G"), (1e6, "M"), (1e3, "k")):
        if abs(value) >= div:
            return f"{value / div:.1f}".rstrip("0").rstrip(".") + suffix
    return f"{value:.0f}" if float(value).is_integer() else f"{value:.1f}"


def bar_chart(points: Sequence[tuple[int, float]], *, title: str, step: int, unit: str = "",
              css: str = "", errors: Sequence[float] | None = None) -> SafeString:
    """Bars over time: ``points`` are (unix time of the step's start, value). With ``errors`` (one per
    point, part of its value) each bar's failed part is drawn apart, in the error colour, on top."""

    plot_w, plot_h = WIDTH - LEFT - RIGHT, HEIGHT - TOP - BOTTOM
    top = max((v for _, v in points), default=0) or 1
    n = max(len(points), 1)
    slot = plot_w / n
    bar = max(slot * 0.8, 1.0)
    parts = [
        f'<svg class="chart {escape(css)}" viewBox="0 0 {WIDTH} {HEIGHT}" width="{WIDTH}" height="{HEIGHT}" '
        f'role="img" aria-label="{escape(title)}" xmlns="http://www.w3.org/2000/svg">',
        f"<title>{escape(title)}</title>",
    ]
    for frac in (0.0, 0.5, 1.0):
        y = TOP + plot_h * (1 - frac)
        parts.append(f'<line class="grid" x1="{LEFT}" y1="{y:.1f}" x2="{WIDTH - RIGHT}" y2="{y:.1f}"/>')
        parts.append(f'<text class="axis" x="{LEFT - 6}" y="{y + 4:.1f}" text-anchor="end">'
                     f"{escape(number(top * frac))}</text>")
    for i, (t, v) in enumerate(points):
        h = plot_h * v / top
        x = LEFT + i * slot + (slot - bar) / 2
        failed = min(errors[i], v) if errors is not None else 0
        tip = f"{_span(t, step)}: {number(v)}{(' ' + unit) if unit else ''}"
        if errors is not None:
            tip += f", {number(failed)} failed"
        parts.append(f'<rect class="bar" x="{x:.1f}" y="{TOP + plot_h - h:.1f}" width="{bar:.1f}" '
                     f'height="{h:.1f}"><title>{escape(tip)}</title></rect>')
        if failed:
            eh = plot_h * failed / top
            parts.append(f'<rect class="bar err" x="{x:.1f}" y="{TOP + plot_h - h:.1f}" width="{bar:.1f}" '
                         f'height="{eh:.1f}"><title>{escape(tip)}</title></rect>')
    if points:
        for i in sorted({0, len(points) // 2, len(points) - 1}):
            x = LEFT + i * slot + slot / 2
            parts.append(f'<text class="axis" x="{x:.1f}" y="{HEIGHT - 6}" text-anchor="middle">'
                         f"{escape(label_time(points[i][0], step))}</text>")
    parts.append("</svg>")
    return mark_safe("".join(parts))


def sparkline(values: Sequence[float], *, title: str, width: int = 120, height: int = 24) -> SafeString:
    """A tiny trend line for a table cell."""

    top = max(values, default=0) or 1
    n = len(values)
    if n < 2:
        coords = f"0,{height - 1} {width},{height - 1}"
    else:
        coords = " ".join(f"{i * width / (n - 1):.1f},{height - 1 - (height - 2) * v / top:.1f}"
                          for i, v in enumerate(values))
    return mark_safe(
        f'<svg class="spark" viewBox="0 0 {width} {height}" width="{width}" height="{height}" '
        f'role="img" aria-label="{escape(title)}" xmlns="http://www.w3.org/2000/svg">'
        f"<title>{escape(title)}</title><polyline points=\"{coords}\"/></svg>"
    )
