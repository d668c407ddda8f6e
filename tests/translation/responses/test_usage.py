from translation import ir
from translation.responses.usage import parse_usage, render_usage


def test_parses_details_as_subsets():
    usage = parse_usage({"input_tokens": 9463, "input_tokens_details": {"cached_tokens": 8320},
                         "output_tokens": 582, "output_tokens_details": {"reasoning_tokens": 512},
                         "total_tokens": 10045})
    assert usage == ir.Usage(input_tokens=9463, output_tokens=582, cached_tokens=8320, reasoning_tokens=512)


def test_parses_cache_write_tokens_as_cache_creation():
    usage = parse_usage({"input_tokens": 10, "output_tokens": 1,
                         "input_tokens_details": {"cached_tokens": 0, "cache_write_tokens": 7}})
    assert usage is not None and usage.cache_creation_tokens == 7


def test_missing_or_odd_values_stay_unknown():
    assert parse_usage(None) is None
    assert parse_usage("12") is None
    usage = parse_usage({"input_tokens": True, "output_tokens": "3", "input_tokens_details": None})
    assert usage == ir.Usage()


def test_renders_every_field_with_zero_for_unknown():
    assert render_usage(ir.Usage(input_tokens=5)) == {
        "input_tokens": 5,
        "input_tokens_details": {"cached_tokens": 0, "cache_write_tokens": 0},
        "output_tokens": 0,
        "output_tokens_details": {"reasoning_tokens": 0},
        "total_tokens": 5,
    }


def test_render_then_parse_round_trips():
    usage = ir.Usage(input_tokens=100, output_tokens=40, cached_tokens=64, cache_creation_tokens=3,
                     reasoning_tokens=20)
    assert parse_usage(render_usage(usage)) == usage
