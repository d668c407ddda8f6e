"""The real agent clients (``package.json``: Claude Code, Codex CLI) run headless against a gateway.

Each run is sealed off from the machine it runs on: an empty working directory, a HOME
and config directory of its own, an environment built from scratch (nothing of the
user's keys, settings or proxies leaks in), telemetry, update checks and other
non-essential traffic off, and an HTTP(S) proxy that goes nowhere so that anything but
loopback (which ``NO_PROXY`` exempts) fails at once instead of reaching the internet.
Client retries are off: a retry would hide the failure the test is there to see.
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import threading
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from tests.servers import ROOT

BIN = ROOT / "node_modules" / ".bin"
RUN_SECONDS = 90
# The discard port: nothing listens there, so a request through this proxy fails at once.
NOWHERE = "http://127.0.0.1:9"


@dataclass
class Run:
    command: list[str]
    returncode: int | None  # None: killed after RUN_SECONDS
    stdout: str
    stderr: str

    @property
    def events(self) -> list[dict[str, Any]]:
        """The JSON lines of stdout (both clients print one event per line)."""

        out = []
        for line in self.stdout.splitlines():
            if line.startswith("{"):
                try:
                    out.append(json.loads(line))
                except json.JSONDecodeError:
                    pass  # the transcript is in every failure message anyway
        return out

    def transcript(self) -> str:
        status = f"killed after {RUN_SECONDS}s" if self.returncode is None else f"exit {self.returncode}"
        return (f"\n$ {' '.join(self.command)}\n[{status}]\n--- stdout ---\n{self.stdout[-12000:]}"
                f"\n--- stderr ---\n{self.stderr[-6000:]}")


def executable(name: str) -> str:
    path = BIN / name
    if not path.exists():
        raise AssertionError(f"{path} is missing: `make test` installs the clients (npm ci from package-lock.json)")
    return str(path)


def sealed_env(home: Path, **extra: str) -> dict[str, str]:
    node = shutil.which("node")  # Codex's launcher is a node script
    path = os.pathsep.join(dict.fromkeys([*([str(Path(node).parent)] if node else []), "/usr/bin", "/bin"]))
    return {
        "PATH": path, "HOME": str(home), "TMPDIR": str(home), "LANG": "C.UTF-8", "TERM": "dumb",
        "NO_COLOR": "1", "HTTP_PROXY": NOWHERE, "HTTPS_PROXY": NOWHERE, "ALL_PROXY": NOWHERE,
        "http_proxy": NOWHERE, "https_proxy": NOWHERE, "all_proxy": NOWHERE,
        "NO_PROXY": "127.0.0.1,localhost", "no_proxy": "127.0.0.1,localhost", **extra,
    }


def run(command: list[str], cwd: Path, env: dict[str, str]) -> Run:
    """Run to the end or for RUN_SECONDS at most; a client's helper processes go down with it."""

    proc = subprocess.Popen(command, cwd=cwd, env=env, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, start_new_session=True)
    try:
        out, err = proc.communicate(timeout=RUN_SECONDS)
        code: int | None = proc.returncode
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, signal.SIGKILL)
        out, err = proc.communicate()
        code = None
    return Run(command, code, out.decode("utf-8", "replace"), err.decode("utf-8", "replace"))


def dirs(tmp: Path) -> tuple[Path, Path]:
    home, work = tmp / "home", tmp / "work"
    home.mkdir()
    work.mkdir()
    return home, work


# ------------------------------------------------------------------ Claude Code


def claude_code(gateway_url: str, key: str, model: str, prompt: str, tmp: Path, **overrides: str) -> Run:
    """``claude -p`` with the gateway as its Anthropic API; Bash allowed, every model name routed to ``model``.
    ``overrides``: environment variables set over these (``CLAUDE_CODE_MAX_RETRIES`` to let it retry)."""

    home, work = dirs(tmp)
    env = sealed_env(
        home, CLAUDE_CONFIG_DIR=str(home / ".claude"), ANTHROPIC_BASE_URL=gateway_url, ANTHROPIC_API_KEY=key,
        ANTHROPIC_SMALL_FAST_MODEL=model, ANTHROPIC_DEFAULT_HAIKU_MODEL=model, CLAUDE_CODE_SUBAGENT_MODEL=model,
        DISABLE_TELEMETRY="1", DISABLE_ERROR_REPORTING="1", DISABLE_AUTOUPDATER="1", DISABLE_BUG_COMMAND="1",
        CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC="1", CLAUDE_CODE_DISABLE_FEEDBACK_SURVEY="1",
        CLAUDE_CODE_DISABLE_TERMINAL_TITLE="1", CLAUDE_CODE_MAX_RETRIES="0",
    )
    env.update(overrides)
    command = [executable("claude"), "-p", prompt, "--output-format", "stream-json", "--verbose",
               "--model", model, "--allowedTools", "Bash"]
    return run(command, work, env)


def claude_code_env(home: Path, model: str, retries: bool = False, **extra: str) -> dict[str, str]:
    """The sealed environment of ``claude`` with its own config directory; ``retries``: the client's
    own retry policy (off by default, as in :func:`claude_code`)."""

    return sealed_env(
        home, CLAUDE_CONFIG_DIR=str(home / ".claude"), ANTHROPIC_SMALL_FAST_MODEL=model,
        ANTHROPIC_DEFAULT_HAIKU_MODEL=model, CLAUDE_CODE_SUBAGENT_MODEL=model, DISABLE_TELEMETRY="1",
        DISABLE_ERROR_REPORTING="1", DISABLE_AUTOUPDATER="1", DISABLE_BUG_COMMAND="1",
        CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC="1", CLAUDE_CODE_DISABLE_FEEDBACK_SURVEY="1",
        CLAUDE_CODE_DISABLE_TERMINAL_TITLE="1", **({} if retries else {"CLAUDE_CODE_MAX_RETRIES": "0"}), **extra)


@dataclass
class GatewayLogin:
    """``claude auth login --gateway-json``: the CLI's sign-in to a gateway, driven as the VS Code
    extension drives it (one JSON object a line each way), the developer's approval done by ``approve``."""

    states: list[dict[str, Any]]
    returncode: int | None
    stderr: str

    @property
    def names(self) -> list[str]:
        return [s["state"] for s in self.states]

    def transcript(self) -> str:
        return f"\n[exit {self.returncode}]\n" + "\n".join(json.dumps(s) for s in self.states) + f"\n{self.stderr[-4000:]}"


def claude_code_gateway_login(gateway_url: str, home: Path, approve: Callable[[str], None]) -> GatewayLogin:
    """Sign ``claude`` in to the gateway through the device flow. The user settings name the gateway
    (``forceLoginMethod: gateway``), which is what offers the JSON sign-in; each question the CLI asks
    (the URL, trusting the loopback gateway, the account the token names) is answered yes, and when
    it shows the code, ``approve(user_code)`` approves it on the verification page."""

    config = home / ".claude"
    config.mkdir(parents=True, exist_ok=True)
    settings = {"forceLoginMethod": "gateway", "forceLoginGatewayUrl": gateway_url}
    (config / "settings.json").write_text(json.dumps(settings))
    proc = subprocess.Popen([executable("claude"), "auth", "login", "--gateway-json"], cwd=home,
                            env=claude_code_env(home, "unused"), stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True, bufsize=1, start_new_session=True)
    timer = threading.Timer(RUN_SECONDS, lambda: os.killpg(proc.pid, signal.SIGKILL))
    timer.start()
    states: list[dict[str, Any]] = []
    assert proc.stdin is not None and proc.stdout is not None and proc.stderr is not None
    try:
        for line in proc.stdout:
            if not line.startswith("{"):
                continue
            state = json.loads(line)
            states.append(state)
            if state["state"] in ("url_input", "trust_prompt", "confirm_account"):
                proc.stdin.write(json.dumps({"state": state["state"], "shown": state.get("shown"), "accept": True})
                                 + "\n")
                proc.stdin.flush()
            elif state["state"] == "polling":
                approve(state["userCode"])
            elif state["state"] in ("done", "error"):
                break
        proc.stdin.close()
        code: int | None = proc.wait(timeout=30)
    finally:
        timer.cancel()
    return GatewayLogin(states, code if code is not None and code >= 0 else None, proc.stderr.read())


def claude_code_signed_in(home: Path, work: Path, model: str, prompt: str, retries: bool = False) -> Run:
    """``claude -p`` as a developer signed in to the gateway (no base URL, no key: the stored sign-in)."""

    command = [executable("claude"), "-p", prompt, "--output-format", "stream-json", "--verbose",
               "--model", model, "--allowedTools", "Bash"]
    return run(command, work, claude_code_env(home, model, retries))


# ------------------------------------------------------------------ Codex CLI


def codex_config(gateway_url: str, model: str, catalog: bool = False, compact_above: int | None = None,
                 websockets: bool = False) -> str:
    """``catalog``: Codex reads the gateway's model catalog (``GET /v1/models?client_version=…``).

    ``compact_above``: Codex compacts the conversation once it holds more tokens than this, and
    remotely (asking the gateway, README "Codex CLI"): it does so only for a provider it takes
    for OpenAI's own, which it tells by the provider's ``name``.

    ``websockets``: Codex speaks to /v1/responses over a websocket (``supports_websockets``).
    """

    catalog_url = f'model_catalog_url = "{gateway_url}/v1/models"\n' if catalog else ""
    catalog_url += "supports_websockets = true\n" if websockets else ""
    compact = f"model_auto_compact_token_limit = {compact_above}\n" if compact_above is not None else ""
    name = "OpenAI" if compact_above is not None else "gateway"
    return f"""\
model = "{model}"
model_provider = "gateway"
check_for_update_on_startup = false
{compact}
[analytics]
enabled = false

[model_providers.gateway]
name = "{name}"
base_url = "{gateway_url}/v1"
wire_api = "responses"
{catalog_url}env_key = "GATEWAY_API_KEY"
request_max_retries = 0
stream_max_retries = 0
"""


def codex(gateway_url: str, key: str, model: str, prompt: str, tmp: Path, catalog: bool = False,
          websockets: bool = False) -> Run:
    """``codex exec`` with the gateway as a custom Responses provider, sandbox and approvals off (a container)."""

    home, work = dirs(tmp)
    codex_home = home / ".codex"
    codex_home.mkdir()
    (codex_home / "config.toml").write_text(codex_config(gateway_url, model, catalog, websockets=websockets))
    env = sealed_env(home, CODEX_HOME=str(codex_home), GATEWAY_API_KEY=key)
    command = [executable("codex"), "exec", "--json", "--strict-config", "--skip-git-repo-check", "--ephemeral",
               "--dangerously-bypass-approvals-and-sandbox", prompt]
    return run(command, work, env)


def codex_conversation(gateway_url: str, key: str, model: str, prompts: list[str], tmp: Path,
                       compact_above: int) -> list[Run]:
    """One Codex session over several ``codex exec`` runs (the first starts it, each next one
    resumes it), compacting once it holds more than ``compact_above`` tokens."""

    home, work = dirs(tmp)
    codex_home = home / ".codex"
    codex_home.mkdir()
    (codex_home / "config.toml").write_text(codex_config(gateway_url, model, compact_above=compact_above))
    env = sealed_env(home, CODEX_HOME=str(codex_home), GATEWAY_API_KEY=key)
    runs = []
    for i, prompt in enumerate(prompts):
        resume = ["resume", "--last"] if i else []
        command = [executable("codex"), "exec", "--json", "--strict-config", "--skip-git-repo-check",
                   "--dangerously-bypass-approvals-and-sandbox", *resume, prompt]
        runs.append(run(command, work, env))
    return runs
