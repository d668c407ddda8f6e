import pytest

from translation import ir
from translation.responses.tools import build_tool_choice, build_tools, parse_tool_choice, parse_tools


def test_function_tools_round_trip():
    tools = [ir.Tool("get_weather", "Weather by city", {"type": "object", "properties": {"city": {"type": "string"}}}),
             ir.Tool("noop", None, {"type": "object", "properties": {}})]
    parsed, dropped = parse_tools(build_tools(tools))
    assert parsed == tools and dropped == []


def test_chat_shaped_function_tool_is_accepted():
    parsed, _ = parse_tools([{"type": "function", "function": {"name": "f", "parameters": {"type": "object"}}}])
    assert parsed == [ir.Tool("f", None, {"type": "object"})]


@pytest.mark.parametrize("tool, label", [
    ({"type": "web_search"}, "web_search"),
    ({"type": "web_search_preview", "search_context_size": "low"}, "web_search_preview"),
    ({"type": "file_search", "vector_store_ids": ["vs_1"]}, "file_search"),
    ({"type": "mcp", "server_label": "deepwiki", "server_url": "https://mcp.deepwiki.com/mcp"}, "mcp"),
    ({"type": "custom", "name": "apply_patch", "format": {"type": "text"}}, "custom:apply_patch"),
    ({"type": "local_shell"}, "local_shell"),
    ({"type": "computer_use_preview", "display_width": 1024}, "computer_use_preview"),
    ({"type": "image_generation"}, "image_generation"),
    ({"type": "code_interpreter", "container": {"type": "auto"}}, "code_interpreter"),
    ({"type": "some_tool_from_the_future"}, "some_tool_from_the_future"),
])
def test_builtin_tools_are_recorded_as_dropped_never_rejected(tool, label):
    assert parse_tools([tool]) == ([], [label])


def test_tool_choice_round_trip():
    for choice in (ir.ToolChoice("auto"), ir.ToolChoice("none"), ir.ToolChoice("required"),
                   ir.ToolChoice("named", name="f")):
        assert parse_tool_choice(build_tool_choice(choice)) == choice
