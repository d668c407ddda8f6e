"""``mock-shell``: the agent clients' shell tools called with the command the prompt names."""

from __future__ import annotations

import json

import pytest

from mockupstream import scenarios
from translation import fold, ir

BASH = ir.Tool("Bash", "Run a command", {"type": "object", "properties": {
    "command": {"type": "string"}, "description": {"type": "string"}}, "required": ["command"]})
EXEC = ir.Tool("exec_command", "Runs a command in a PTY", {"type": "object", "properties": {
    "cmd": {"type": "string"}, "workdir": {"type": "string"}}, "required": ["cmd"]})
SHELL = ir.Tool("shell", "Runs a command", {"type": "object", "properties": {
    "command": {"type": "array", "items": {"type": "string"}}}})
READ = ir.Tool("Read", "Read a file", {"type": "object", "properties": {"file_path": {"type": "string"}}})


def ask(*texts: str, tools: list[ir.Tool]) -> ir.Request:
    return ir.Request(model="mock-shell", messages=[ir.Message("user", [ir.TextPart(t) for t in texts])],
                      tools=tools)


def only_call(req: ir.Request) -> tuple[str, dict[str, object]]:
    resp = fold.fold(scenarios.plan(req, "anthropic").answer)
    assert resp.finish is not None and resp.finish.reason is ir.FinishReason.TOOL_CALLS
    (call,) = resp.blocks
    assert call.kind == "tool_call" and call.name is not None and call.id
    return call.name, json.loads(call.text)


@pytest.mark.parametrize(("tool", "arguments"), [
    (BASH, {"command": "echo acc-tool-ok-42"}),
    (EXEC, {"cmd": "echo acc-tool-ok-42"}),
    (SHELL, {"command": ["bash", "-lc", "echo acc-tool-ok-42"]}),
], ids=["claude-code-bash", "codex-exec-command", "codex-shell"])
def test_calls_the_shell_tool_with_the_backtick_quoted_command(tool: ir.Tool, arguments: dict[str, object]) -> None:
    req = ask("Run `echo acc-tool-ok-42` and tell me what it printed.", tools=[READ, tool])
    assert only_call(req) == (tool.name, arguments)


def test_an_echo_in_the_prompt_is_the_command_up_to_the_end_of_the_line() -> None:
    req = ask("Please run echo hello-marker-7\nthen report.", tools=[EXEC])
    assert only_call(req) == ("exec_command", {"cmd": "echo hello-marker-7"})


def test_the_prompt_is_the_last_text_of_the_message_not_the_clients_context_before_it() -> None:
    req = ask("<system-reminder>Tools such as `ls -la` are available.</system-reminder>",
              "Run `echo the-prompt-wins`.", tools=[BASH])
    assert only_call(req)[1]["command"] == "echo the-prompt-wins"


def test_without_a_command_in_the_prompt_it_runs_the_captures_marker() -> None:
    assert only_call(ask("Run the marker command.", tools=[BASH]))[1] == {"command": "echo acc-tool-ok"}


def test_answers_with_what_the_tool_printed_once_the_result_is_back() -> None:
    req = ask("Run `echo acc-tool-ok-42`.", tools=[BASH])
    req.messages += [
        ir.Message("assistant", [ir.ToolCallPart("call_1", "Bash", '{"command": "echo acc-tool-ok-42"}')]),
        ir.Message("user", [ir.ToolResultPart("call_1", [ir.TextPart("acc-tool-ok-42\n")])]),
    ]
    resp = fold.fold(scenarios.plan(req, "responses").answer)
    assert [b.kind for b in resp.blocks] == ["text"]
    assert resp.blocks[0].text == "The command printed: acc-tool-ok-42\n"
    assert resp.finish == ir.Finish(ir.FinishReason.STOP)


@pytest.mark.parametrize("tools", [[], [READ], [ir.Tool("Bash", None, {"type": "object", "properties": {}})]],
                         ids=["no-tools", "no-shell-tool", "bash-without-command"])
def test_without_a_shell_tool_it_answers_the_plain_text(tools: list[ir.Tool]) -> None:
    resp = fold.fold(scenarios.plan(ask("Run `echo x`.", tools=tools), "openai_chat").answer)
    assert [b.text for b in resp.blocks] == [scenarios.HELLO]


def test_mock_shell_reasoning_thinks_first_then_calls_the_shell_tool() -> None:
    req = ask("Run `echo acc-tool-ok-42`.", tools=[BASH])
    req.model = "mock-shell-reasoning"
    resp = fold.fold(scenarios.plan(req, "anthropic").answer)
    assert [b.kind for b in resp.blocks] == ["reasoning", "tool_call"]
    assert resp.blocks[0].text == scenarios.THINKING and resp.blocks[0].signature
    assert json.loads(resp.blocks[1].text) == {"command": "echo acc-tool-ok-42"}
    assert resp.finish is not None and resp.finish.reason is ir.FinishReason.TOOL_CALLS
