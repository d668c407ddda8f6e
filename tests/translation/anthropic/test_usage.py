from translation import ir
from translation.anthropic import usage


def test_input_tokens_become_the_total_prompt_including_cache() -> None:
    u = usage.to_ir({"input_tokens": 10, "cache_read_input_tokens": 200, "cache_creation_input_tokens": 30,
                     "output_tokens": 7})
    assert u == ir.Usage(input_tokens=240, output_tokens=7, cached_tokens=200, cache_creation_tokens=30)


def test_thinking_tokens_are_reasoning_tokens() -> None:
    u = usage.to_ir({"input_tokens": 1, "output_tokens": 50, "output_tokens_details": {"thinking_tokens": 20}})
    assert u.reasoning_tokens == 20 and u.output_tokens == 50


def test_missing_input_tokens_stay_unknown() -> None:
    u = usage.to_ir({"output_tokens": 5})
    assert u.input_tokens is None and u.output_tokens == 5


def test_non_integer_counts_are_ignored() -> None:
    assert usage.to_ir({"input_tokens": "12", "output_tokens": True}) == ir.Usage()
    assert usage.to_ir(None) == ir.Usage()


def test_later_reports_overwrite_and_absent_fields_survive() -> None:
    merged = usage.merge_wire({"input_tokens": 43, "output_tokens": 1, "cache_read_input_tokens": 5},
                              {"input_tokens": 61, "output_tokens": 2})
    assert merged == {"input_tokens": 61, "output_tokens": 2, "cache_read_input_tokens": 5}


def test_render_subtracts_cache_from_the_total() -> None:
    out = usage.from_ir(ir.Usage(input_tokens=240, output_tokens=7, cached_tokens=200, cache_creation_tokens=30))
    assert out == {"input_tokens": 10, "output_tokens": 7, "cache_creation_input_tokens": 30,
                   "cache_read_input_tokens": 200}


def test_render_never_goes_negative_and_always_has_every_count() -> None:
    assert usage.from_ir(ir.Usage(input_tokens=5, cached_tokens=9))["input_tokens"] == 0
    assert usage.from_ir(None) == {"input_tokens": 0, "output_tokens": 0, "cache_creation_input_tokens": 0,
                                   "cache_read_input_tokens": 0}


def test_render_reports_reasoning_tokens_as_thinking_tokens() -> None:
    out = usage.from_ir(ir.Usage(output_tokens=9, reasoning_tokens=4))
    assert out["output_tokens_details"] == {"thinking_tokens": 4}


def test_round_trip_keeps_every_field() -> None:
    u = ir.Usage(input_tokens=300, output_tokens=20, cached_tokens=100, cache_creation_tokens=50, reasoning_tokens=8)
    assert usage.to_ir(usage.from_ir(u)) == u


def test_cache_writes_kept_an_hour_are_read_apart_from_five_minute_ones() -> None:
    wire = {"input_tokens": 10, "output_tokens": 3, "cache_read_input_tokens": 0, "cache_creation_input_tokens": 900,
            "cache_creation": {"ephemeral_5m_input_tokens": 300, "ephemeral_1h_input_tokens": 600}}
    got = usage.to_ir(wire)
    assert (got.input_tokens, got.cache_creation_tokens, got.cache_creation_1h_tokens) == (910, 900, 600)
    assert usage.from_ir(got)["cache_creation"] == {"ephemeral_5m_input_tokens": 300, "ephemeral_1h_input_tokens": 600}
    assert "cache_creation" not in usage.from_ir(ir.Usage(input_tokens=5, cache_creation_tokens=5))
