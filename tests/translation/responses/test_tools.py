import pytest

from translation import ir
from translation.responses.tools import (
    build_tool_choice, build_tools, namespaced_name, parse_tool_choice, parse_tools, parse_web_search, split_tool_name)


def test_function_tools_round_trip():
    tools = [ir.Tool("get_weather", "Weather by city", {"type": "object", "properties": {"city": {"type": "string"}}}),
             ir.Tool("noop", None, {"type": "object", "properties": {}})]
    parsed, dropped = parse_tools(build_tools(tools))
    assert parsed == tools and dropped == []


def test_chat_shaped_function_tool_is_accepted():
    parsed, _ = parse_tools([{"type": "function", "function": {"name": "f", "parameters": {"type": "object"}}}])
    assert parsed == [ir.Tool("f", None, {"type": "object"})]


@pytest.mark.parametrize("tool, label", [
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


def test_web_search_is_not_dropped_but_parsed():
    tools = [{"type": "web_search", "external_web_access": True}]
    assert parse_tools(tools) == ([], [])
    assert parse_web_search(tools) == ir.WebSearch()
    assert parse_web_search([{"type": "web_search_preview", "search_context_size": "low"}]) == ir.WebSearch()
    assert parse_web_search([{"type": "function", "name": "f"}]) is None


CODEX_TOOLS = [
    {"type": "function", "name": "exec_command", "parameters": {"type": "object"}},
    {"type": "namespace", "name": "multi_agent_v1", "description": "agents", "tools": [
        {"type": "function", "name": "spawn_agent", "parameters": {"type": "object"}},
        {"type": "function", "name": "close_agent", "parameters": {"type": "object"}}]},
    {"type": "namespace", "name": "mcp__calendar__", "tools": [
        {"type": "function", "name": "create_event", "parameters": {"type": "object"}}]},
]


def test_namespaced_functions_get_flat_unique_names_that_split_back():
    tools, dropped = parse_tools(CODEX_TOOLS)
    names = [t.name for t in tools]
    assert names == ["exec_command", "multi_agent_v1__spawn_agent", "multi_agent_v1__close_agent",
                     "mcp__calendar__create_event"]
    assert len(set(names)) == len(names) and dropped == []
    assert split_tool_name("multi_agent_v1__close_agent", CODEX_TOOLS) == ("multi_agent_v1", "close_agent")
    assert split_tool_name("mcp__calendar__create_event", CODEX_TOOLS) == ("mcp__calendar__", "create_event")
    assert split_tool_name("exec_command", CODEX_TOOLS) == (None, "exec_command")
    assert split_tool_name("multi_agent_v1__close_agent", None) == (None, "multi_agent_v1__close_agent")


def test_a_long_namespaced_name_is_cut_to_64_characters_and_still_splits_back():
    tools = [{"type": "namespace", "name": "n" * 50, "tools": [{"type": "function", "name": "f" * 40}]}]
    (tool,), _ = parse_tools(tools)
    assert len(tool.name) == 64 and tool.name == namespaced_name("n" * 50, "f" * 40)
    assert split_tool_name(tool.name, tools) == ("n" * 50, "f" * 40)
