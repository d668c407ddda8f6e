from translation import ir
from translation.openai_chat.usage import chunk_usage, parse_usage, render_usage


def test_openai_usage_with_details() -> None:
    usage = parse_usage({"prompt_tokens": 100, "completion_tokens": 50, "total_tokens": 150,
                         "prompt_tokens_details": {"cached_tokens": 80},
                         "completion_tokens_details": {"reasoning_tokens": 20}})
    assert usage == ir.Usage(input_tokens=100, output_tokens=50, cached_tokens=80, reasoning_tokens=20)


def test_deepseek_prompt_cache_hit_tokens_are_cached_tokens() -> None:
    usage = parse_usage({"prompt_tokens": 339, "completion_tokens": 83, "total_tokens": 422,
                         "prompt_cache_hit_tokens": 320, "prompt_cache_miss_tokens": 19})
    assert usage is not None and usage.cached_tokens == 320


def test_null_details_are_unknown_not_zero() -> None:
    usage = parse_usage({"prompt_tokens": 19, "completion_tokens": 1720, "total_tokens": 1739,
                         "prompt_tokens_details": None})
    assert usage == ir.Usage(input_tokens=19, output_tokens=1720)


def test_xai_completion_without_reasoning_is_corrected_from_the_total() -> None:
    # xAI grok-3-mini: total = prompt + completion + reasoning
    usage = parse_usage({"prompt_tokens": 307, "completion_tokens": 26, "total_tokens": 560,
                         "completion_tokens_details": {"reasoning_tokens": 227}})
    assert usage is not None and usage.output_tokens == 253 and usage.reasoning_tokens == 227


def test_completion_that_already_includes_reasoning_is_kept() -> None:
    usage = parse_usage({"prompt_tokens": 13, "completion_tokens": 564, "total_tokens": 577,
                         "completion_tokens_details": {"reasoning_tokens": 561}})
    assert usage is not None and usage.output_tokens == 564


def test_absent_or_null_usage_is_none() -> None:
    assert parse_usage(None) is None
    assert parse_usage("12") is None


def test_booleans_are_not_token_counts() -> None:
    usage = parse_usage({"prompt_tokens": True, "completion_tokens": 3})
    assert usage == ir.Usage(output_tokens=3)


def test_groq_usage_is_read_from_x_groq_when_top_level_is_absent() -> None:
    usage = chunk_usage({"x_groq": {"usage": {"prompt_tokens": 210, "completion_tokens": 15}}})
    assert usage == ir.Usage(input_tokens=210, output_tokens=15)


def test_top_level_usage_wins_over_x_groq() -> None:
    usage = chunk_usage({"usage": {"prompt_tokens": 1, "completion_tokens": 2},
                         "x_groq": {"usage": {"prompt_tokens": 9, "completion_tokens": 9}}})
    assert usage == ir.Usage(input_tokens=1, output_tokens=2)


def test_render_has_totals_and_known_details_only() -> None:
    assert render_usage(ir.Usage(input_tokens=10, output_tokens=5)) == {
        "prompt_tokens": 10, "completion_tokens": 5, "total_tokens": 15}
    assert render_usage(ir.Usage(input_tokens=10, output_tokens=5, cached_tokens=4, reasoning_tokens=2)) == {
        "prompt_tokens": 10, "completion_tokens": 5, "total_tokens": 15,
        "prompt_tokens_details": {"cached_tokens": 4}, "completion_tokens_details": {"reasoning_tokens": 2}}


def test_render_of_unknown_usage_is_zero() -> None:
    assert render_usage(ir.Usage()) == {"prompt_tokens": 0, "completion_tokens": 0, "total_tokens": 0}


def test_cache_creation_tokens_have_no_chat_slot() -> None:
    rendered = render_usage(ir.Usage(input_tokens=10, output_tokens=1, cache_creation_tokens=6))
    assert "cache_creation" not in str(rendered)
