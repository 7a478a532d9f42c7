"""A second held-out set of harmless text, from sources no rule was written or changed against
(benchmark 13; the first held-out harmless set, benchmarks/heldout.py, was looked at while the
digest and code rules were written, so it no longer measures them untouched).

Every text comes from a pinned artifact, each listed with its SHA-256 (:func:`manifest`):

* ``go.sum`` lines of Go modules the corpus builds download at pinned versions (gitleaks
  v8.30.1, spf13/viper v1.19.0, google/go-containerregistry v0.21.9, golang.org/x/crypto
  v0.35.0), read from the Go module cache;
* Go source lines of golang.org/x/crypto v0.35.0 (test files left out) that mention keys,
  secrets, tokens or passwords: cryptographic code, full of constants and hex;
* the ``integrity`` and ``resolved`` lines of this repository's npm lock file for the MCP
  servers (tools/mcp-servers/package-lock.json);
* source lines of installed Python packages neither measurement used before (pytest,
  Hypothesis, Jinja2, LangChain Core, LangSmith, Pydantic AI, MkDocs, griffe, gRPC, protobuf,
  GitPython, pip) that mention keys, tokens, secrets or passwords, without those assigning a
  quoted literal to a credential's name (an example credential);
* prose: the lines of installed packages' ``METADATA`` descriptions that mention the same;
* certificates: the lines of certifi's ``cacert.pem`` (public CA certificates: headers,
  base64 bodies wrapped at 64 characters, fingerprints).

Measured, never tuned on: a text is a false positive in a channel when the channel does not
carry it unchanged (benchmarks/recall.py ``benign_channels``).
"""

from __future__ import annotations

import hashlib
import os
import re
import subprocess
from collections.abc import Iterator
from pathlib import Path

from benchmarks import heldout as H

ROOT = Path(__file__).resolve().parent.parent
GO_MODULES = (
    "github.com/zricethezav/gitleaks/v8@v8.30.1",
    "github.com/spf13/viper@v1.19.0",
    "github.com/google/go-containerregistry@v0.21.9",
    "golang.org/x/crypto@v0.35.0",
)
GO_SOURCE_MODULE = "golang.org/x/crypto@v0.35.0"
NPM_LOCK = ROOT / "tools" / "mcp-servers" / "package-lock.json"
PACKAGES = (
    "_pytest",
    "hypothesis",
    "jinja2",
    "langchain_core",
    "langsmith",
    "pydantic_ai",
    "mkdocs",
    "griffe",
    "grpc",
    "google/protobuf",
    "git",
    "pip",
)
_MENTIONS = re.compile(r"key|token|secret|passw|credential", re.IGNORECASE)
_MAX = 600  # texts per category, taken at an even stride


def _gomodcache() -> Path | None:
    given = os.environ.get("GOMODCACHE")
    if given:
        return Path(given)
    try:
        done = subprocess.run(
            ["go", "env", "GOMODCACHE"], capture_output=True, text=True, check=False
        )
    except OSError:
        return None
    return Path(done.stdout.strip()) if done.returncode == 0 and done.stdout.strip() else None


def _module_dir(cache: Path, module: str) -> Path:
    """A module's folder in the Go module cache (capitals escaped as ``!x``)."""
    escaped = re.sub(r"[A-Z]", lambda m: "!" + m.group().lower(), module)
    return cache / escaped


def _go_sums() -> list[Path]:
    cache = _gomodcache()
    if cache is None:
        return []
    return [p for m in GO_MODULES if (p := _module_dir(cache, m) / "go.sum").is_file()]


def _go_sources() -> list[Path]:
    cache = _gomodcache()
    if cache is None:
        return []
    root = _module_dir(cache, GO_SOURCE_MODULE)
    if not root.is_dir():
        return []
    return sorted(
        p
        for p in root.rglob("*.go")
        if not p.name.endswith("_test.go") and "testdata" not in p.parts
    )


def _package_sources() -> list[Path]:
    site = H._site_packages()
    files: list[Path] = []
    for name in PACKAGES:
        folder = site / name
        if folder.is_dir():
            files.extend(
                p
                for p in sorted(folder.rglob("*.py"))
                if not {"tests", "test", "_vendor"} & set(p.relative_to(site).parts)
            )
    return files


def _metadata() -> list[Path]:
    return sorted(H._site_packages().glob("*.dist-info/METADATA"))


def _cacert() -> list[Path]:
    path = H._site_packages() / "certifi" / "cacert.pem"
    return [path] if path.is_file() else []


def _stride(items: list[tuple[str, str]], limit: int) -> list[tuple[str, str]]:
    step = max(1, -(-len(items) // limit))
    return items[::step]


def _lines(paths: list[Path], root: Path | None = None) -> Iterator[tuple[str, str]]:
    for path in paths:
        where = path.relative_to(root) if root is not None else path
        for number, line in enumerate(path.read_text(errors="replace").splitlines(), 1):
            yield f"{where}:{number}", line


def _mentions(lines: Iterator[tuple[str, str]]) -> list[tuple[str, str]]:
    return [
        (w, t.strip())
        for w, t in lines
        if 8 <= len(t.strip()) <= 400 and _MENTIONS.search(t) is not None
    ]


def harmless(limit: int = _MAX) -> dict[str, list[tuple[str, str]]]:
    """The fresh harmless texts by source: ``(where, text)``, at most ``limit`` per source
    (two and a half times that of package source lines), taken at an even stride."""
    site = H._site_packages()
    out: dict[str, list[tuple[str, str]]] = {}
    cache = _gomodcache()
    go_sums = _go_sums()
    if go_sums and cache is not None:
        out["go.sum lines (4 modules)"] = _stride(
            [(w, t) for w, t in _lines(go_sums, cache) if t.strip()], limit
        )
    sources = _go_sources()
    if sources and cache is not None:
        out["Go source lines (x/crypto)"] = _stride(_mentions(_lines(sources, cache)), limit)
    if NPM_LOCK.is_file():
        out["npm lock lines (MCP servers)"] = _stride(
            [
                (w, t.strip())
                for w, t in _lines([NPM_LOCK], ROOT)
                if '"integrity"' in t or '"resolved"' in t
            ],
            limit,
        )
    out["package source lines (12 packages)"] = _stride(
        [
            (w, t)
            for w, t in _mentions(_lines(_package_sources(), site))
            if H._LITERAL_CREDENTIAL.search(t) is None
        ],
        limit * 5 // 2,
    )
    out["prose (package descriptions)"] = _stride(_mentions(_lines(_metadata(), site)), limit)
    certs = _cacert()
    if certs:
        out["certificates (certifi)"] = _stride(
            [(w, t) for w, t in _lines(certs, site) if t.strip()], limit
        )
    return out


def manifest() -> list[dict[str, str]]:
    """Every artifact the fresh harmless texts come from, with its SHA-256."""
    cache = _gomodcache()
    site = H._site_packages()
    files = [
        (p, f"Go module cache: {p.relative_to(cache)}" if cache else str(p))
        for p in [*_go_sums(), *_go_sources()]
    ]
    files += [(NPM_LOCK, "tools/mcp-servers/package-lock.json")] if NPM_LOCK.is_file() else []
    files += [
        (p, f"site-packages/{p.relative_to(site)}")
        for p in [*_package_sources(), *_metadata(), *_cacert()]
    ]
    return [
        {"path": where, "sha256": hashlib.sha256(p.read_bytes()).hexdigest()} for p, where in files
    ]
