from __future__ import annotations

from dashboard import charts


def test_bar_chart_draws_one_bar_per_point_scaled_to_the_largest() -> None:
    svg = charts.bar_chart([(0, 1), (3600, 4), (7200, 2)], title="Requests", step=3600)
    assert svg.count('<rect class="bar"') == 3
    plot_h = charts.HEIGHT - charts.TOP - charts.BOTTOM
    assert f'height="{plot_h:.1f}"' in svg  # the largest bar fills the plot
    assert "<title>01:00: 4</title>" in svg


def test_text_in_charts_is_escaped() -> None:
    svg = charts.bar_chart([(0, 1)], title='<script>alert("x")</script>', step=300)
    spark = charts.sparkline([1, 2], title="<b>")
    assert "<script>" not in svg and "&lt;script&gt;" in svg
    assert "<b>" not in spark


def test_empty_series_still_render_an_axis() -> None:
    svg = charts.bar_chart([], title="nothing yet", step=86400)
    assert svg.startswith("<svg") and svg.endswith("</svg>") and "bar" not in svg.split("</title>", 1)[1]
    assert "<polyline" in charts.sparkline([], title="none")


def test_day_charts_label_days_and_hour_charts_label_times() -> None:
    assert charts.label_time(86400 * 3, 86400) == "Jan 04"
    assert charts.label_time(3600 * 5 + 300, 300) == "05:05"


def test_axis_numbers_are_compact() -> None:
    assert [charts.number(v) for v in (950, 12_300, 4_500_000, 2.5)] == ["950", "12.3k", "4.5M", "2.5"]
