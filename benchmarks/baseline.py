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
from types import ModuleType

from benchmarks.harness import ROOT

# The redactor of otelhooks 0.1.0, and the one the redaction rework of issue 21 started from.
REDACTOR_0_1_0 = "c5783ba"
REDACTOR_BEFORE_REWORK = "2409702"
# The core before one execution path replaced the second (untraced) path: its tool calls are
# measured side by side with today's in benchmarks 1, 2 and 15.
CORE_BEFORE_ONE_PATH = "2abbca3"


def package_at(commit: str, name: str) -> ModuleType | None:
    """The otelhooks package of ``commit``, importable as ``name`` (``None`` without it)."""
    home = ROOT / ".cache" / "baselines" / commit
    package = home / name
    if not (package / "__init__.py").exists():
        archive = subprocess.run(
            ["git", "archive", "--format=tar", commit, "otelhooks"],
            cwd=ROOT,
            capture_output=True,
        )
        if archive.returncode != 0:
            return None
        staging = home / ".staging"
        shutil.rmtree(staging, ignore_errors=True)
        with tarfile.open(fileobj=io.BytesIO(archive.stdout)) as tar:
            tar.extractall(staging, filter="data")
        shutil.rmtree(package, ignore_errors=True)
        (staging / "otelhooks").rename(package)
        shutil.rmtree(staging, ignore_errors=True)
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
