"""README is a newcomer's first hour: every path it names is in the repository, the demo pool
(`make run`) routes every scripted scenario it lists, and its recipes work as written against the
demo: the Python snippet, Claude Code and Codex (the real clients of package.json)."""

from __future__ import annotations

import io
import re
import shlex
import subprocess
import sys
import tomllib
from pathlib import Path
from typing import Any

import pytest
from django.core.management import call_command

from accounts import configversion
from accounts.config_file import load, load_file
from gateway.exchange.routing import resolve
from gateway.state import _load
from mockupstream import scenarios
from tests.clients import agents
from tests.e2e.conftest import gateway, mock_upstream  # noqa: F401 - the demo's servers
from tests.servers import Server, seen

ROOT = Path(__file__).resolve().parent.parent
README = (ROOT / "README.md").read_text()
# Made by `make run` / `make test`, never committed.
GENERATED = {".venv", "node_modules", "db.sqlite3", "var", "artifacts", "staticfiles", ".env",
             "tests/tokenizer/node_modules"}


def tracked() -> set[str]:
    files = subprocess.run(["git", "ls-files"], cwd=ROOT, capture_output=True, text=True, check=True).stdout.split()
    dirs = {str(Path(f).parent) for f in files}
    return set(files) | {d for f in files for d in _parents(f)} | dirs


def _parents(path: str) -> list[str]:
    return [str(p) for p in Path(path).parents if str(p) != "."]


def mentioned_paths() -> set[str]:
    """Paths README names in code spans and links whose first part is one of the repository's own."""

    tops = {p.name for p in ROOT.iterdir()} | GENERATED
    spans = re.findall(r"`([^`\n]+)`", README) + re.findall(r"\]\(([^)#\s]+)", README)
    out = set()
    for span in spans:
        for word in span.split():
            word = word.split(":")[0].rstrip(",.;)")
            if word.startswith(("../", "~/", "/work/", "/home/", "/tmp/", "/Users/")):
                out.add(word)
            elif word.split("/")[0] in tops and ("/" in word or "." in word):
                out.add(word)
    return out


def test_readme_points_only_inside_the_repository_at_what_is_there() -> None:
    files = tracked()
    paths = mentioned_paths()
    assert "gateway/exchange/forwarding.py" in paths and "docs/DESIGN.md" in paths  # the scan sees README's paths
    outside = sorted(p for p in paths if p.startswith(("../", "~", "/")))
    assert not outside, f"README points outside the repository: {outside}"
    missing = sorted(p for p in paths if p.rstrip("/") not in files
                     and not any(p == g or p.startswith(g + "/") for g in GENERATED))
    assert not missing, f"README names paths that are not in the repository: {missing}"


def readme_scenarios() -> list[str]:
    """The model names README's scripted-upstream section lists, placeholders filled in."""

    section = README.split("## The scripted upstream", 1)[1].split("\n## ", 1)[0]
    names = set(re.findall(r"`(mock-[A-Za-z0-9<>-]+)`", section))
    return sorted(n.replace("<N>", "8").replace("<MS>", "20") for n in names)


def test_readme_lists_every_scenario_the_scripted_upstream_offers() -> None:
    listed = set(readme_scenarios())
    assert {m for m in scenarios.MODELS if m not in listed and not m.startswith("mock-delay-")} == set()
    assert "mock-delay-20" in listed


@pytest.mark.django_db
@pytest.mark.parametrize("model", [*readme_scenarios(), "gpt-5-mini", "claude-sonnet-4-6"])
def test_the_demo_pool_routes_every_model_readme_names(model: str) -> None:
    load_file(ROOT / "deploy" / "demo.toml")
    route = resolve(model, _load())
    assert route.provider.base_url.startswith("http://127.0.0.1:9300/")


def loadconfig(path: Path, text: str) -> str:
    path.write_text(text)
    out = io.StringIO()
    call_command("loadconfig", str(path), stdout=out)
    return out.getvalue()


@pytest.mark.django_db
def test_loadconfig_run_twice_says_that_nothing_changed_and_changes_nothing(tmp_path: Path) -> None:
    demo, path = (ROOT / "deploy" / "demo.toml").read_text(), tmp_path / "pool.toml"
    assert "client_keys: 2 created, 0 updated, 0 unchanged" in loadconfig(path, demo)
    version = configversion.read()
    again = loadconfig(path, demo)
    assert "accounts: 0 created, 0 updated, 9 unchanged" in again and "Nothing changed" in again
    assert configversion.read() == version  # nothing written: no gateway process re-reads its configuration
    changed = loadconfig(path, demo.replace('key = "gw-demo-key"', 'key = "gw-demo-key"\nrate_limit_per_minute = 60'))
    assert "client_keys: 0 created, 1 updated, 1 unchanged" in changed and "Nothing changed" not in changed
    assert configversion.read() > version


# ------------------------------------------------------------------ the recipes, run as written

DEMO_URL = "http://127.0.0.1:8000"  # `make run`'s gateway, which the recipes name
ANSWER = "Hello! This is the mock upstream."


def fenced(section: str) -> list[tuple[str, str]]:
    """(language, text) of each fenced block in the README section under ``section``."""

    body = README.split(section + "\n", 1)[1]
    body = re.split(r"\n#{2,3} ", body, maxsplit=1)[0]
    return re.findall(r"```(\w+)\n(.*?)```", body, re.DOTALL)


def shell(recipe: str, url: str) -> tuple[dict[str, str], list[str]]:
    """A recipe's ``export``s (the demo's URL replaced by ``url``) and its one command, from the checkout."""

    env, commands = {}, []
    for line in recipe.strip().splitlines():
        if line.startswith("export "):
            name, value = line.removeprefix("export ").split("=", 1)
            env[name] = value.replace(DEMO_URL, url)
        else:
            commands.append(shlex.split(line))
    (command,) = commands
    return env, [str(agents.ROOT / command[0]), *command[1:]]


@pytest.fixture
def demo(transactional_db: Any, mock_upstream: Server, gateway: Server) -> Server:  # noqa: F811
    """`make run`'s demo pool (deploy/demo.toml) on the tests' scripted upstream and gateway."""

    pool = (ROOT / "deploy" / "demo.toml").read_text().replace("http://127.0.0.1:9300/", mock_upstream.url + "/")
    load(tomllib.loads(pool))
    seen(gateway)
    return gateway


def test_the_python_snippet_prints_the_answer_through_both_protocols(demo: Server, tmp_path: Path) -> None:
    (code,) = [text for lang, text in fenced("## The two commands") if lang == "python"]
    script = tmp_path / "hello.py"
    script.write_text(code.replace(DEMO_URL, demo.url))
    # The virtualenv's Python, as README says (the one running this test).
    done = subprocess.run([sys.executable, str(script)], cwd=tmp_path, capture_output=True, text=True, timeout=60,
                          check=False)
    assert (done.returncode, done.stdout.splitlines()) == (0, [ANSWER, ANSWER]), done.stderr


@pytest.mark.parametrize("key_variable", ["ANTHROPIC_AUTH_TOKEN", "ANTHROPIC_API_KEY"])
def test_the_claude_code_recipe_answers_through_the_demo(demo: Server, tmp_path: Path, key_variable: str) -> None:
    blocks = fenced("### Claude Code and Codex against the demo")
    recipe = next(text for lang, text in blocks if lang == "sh" and "ANTHROPIC_BASE_URL" in text)
    assert "ANTHROPIC_AUTH_TOKEN" in recipe  # as written; the other spelling README names too
    env, command = shell(recipe.replace("ANTHROPIC_AUTH_TOKEN", key_variable), demo.url)
    home, work = agents.dirs(tmp_path)
    run = agents.run(command, work, agents.sealed_env(
        home, **env, DISABLE_TELEMETRY="1", DISABLE_ERROR_REPORTING="1", DISABLE_AUTOUPDATER="1",
        CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC="1", CLAUDE_CODE_MAX_RETRIES="0"))
    assert (run.returncode, run.stdout.strip()) == (0, ANSWER), run.transcript()


def test_the_codex_recipe_answers_through_the_demo(demo: Server, tmp_path: Path) -> None:
    blocks = fenced("### Claude Code and Codex against the demo")
    (config,) = [text for lang, text in blocks if lang == "toml"]
    recipe = next(text for lang, text in blocks if lang == "sh" and "codex" in text)
    env, command = shell(recipe, demo.url)
    home, work = agents.dirs(tmp_path)
    codex_home = home / ".codex"
    codex_home.mkdir()
    # The recipe's file, plus only what keeps the run off the network (update checks, analytics).
    (codex_home / "config.toml").write_text("check_for_update_on_startup = false\n" + config.replace(DEMO_URL, demo.url)
                                            + "\n[analytics]\nenabled = false\n")
    run = agents.run(command, work, agents.sealed_env(home, **env))
    assert (run.returncode, run.stdout.strip()) == (0, ANSWER), run.transcript()
