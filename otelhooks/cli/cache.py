"""Where otelhooks keeps what it builds and installs on this machine.

``$OTELHOOKS_CACHE``, else ``$XDG_CACHE_HOME/otelhooks``, else ``~/.cache/otelhooks``: outside any
checkout, so every clone on a machine reuses what one of them built. The install scripts
(``scripts/lib/cache.sh``) use the same rule and name each entry after its pin
(``jaeger/v2.12.0-<hash>/``), so a changed pin never reuses an old build.
"""

from __future__ import annotations

import os
from pathlib import Path


def cache_home() -> Path:
    """The otelhooks cache folder of this machine (it may not exist yet)."""
    given = os.environ.get("OTELHOOKS_CACHE")
    if given:
        return Path(given)
    base = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(base) / "otelhooks"


def cached(folder: str, version: str, *inside: str) -> Path | None:
    """The newest existing ``<cache>/<folder>/<version>[-<pin hash>]/<inside...>``, or ``None``."""
    parent = cache_home() / folder
    found = [
        path.joinpath(*inside)
        for path in (*parent.glob(f"{version}-*"), parent / version)
        if path.joinpath(*inside).exists()
    ]
    return max(found, key=lambda p: p.stat().st_mtime) if found else None
