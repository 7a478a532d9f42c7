"""Earlier releases of otelhooks as baselines, read from git history rather than copied.

``package_at(commit, name)`` extracts the ``otelhooks`` package as it was at ``commit`` (``git
archive``) into ``.cache/baselines/`` (git-ignored) under another name, and imports it. A clone
without that commit (a shallow one) gets ``None``, and the benchmark says so.
"""

from __future__ import annotations

import importlib
import io
import shutil
import subprocess
import sys
import tarfile
from pathlib import Path
from types import ModuleType
from typing import Any

from benchmarks.harness import ROOT

# The redactor of otelhooks 0.1.0, and the one the redaction rework of issue 21 started from.
REDACTOR_0_1_0 = "c5783ba"
REDACTOR_BEFORE_REWORK = "2409702"
# The core before one execution path replaced the second (untraced) path: its tool calls are
# measured side by side with today's in benchmarks 1, 2 and 15.
CORE_BEFORE_ONE_PATH = "2abbca3"
# The code of the README set-up's 1.32 M instructions a call (2026-12-05): benchmark 1 counts
# it side by side with today's, and today's set-up with this commit's redactor held in place.
README_SETUP_DAY = "04951b3"


def _extract(commit: str, home: Path, paths: list[str]) -> bool:
    """``paths`` of ``commit`` (``git archive``) extracted under ``home/.staging``."""
    archive = subprocess.run(
        ["git", "archive", "--format=tar", commit, *paths], cwd=ROOT, capture_output=True
    )
    if archive.returncode != 0:
        return False
    staging = home / ".staging"
    shutil.rmtree(staging, ignore_errors=True)
    with tarfile.open(fileobj=io.BytesIO(archive.stdout)) as tar:
        tar.extractall(staging, filter="data")
    return True


def package_at(commit: str, name: str) -> ModuleType | None:
    """The otelhooks package of ``commit``, importable as ``name`` (``None`` without it)."""
    home = ROOT / ".cache" / "baselines" / commit
    package = home / name
    if not (package / "__init__.py").exists():
        if not _extract(commit, home, ["otelhooks"]):
            return None
        shutil.rmtree(package, ignore_errors=True)
        (home / ".staging" / "otelhooks").rename(package)
        shutil.rmtree(home / ".staging", ignore_errors=True)
    if str(home) not in sys.path:
        sys.path.insert(0, str(home))
    return importlib.import_module(name)


def core_at(commit: str) -> ModuleType | None:
    """The ``otelhooks`` package of ``commit`` (``None`` without the commit)."""
    return package_at(commit, f"otelhooks_{commit}")


def redactor_at(commit: str) -> object | None:
    """A default ``Redactor`` of the otelhooks of ``commit`` (``None`` without the commit)."""
    package = package_at(commit, f"otelhooks_{commit}")
    if package is None:
        return None
    redaction = importlib.import_module(f"{package.__name__}.builtin.redaction")
    return redaction.Redactor()


def tree_at(commit: str) -> Path | None:
    """A directory holding ``otelhooks`` and ``benchmarks`` as they were at ``commit``: a
    benchmark child run from it (``python -m``) imports that code (``None`` without it)."""
    tree = ROOT / ".cache" / "baselines" / f"tree-{commit}"
    if not (tree / "otelhooks" / "__init__.py").exists():
        home = ROOT / ".cache" / "baselines"
        if not _extract(commit, home, ["otelhooks", "benchmarks"]):
            return None
        shutil.rmtree(tree, ignore_errors=True)
        (home / ".staging").rename(tree)
    return tree


def held_redactor(commit: str) -> Any | None:
    """A default ``Redactor`` of ``commit``'s rules and code, with the two text helpers today's
    runtime asks a redactor for (``scrub_text``, ``scrub_identifier``: one line each over
    ``redact_text`` and ``redact_identifier``, as today's are); ``None`` without the commit."""
    package = package_at(commit, f"otelhooks_{commit}")
    if package is None:
        return None
    old: Any = importlib.import_module(f"{package.__name__}.builtin.redaction").Redactor

    class HeldRedactor(old):  # type: ignore[misc]
        def scrub_text(self, text: str) -> str:
            return self.redact_text(text)[0]  # type: ignore[no-any-return]

        def scrub_identifier(self, name: str) -> str:
            return self.redact_identifier(name)[0]  # type: ignore[no-any-return]

    return HeldRedactor()
