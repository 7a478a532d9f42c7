"""The dependency rule of docs/development.md ("Architecture"), checked on the import graph.

The graph is read from the source: every ``import`` and ``from ... import`` of an otelhooks
module, at module level or inside a function (a lazy import is still a dependency), except those
under ``if TYPE_CHECKING:`` (they never run). ``from pkg import name`` depends on ``pkg.name``
when that is a module, else on ``pkg`` itself.
"""

from __future__ import annotations

import ast
import re
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
    assert _circles({name: set(deps) for name, deps in GRAPH.items()}) == []


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


# -- erosion: what one path, typed contracts and one vocabulary must not lose -------------------


def _all_imports(tree: ast.AST) -> Iterator[ast.Import | ast.ImportFrom]:
    """Every import, those under ``if TYPE_CHECKING:`` included (a circle through them is a
    circle of the design, even if it never runs)."""
    for node in ast.walk(tree):
        if isinstance(node, (ast.Import, ast.ImportFrom)):
            yield node


def _targets(name: str, node: ast.Import | ast.ImportFrom) -> Iterator[str]:
    path = MODULES[name]
    package = name if path.name == "__init__.py" else name.rpartition(".")[0]
    if isinstance(node, ast.Import):
        yield from (a.name for a in node.names if a.name.split(".")[0] == "otelhooks")
        return
    if node.level:
        base = package.split(".")
        base = base[: len(base) - (node.level - 1)]
        target = ".".join([*base, node.module] if node.module else base)
    else:
        target = node.module or ""
    if target.split(".")[0] != "otelhooks":
        return
    for alias in node.names:
        sub = f"{target}.{alias.name}"
        yield sub if sub in MODULES else target


def _circles(graph: dict[str, set[str]]) -> list[list[str]]:
    """The import circles of ``graph`` (Tarjan's strongly connected components)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    circles: list[list[str]] = []

    def visit(node: str) -> None:
        index[node] = low[node] = len(index)
        stack.append(node)
        on_stack.add(node)
        for dep in graph.get(node, set()):
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

    for module in sorted(graph):
        if module not in index:
            visit(module)
    return circles


FULL_GRAPH = {
    name: {
        target
        for node in _all_imports(ast.parse(path.read_text()))
        for target in _targets(name, node)
        # a package's own namespace re-exports its modules: not a dependency of theirs
        if not (path.name == "__init__.py" and in_package(target, name))
    }
    for name, path in MODULES.items()
}


# Circles through TYPE_CHECKING imports there may be, and why; it may only shrink.
CIRCLES_ALLOWED: list[list[str]] = []


def test_no_import_circle_even_counting_type_checking_imports() -> None:
    assert "otelhooks.core.tools" in FULL_GRAPH["otelhooks.core.hooks"]  # a TYPE_CHECKING one
    assert _circles(FULL_GRAPH) == CIRCLES_ALLOWED


# Names imported from another module although private (``from x import _name``), with why.
# It may only shrink; the gateway rewrite removes the entry it seeds.
PRIVATE_IMPORTS = {
    ("otelhooks.integrations.mcp.client", "mcp.shared", "_otel"): "the SDK's span hook",
}


def test_no_private_name_is_imported_from_another_module() -> None:
    found = set()
    for name, path in MODULES.items():
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.ImportFrom) and node.module != "__future__":
                for alias in node.names:
                    if alias.name.startswith("_") and not alias.name.startswith("__"):
                        found.add((name, node.module or "", alias.name))
    assert found == set(PRIVATE_IMPORTS), sorted(found ^ set(PRIVATE_IMPORTS))


SLF_ALLOWED = {  # files ruff's SLF001 (private members of another object) may skip, and why
    "otelhooks/integrations/mcp/client.py": "the mcp SDK's span hook has no public API",
    "otelhooks/integrations/mcp/http.py": "the SDK Server's session manager has no public setter",
    "otelhooks/telemetry/tracing.py": "the SDK batch processor's queue has no public API",
    "otelhooks/telemetry/environment.py": "the OTLP exporter's resolved endpoint",
    "otelhooks/providers/anthropic.py": "whether the SDK client traces has no public API",
}


def test_private_members_of_other_objects_are_checked_with_an_allowlist_that_holds() -> None:
    import subprocess
    import sys
    import tomllib

    config = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["ruff"]["lint"]
    assert "SLF" in config["select"]
    ignored = {
        path
        for path, rules in config["per-file-ignores"].items()
        if "SLF001" in rules and path.startswith("otelhooks/")
    }
    assert ignored == set(SLF_ALLOWED)
    for path in SLF_ALLOWED:  # an entry that no longer needs it goes
        needed = subprocess.run(
            [sys.executable, "-m", "ruff", "check", "--isolated", "--select", "SLF001", path],
            cwd=ROOT,
            capture_output=True,
            text=True,
        )
        assert needed.returncode == 1, f"{path} needs no SLF001 exemption any more"
    clean = subprocess.run(
        [sys.executable, "-m", "ruff", "check", "--select", "SLF001", "otelhooks"],
        cwd=ROOT,
        capture_output=True,
        text=True,
    )
    assert clean.returncode == 0, clean.stdout


_ATTRIBUTE = re.compile(
    r"^(gen_ai|otelhooks|mcp|error|server|network|jsonrpc|rpc|exception|user|url|http|log)"
    r"\.[a-z0-9_]+(\.[a-z0-9_]+)*$"
)
# Modules that spell attribute names of their own, and why; it may only shrink (the gateway
# rewrite moves the MCP ones into the vocabulary).
OWN_SPELLINGS = {
    "otelhooks.cli.fleet.topology": "Kafka's configuration keys (not span attributes)",
    "otelhooks.integrations.mcp.http": "an ASGI scope key (not a span attribute)",
    "otelhooks.integrations.mcp.auth": "a token claim's name (not a span attribute)",
}


def _spelled(tree: ast.AST) -> Iterator[tuple[int, str]]:
    """Attribute-like names used as dict keys, ``set_attribute`` keys or module constants."""
    for node in ast.walk(tree):
        texts: list[ast.expr | None] = []
        if isinstance(node, ast.Dict):
            texts = list(node.keys)
        elif isinstance(node, ast.Call) and getattr(node.func, "attr", "") == "set_attribute":
            texts = node.args[:1]
        elif isinstance(node, (ast.Assign, ast.AnnAssign)) and isinstance(
            getattr(node, "value", None), ast.Constant
        ):
            texts = [node.value]
        for text in texts:
            value = text.value if isinstance(text, ast.Constant) else None
            if isinstance(value, str) and _ATTRIBUTE.match(value):
                yield text.lineno, value  # type: ignore[union-attr]


def test_span_attribute_names_are_spelled_only_in_the_vocabulary() -> None:
    spelled = {
        name: found
        for name, path in MODULES.items()
        if name != "otelhooks.telemetry.attributes"
        and (found := sorted(_spelled(ast.parse(path.read_text()))))
    }
    assert "otelhooks.cli.fleet.topology" in spelled  # the check sees real spellings
    assert set(spelled) == set(OWN_SPELLINGS), {
        k: v for k, v in spelled.items() if k not in OWN_SPELLINGS
    }


MAX_CLASS_LINES = 400
MAX_CLASS_METHODS = 30
# Classes allowed to be larger, and why. It may only shrink: the seed is the whole of it.
LARGE_CLASSES: dict[str, str] = {}
LARGE_SEED = frozenset(LARGE_CLASSES)


def _class_sizes() -> dict[str, tuple[int, int]]:
    sizes = {}
    for name, path in MODULES.items():
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.ClassDef):
                methods = sum(
                    isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef)) for n in node.body
                )
                lines = (node.end_lineno or node.lineno) - node.lineno + 1
                sizes[f"{name}.{node.name}"] = (lines, methods)
    return sizes


def test_no_class_is_over_its_size_unless_listed_and_the_list_only_shrinks() -> None:
    sizes = _class_sizes()
    large = {
        name
        for name, (lines, methods) in sizes.items()
        if lines > MAX_CLASS_LINES or methods > MAX_CLASS_METHODS
    }
    assert large - set(LARGE_CLASSES) == set(), {n: sizes[n] for n in large - set(LARGE_CLASSES)}
    assert set(LARGE_CLASSES) - large == set(), "listed but within the limits: remove them"
    assert set(LARGE_CLASSES) <= LARGE_SEED


# What the second path was made of: none of it may come back.
GONE_ATTRIBUTES = {
    "_unobserved",
    "_plain",
    "_plain_chain",
    "_plain_generation",
    "_cache_plain",
    "generation",
    "_chain",
    "_tracer",
    "_context_param",
}
GONE_NAMES = {"run_unobserved", "_plain_tool", "_live_meter_provider", "bounded", "_current_tasks"}


def test_the_second_path_does_not_come_back() -> None:
    found = []
    for name, path in MODULES.items():
        if name in ("otelhooks.integrations.mcp.client", "otelhooks.providers.anthropic"):
            allowed = {"_tracer"}  # third-party SDKs' own (see SLF_ALLOWED)
        else:
            allowed = set()
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.Attribute) and node.attr in GONE_ATTRIBUTES - allowed:
                found.append(f"{name}:{node.lineno} .{node.attr}")
            elif isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)) and (
                node.name in GONE_NAMES
            ):
                found.append(f"{name}:{node.lineno} def {node.name}")
            elif isinstance(node, ast.Name) and node.id in GONE_NAMES:
                found.append(f"{name}:{node.lineno} {node.id}")
            elif isinstance(node, ast.alias) and node.name in GONE_NAMES:
                found.append(f"{name} imports {node.name}")
    assert found == []
