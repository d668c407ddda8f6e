from __future__ import annotations

from dashboard import charts


def test_bar_chart_draws_one_bar_per_point_scaled_to_the_largest() -> None:
    svg = charts.bar_chart([(0, 1), (3600, 4), (7200, 2)], title="Requests", step=3600)
    assert svg.count('<rect class="bar"') == 3
    plot_h = charts.HEIGHT - charts.TOP - charts.BOTTOM
    assert f'height="{plot_h:.1f}"' in svg  # the largest bar fills the plot
    assert "<title>01:00–02:00 UTC: 4</title>" in svg  # a bar's tooltip names the hour it counts


def test_a_chart_with_errors_draws_each_bars_failed_part_apart() -> None:
    svg = charts.bar_chart([(0, 10), (300, 4)], title="Requests", step=300, errors=[5, 0])
    assert svg.count('<rect class="bar err"') == 1
    plot_h = charts.HEIGHT - charts.TOP - charts.BOTTOM
    assert f'class="bar err" x="' in svg and f'height="{plot_h / 2:.1f}"' in svg  # half of the tallest bar
    assert "<title>00:00–00:05 UTC: 10, 5 failed</title>" in svg


def test_bucket_phrases_name_what_one_bar_counts() -> None:
    assert [charts.bucket_phrase(s) for s in (60, 300, 3600, 86400, 7200)] == [
        "per minute", "per 5 minutes", "per hour", "per day", "per 2 hours"]


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
