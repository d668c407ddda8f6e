"""The gateway as a user installs it: ``pip wheel .``, a fresh virtualenv outside the checkout, the
``llm-gateway`` command, and both servers answering from what was installed (issue 22 item 9).

The wheel is built from the checkout's tracked files copied elsewhere (nothing untracked can slip
in) and installed with ``pip install --no-index``: its dependencies come from a wheelhouse
repacked from this virtualenv (tests/packaging/wheelhouse.py), since a test reaches no package
index. The fresh virtualenv sees nothing of the checkout or of this virtualenv: another
directory, an environment built from scratch, no PYTHONPATH. It keeps its own `.env` and SQLite
database in a home directory: the current directory under uvicorn, ``GATEWAY_HOME`` under Daphne.
"""

from __future__ import annotations

import contextlib
import re
import shutil
import signal
import subprocess
import sys
import tomllib
import zipfile
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx
import openai
import pytest

from tests.packaging import wheelhouse
from tests.servers import ROOT, free_port, wait_http

pytestmark = pytest.mark.slow

# What the wheel leaves out: the test suite and the bench (the runtime imports neither).
LEFT_OUT = ("tests", "bench")


def tracked() -> list[str]:
    out = subprocess.run(["git", "ls-files", "-z"], cwd=ROOT, capture_output=True, check=True).stdout
    return [f for f in out.decode().split("\0") if f and (ROOT / f).is_file()]


def run(args: list[str], **kwargs: Any) -> subprocess.CompletedProcess[str]:
    done = subprocess.run(args, check=False, capture_output=True, text=True, timeout=240, **kwargs)
    assert done.returncode == 0, f"$ {' '.join(map(str, args))}\n{done.stdout[-4000:]}\n{done.stderr[-4000:]}"
    return done


@pytest.fixture(scope="module")
def wheel(tmp_path_factory: pytest.TempPathFactory) -> Path:
    src, dist = tmp_path_factory.mktemp("src"), tmp_path_factory.mktemp("dist")
    for name in tracked():
        (src / name).parent.mkdir(parents=True, exist_ok=True)
        shutil.copy2(ROOT / name, src / name)
    # No build isolation: the build backend is this virtualenv's setuptools (pyproject's dev extra), not PyPI's.
    run([sys.executable, "-m", "pip", "wheel", "--isolated", "--no-index", "--no-deps", "--no-build-isolation",
         "--wheel-dir", str(dist), str(src)])
    (built,) = dist.glob("llm_gateway-*.whl")
    return built


@dataclass
class Installed:
    venv: Path
    env: dict[str, str]  # a clean environment with the virtualenv's bin/ first on PATH
    home: Path  # the gateway's .env and SQLite database

    def bin(self, name: str) -> str:
        return str(self.venv / "bin" / name)


@pytest.fixture(scope="module")
def installed(wheel: Path, tmp_path_factory: pytest.TempPathFactory) -> Installed:
    base = tmp_path_factory.mktemp("installed")
    assert not base.resolve().is_relative_to(ROOT.resolve())
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    wheelhouse.build(project["dependencies"], base / "wheelhouse")
    venv = base / "venv"
    run([sys.executable, "-m", "venv", str(venv)])
    env = {"PATH": f"{venv / 'bin'}:/usr/bin:/bin", "HOME": str(base), "LANG": "C.UTF-8", "TMPDIR": str(base)}
    run([str(venv / "bin" / "python"), "-m", "pip", "install", "--isolated", "--no-index", "--quiet",
         "--find-links", str(base / "wheelhouse"), "--find-links", str(wheel.parent), "llm-gateway"],
        env=env, cwd=base)
    home = base / "home"
    home.mkdir()
    # What a deployment writes once; read from the home directory, not from the environment.
    (home / ".env").write_text("DEBUG=0\nSECRET_KEY=packaging-test-" + "k" * 40 + "\n")
    return Installed(venv, env, home)


@pytest.fixture(scope="module")
def demo(installed: Installed) -> Iterator[None]:
    """The demo of `make run`, from the installed command alone: migrated, the demo pool loaded,
    its scripted upstream serving (``llm-gateway mockupstream``)."""

    run([installed.bin("llm-gateway"), "migrate", "--noinput"], env=installed.env, cwd=installed.home)
    port = free_port()
    mock = subprocess.Popen([installed.bin("llm-gateway"), "mockupstream", "--host", "127.0.0.1", "--port", str(port)],
                            env=installed.env, cwd=installed.home, stdout=subprocess.PIPE, stderr=subprocess.STDOUT)
    try:
        wait_http(f"http://127.0.0.1:{port}/v1/models", mock)
        pool = (ROOT / "deploy" / "demo.toml").read_text().replace("127.0.0.1:9300/", f"127.0.0.1:{port}/")
        run([installed.bin("llm-gateway"), "loadconfig", "-"], input=pool, env=installed.env, cwd=installed.home)
        yield
    finally:
        mock.send_signal(signal.SIGTERM)
        mock.wait(10)


@contextlib.contextmanager
def serving(args: list[str], port: int, installed: Installed, cwd: Path, **env: str) -> Iterator[str]:
    proc = subprocess.Popen(args, env={**installed.env, **env}, cwd=cwd, stdout=subprocess.PIPE,
                            stderr=subprocess.STDOUT)
    try:
        wait_http(f"http://127.0.0.1:{port}/healthz", proc)
        yield f"http://127.0.0.1:{port}"
    finally:
        proc.send_signal(signal.SIGTERM)
        try:
            proc.wait(20)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()


def smoke(url: str) -> None:
    """A chat completion through the demo pool, and the admin's login page with every stylesheet and
    script it names (Django's admin assets and the gateway's own, served by the installed packages)."""

    client = openai.OpenAI(base_url=url + "/v1", api_key="gw-demo-key", max_retries=0)
    answer = client.chat.completions.create(model="mock-text", messages=[{"role": "user", "content": "Hi"}])
    assert answer.choices[0].message.content == "Hello! This is the mock upstream."
    page = httpx.get(url + "/admin/login/", timeout=10)
    assert page.status_code == 200 and 'name="password"' in page.text
    assets = re.findall(r'<link[^>]+href="(/static/[^"]+)"', page.text) + re.findall(r'<script[^>]+src="(/static/[^"]+)"',
                                                                                      page.text)
    assert "/static/accounts/admin.css" in assets and "/static/admin/css/base.css" in assets, assets
    for asset in assets:
        got = httpx.get(url + asset, timeout=10)
        assert got.status_code == 200 and got.content, asset


def test_the_wheel_holds_every_package_template_and_static_file(wheel: Path) -> None:
    names = set(zipfile.ZipFile(wheel).namelist())
    needed = [f for f in tracked() if f.split("/")[0] not in LEFT_OUT and "/" in f
              and (f.endswith("/__init__.py") or "/templates/" in f or "/static/" in f)]
    assert {"alerts/__init__.py", "gateway/templates/admin/base_site.html", "accounts/static/accounts/admin.css",
            "mockupstream/__init__.py"} <= set(needed)  # the scan sees what it is about
    assert sorted(set(needed) - names) == []
    assert not [n for n in names if n.split("/")[0] in LEFT_OUT]
    (entry_points,) = [n for n in names if n.endswith(".dist-info/entry_points.txt")]
    assert "llm-gateway = gateway.cli:main" in zipfile.ZipFile(wheel).read(entry_points).decode()


def test_the_installed_gateway_runs_nothing_from_the_checkout(installed: Installed) -> None:
    where = run([installed.bin("python"), "-c", "import alerts, gateway, mockupstream; print(gateway.__file__)"],
                env=installed.env, cwd=installed.home).stdout.strip()
    assert Path(where).is_relative_to(installed.venv), where
    checked = run([installed.bin("llm-gateway"), "check"], env=installed.env, cwd=installed.home)
    assert "no issues" in checked.stdout
    usage = run([installed.bin("llm-gateway")], env=installed.env, cwd=installed.home).stdout
    assert "llm-gateway serve" in usage and "loadconfig" in usage and "mockupstream" in usage


def test_the_console_script_serves_on_uvicorn_from_its_home(installed: Installed, demo: None) -> None:
    port = free_port()
    # The current directory is the home: its .env and db.sqlite3.
    with serving([installed.bin("llm-gateway"), "serve", "--port", str(port),
                  "--log-level", "warning"], port, installed, installed.home) as url:
        smoke(url)
    assert (installed.home / "db.sqlite3").is_file()


def test_daphne_serves_the_installed_application_from_gateway_home(installed: Installed, demo: None,
                                                                   tmp_path: Path) -> None:
    port = free_port()
    # Started elsewhere: GATEWAY_HOME names the home (the demo pool is in its database).
    with serving([installed.bin("daphne"), "-b", "127.0.0.1", "-p", str(port), "-v", "0",
                  "gateway.asgi:application"], port, installed, tmp_path, GATEWAY_HOME=str(installed.home)) as url:
        smoke(url)
    assert not (tmp_path / "db.sqlite3").exists()
