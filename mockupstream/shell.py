"""``mock-shell``'s two questions: which tool runs a shell command, and which command to run.

The agent clients each bring their own shell tool: Claude Code ``Bash`` (``command``: a
string), Codex ``exec_command`` (``cmd``: a string) and older Codex ``shell``
(``command``: an argv array). The command comes from the user's own words, so a test
chooses what the client really executes: the first backtick-quoted text of the last user
prompt, else its first ``echo …`` up to the end of the line, else :data:`DEFAULT_COMMAND`
(the command of the captures in ``tests/fixtures/clients/``).
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any

from translation import ir

DEFAULT_COMMAND = "echo acc-tool-ok"

# Tool name → the argument that carries the command.
SHELL_TOOLS: dict[str, str] = {"Bash": "command", "exec_command": "cmd", "shell": "command"}

_QUOTED = re.compile(r"`([^`\n]+)`")
_ECHO = re.compile(r"\becho [^\n`]+")


@dataclass(frozen=True)
class ShellTool:
    name: str
    argument: str
    argv: bool  # the command goes as ["bash", "-lc", command] (an array-typed argument)

    def arguments(self, command: str) -> dict[str, Any]:
        return {self.argument: ["bash", "-lc", command] if self.argv else command}


def shell_tool(req: ir.Request) -> ShellTool | None:
    """The request's first tool that runs shell commands, when it has one."""

    for tool in req.tools:
        argument = SHELL_TOOLS.get(tool.name)
        props = tool.parameters.get("properties") if isinstance(tool.parameters, dict) else None
        if argument is None or not isinstance(props, dict) or not isinstance(props.get(argument), dict):
            continue
        return ShellTool(tool.name, argument, props[argument].get("type") == "array")
    return None


def marker_command(req: ir.Request) -> str:
    """The command the last user prompt asks for (see the module docstring)."""

    for msg in reversed(req.messages):
        texts = [p.text for p in msg.parts if isinstance(p, ir.TextPart)]
        if msg.role != "user" or not texts:
            continue
        # The prompt is the message's last text; clients put their own context blocks before it.
        for text in reversed(texts):
            if m := _QUOTED.search(text):
                return m[1].strip()
            if m := _ECHO.search(text):
                return m[0].strip()
        break
    return DEFAULT_COMMAND
