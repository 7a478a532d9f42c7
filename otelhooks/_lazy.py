"""Public names imported on first use (PEP 562), so that importing a package costs next to
nothing and each name costs its module's import the first time it is used."""

from __future__ import annotations

import importlib
from collections.abc import Callable, Mapping, Sequence
from typing import Any


def lazy_names(
    package: str, namespace: dict[str, Any], modules: Mapping[str, str | Sequence[str]]
) -> tuple[Callable[[str], Any], Callable[[], list[str]]]:
    """``__getattr__`` and ``__dir__`` for ``package`` whose public names live in ``modules``
    (module path relative to the package -> its names, a sequence or one space-separated
    string). The package keeps a literal ``__all__`` (type checkers read it); a test checks
    that the two agree."""
    where = {
        name: module
        for module, names in modules.items()
        for name in (names.split() if isinstance(names, str) else names)
    }
    public = sorted(where)

    def __getattr__(name: str) -> Any:
        module = where.get(name)
        if module is None:
            raise AttributeError(f"module {package!r} has no attribute {name!r}")
        value = getattr(importlib.import_module(f".{module}", package), name)
        namespace[name] = value  # later look-ups skip this function
        return value

    def __dir__() -> list[str]:
        return sorted({*public, *(n for n in namespace if not n.startswith("_"))})

    return __getattr__, __dir__
