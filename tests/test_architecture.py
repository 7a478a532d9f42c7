"""The dependency rule of docs/development.md ("Architecture"), checked on the import graph.

The graph is read from the source: every ``import`` and ``from ... import`` of an otelhooks
module, at module level or inside a function (a lazy import is still a dependency), except those
under ``if TYPE_CHECKING:`` (they never run). ``from pkg import name`` depends on ``pkg.name``
when that is a module, else on ``pkg`` itself.
"""

from __future__ import annotations

import ast
from collections.abc import Iterator
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
PACKAGE = ROOT / "otelhooks"

# The telemetry vocabulary: names, content capture, GenAI attribute values, instruments.
VOCABULARY = {
    "otelhooks.telemetry.attributes",
    "otelhooks.telemetry.content",
    "otelhooks.telemetry.instruments",
    "otelhooks.telemetry.genai",
}
BASE = {"otelhooks", "otelhooks.version", "otelhooks._lazy"}


def module_name(path: Path) -> str:
    parts = list(path.relative_to(ROOT).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


MODULES = {module_name(p): p for p in PACKAGE.rglob("*.py")}


def _is_type_checking(node: ast.If) -> bool:
    test = node.test
    return (isinstance(test, ast.Name) and test.id == "TYPE_CHECKING") or (
        isinstance(test, ast.Attribute) and test.attr == "TYPE_CHECKING"
    )


def _imports(tree: ast.AST) -> Iterator[ast.Import | ast.ImportFrom]:
    for node in ast.iter_child_nodes(tree):
        if isinstance(node, ast.If) and _is_type_checking(node):
            for child in node.orelse:
                yield from _imports(child)
            continue
        if isinstance(node, (ast.Import, ast.ImportFrom)):
            yield node
        yield from _imports(node)


def dependencies(name: str) -> dict[str, set[str]]:
    """The otelhooks modules ``name`` imports, each with the names it takes from it."""
    path = MODULES[name]
    package = name if path.name == "__init__.py" else name.rpartition(".")[0]
    found: dict[str, set[str]] = {}
    for node in _imports(ast.parse(path.read_text())):
        if isinstance(node, ast.Import):
            for alias in node.names:
                if alias.name.split(".")[0] == "otelhooks":
                    found.setdefault(alias.name, set())
            continue
        if node.level:
            base = package.split(".")
            base = base[: len(base) - (node.level - 1)]
            target = ".".join([*base, node.module] if node.module else base)
        else:
            target = node.module or ""
        if target.split(".")[0] != "otelhooks":
            continue
        for alias in node.names:
            sub = f"{target}.{alias.name}"
            if sub in MODULES:
                found.setdefault(sub, set())
            else:
                found.setdefault(target, set()).add(alias.name)
    return found


GRAPH = {name: dependencies(name) for name in MODULES}


def in_package(name: str, package: str) -> bool:
    return name == package or name.startswith(package + ".")


def test_the_graph_is_read_from_real_imports() -> None:
    # The check would pass trivially on an empty graph.
    assert "otelhooks.core.tools" in GRAPH["otelhooks.core.execute"]
    assert "otelhooks.telemetry.attributes" in GRAPH["otelhooks.core.execute"]
    assert "otelhooks.builtin.span_redaction" in GRAPH["otelhooks.telemetry.tracing"]  # lazy
    assert len(GRAPH) > 40


def test_no_import_circle_anywhere_in_the_package() -> None:
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    circles: list[list[str]] = []

    def visit(node: str) -> None:  # Tarjan's strongly connected components
        index[node] = low[node] = len(index)
        stack.append(node)
        on_stack.add(node)
        for dep in GRAPH.get(node, {}):
            if dep not in MODULES:
                continue
            if dep not in index:
                visit(dep)
                low[node] = min(low[node], low[dep])
            elif dep in on_stack:
                low[node] = min(low[node], index[dep])
        if low[node] == index[node]:
            component = []
            while True:
                member = stack.pop()
                on_stack.discard(member)
                component.append(member)
                if member == node:
                    break
            if len(component) > 1:
                circles.append(sorted(component))

    for module in sorted(GRAPH):
        if module not in index:
            visit(module)
    assert not circles, circles


def _violations(package: str, allowed: list[str]) -> list[str]:
    bad = []
    for module, deps in GRAPH.items():
        if not in_package(module, package):
            continue
        for dep in deps:
            if dep in BASE or any(in_package(dep, ok) for ok in allowed):
                continue
            bad.append(f"{module} imports {dep}")
    return sorted(bad)


def test_the_vocabulary_imports_nothing_of_otelhooks_but_the_core_types() -> None:
    for module in VOCABULARY - {"otelhooks.telemetry.genai"}:
        assert set(GRAPH[module]) <= BASE | {"otelhooks.telemetry.attributes"}, module
    assert set(GRAPH["otelhooks.telemetry.genai"]) <= BASE | VOCABULARY | {
        "otelhooks.core.messages",
        "otelhooks.core.provider",
    }


def test_the_core_imports_no_telemetry_set_up_builtin_provider_integration_or_cli() -> None:
    assert _violations("otelhooks.core", ["otelhooks.core", *VOCABULARY]) == []


@pytest.mark.parametrize(
    ("package", "allowed"),
    [
        ("otelhooks.builtin", ["otelhooks.core", "otelhooks.telemetry", "otelhooks.builtin"]),
        ("otelhooks.providers", ["otelhooks.core", *VOCABULARY, "otelhooks.providers"]),
        (
            "otelhooks.telemetry",
            ["otelhooks.core", "otelhooks.telemetry", "otelhooks.builtin"],
        ),
        (
            "otelhooks.integrations",
            [
                "otelhooks.core",
                "otelhooks.telemetry",
                "otelhooks.builtin",
                "otelhooks.integrations",
            ],
        ),
    ],
)
def test_each_package_imports_only_what_sits_below_it(package: str, allowed: list[str]) -> None:
    assert _violations(package, allowed) == []


def test_nothing_but_the_command_imports_the_cli() -> None:
    bad = [
        f"{module} imports {dep}"
        for module, deps in GRAPH.items()
        for dep in deps
        if in_package(dep, "otelhooks.cli")
        and not in_package(module, "otelhooks.cli")
        and module != "otelhooks.__main__"
    ]
    assert bad == []


def test_integrations_use_only_the_public_core() -> None:
    import otelhooks.core

    public = set(otelhooks.core.__all__)
    bad = []
    for module, deps in GRAPH.items():
        if not in_package(module, "otelhooks.integrations"):
            continue
        for dep, names in deps.items():
            if in_package(dep, "otelhooks.core"):
                bad += [f"{module}: {dep}.{n}" for n in sorted(names - public)]
    assert bad == []


def test_each_cli_subcommand_has_a_module_of_its_own() -> None:
    from otelhooks.cli import COMMANDS

    for command in COMMANDS:
        assert f"otelhooks.cli.{command}" in MODULES


@pytest.mark.parametrize(
    "package",
    ["otelhooks", "otelhooks.core", "otelhooks.telemetry", "otelhooks.integrations.mcp"],
)
def test_lazy_names_are_all_listed_and_all_resolve(package: str) -> None:
    import importlib

    module = importlib.import_module(package)
    listed = set(module.__all__) - {"__version__"}
    assert listed <= set(dir(module))
    for name in sorted(listed):
        value = getattr(module, name)
        assert value is not None
    with pytest.raises(AttributeError, match="no attribute"):
        module.__getattr__("NoSuchName")
