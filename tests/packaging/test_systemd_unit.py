"""The systemd unit README's production section ships (``deploy/llm-gateway@.service``) is one systemd
accepts without a warning: ``systemd-analyze verify`` on an instance of the template."""

from __future__ import annotations

import re
import shutil
import subprocess
from pathlib import Path

import pytest

from tests.servers import ROOT

UNIT = ROOT / "deploy" / "llm-gateway@.service"
SYSTEMD_ANALYZE = shutil.which("systemd-analyze")


@pytest.mark.skipif(SYSTEMD_ANALYZE is None, reason="systemd-analyze is not installed (Debian's systemd package)")
def test_an_instance_of_the_unit_passes_systemd_analyze_verify(tmp_path: Path) -> None:
    text = UNIT.read_text()
    match = re.search(r"^ExecStart=(\S+) serve .*--port %i\b", text, re.MULTILINE)
    assert match, "ExecStart serves the instance's port with the console script"
    # verify insists that the command exists: the install prefix is pointed at a stand-in here.
    command = tmp_path / "bin" / "llm-gateway"
    command.parent.mkdir()
    command.write_text("#!/bin/sh\n")
    command.chmod(0o755)
    (tmp_path / UNIT.name).write_text(text.replace(match.group(1), str(command)))
    (tmp_path / "llm-gateway@8001.service").symlink_to(UNIT.name)
    assert SYSTEMD_ANALYZE is not None
    done = subprocess.run([SYSTEMD_ANALYZE, "verify", "--man=no", str(tmp_path / "llm-gateway@8001.service")],
                          capture_output=True, text=True, timeout=60, check=False)
    # Warnings (an unknown key, a value that does not parse) leave the exit status 0: none is accepted.
    assert (done.returncode, done.stdout + done.stderr) == (0, "")
