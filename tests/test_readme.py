"""README is a newcomer's first hour: every path it names is in the repository, and the demo pool
(`make run`) routes every scripted scenario it lists."""

from __future__ import annotations

import io
import re
import subprocess
from pathlib import Path

import pytest
from django.core.management import call_command

from accounts import configversion
from accounts.config_file import load_file
from gateway.exchange.routing import resolve
from gateway.state import _load
from mockupstream import scenarios

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
