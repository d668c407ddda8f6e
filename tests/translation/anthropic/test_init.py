from translation import anthropic
from translation.anthropic.decode import AnthropicStreamDecoder
from translation.anthropic.encode import AnthropicStreamEncoder
from translation.protocol import EncodeContext


def test_module_exports_the_protocol_interface() -> None:
    assert (anthropic.NAME, anthropic.PATH) == ("anthropic", "/messages")
    for name in ("parse_request", "build_request", "passthrough_request", "parse_response", "render_response",
                 "stream_decoder", "stream_encoder", "render_error", "parse_error"):
        assert callable(getattr(anthropic, name)), name


def test_factories_return_fresh_instances() -> None:
    decoder = anthropic.stream_decoder()
    assert isinstance(decoder, AnthropicStreamDecoder) and decoder.unknown_events == 0
    assert anthropic.stream_decoder() is not decoder
    assert isinstance(anthropic.stream_encoder(EncodeContext(model="m")), AnthropicStreamEncoder)
