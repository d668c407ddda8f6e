"""A wheelhouse for installing the gateway's wheel offline: its dependencies, repacked as wheels
from what this virtualenv already has installed.

The test machines reach no package index from a test, and pip installs a wheel's dependencies
only from wheels it can find. Every distribution pip installed keeps its files and its wheel tags
(``RECORD``, ``WHEEL``), which is all a wheel is; so the closure of the project's declared
dependencies is zipped back into wheels, and ``pip install --no-index --find-links`` resolves
the project's ``dependencies`` against them as it would against PyPI. A dependency the wheel's
metadata leaves out is therefore missing in the fresh virtualenv, as it would be for a user.
Console scripts are not copied: pip writes them again from ``entry_points.txt``.
"""

from __future__ import annotations

import base64
import hashlib
import re
import zipfile
from importlib import metadata
from pathlib import Path

from packaging.requirements import Requirement
from packaging.utils import canonicalize_name


def closure(requirements: list[str]) -> list[metadata.Distribution]:
    """The installed distributions that ``requirements`` need, their own needs included."""

    found: dict[str, metadata.Distribution] = {}
    done: set[tuple[str, tuple[str, ...]]] = set()
    pending = [(Requirement(r), "") for r in requirements]
    while pending:
        req, extra = pending.pop()
        if req.marker is not None and not req.marker.evaluate({"extra": extra}):
            continue
        dist = metadata.distribution(req.name)  # PackageNotFoundError: the venv lacks a dependency
        key = canonicalize_name(dist.metadata["Name"])
        extras = tuple(sorted(req.extras))
        if (key, extras) in done:
            continue
        done.add((key, extras))
        found[key] = dist
        for line in dist.requires or []:
            sub = Requirement(line)
            for wanted in ["", *extras]:
                pending.append((sub, wanted))
    return list(found.values())


def repack(dist: metadata.Distribution, out: Path) -> Path:
    """``dist`` as installed, zipped back into a wheel in ``out``."""

    wheel = dist.read_text("WHEEL") or ""
    tags = [line.split(":", 1)[1].strip() for line in wheel.splitlines() if line.startswith("Tag:")]
    files = [f for f in dist.files or [] if not str(f).startswith("..") and "__pycache__" not in f.parts]
    if not tags or not files:
        raise RuntimeError(f"{dist.metadata['Name']} was not installed from a wheel: it cannot be repacked")
    name = re.sub(r"[-_.]+", "_", dist.metadata["Name"]).lower()
    # The tags compressed as a wheel's name writes them ("py2.py3-none-any"): pip reads them there.
    parts = [".".join(dict.fromkeys(t.split("-")[i] for t in tags)) for i in range(3)]
    target = out / f"{name}-{dist.version}-{'-'.join(parts)}.whl"
    record_name = next(str(f) for f in files if f.name == "RECORD" and f.parent.name.endswith(".dist-info"))
    rows = []
    with zipfile.ZipFile(target, "w", zipfile.ZIP_STORED) as whl:
        for f in files:
            path = Path(str(dist.locate_file(f)))
            if str(f) == record_name or not path.is_file():
                continue
            data = path.read_bytes()
            whl.writestr(str(f), data)
            digest = base64.urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(b"=").decode()
            rows.append(f"{f},sha256={digest},{len(data)}")
        whl.writestr(record_name, "\n".join([*rows, f"{record_name},,"]) + "\n")
    return target


def build(requirements: list[str], out: Path) -> list[Path]:
    out.mkdir(parents=True, exist_ok=True)
    return [repack(dist, out) for dist in closure(requirements)]
