"""The package's import graph: the layer order, no cycles, no private names across modules, a light router."""

from __future__ import annotations

import ast
import subprocess
import sys
from pathlib import Path

import cir

PACKAGE = Path(cir.__file__).resolve().parent



def _module_name(path: Path) -> str:
    parts = path.relative_to(PACKAGE.parent).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


MODULES = {_module_name(p): p for p in sorted(PACKAGE.rglob("*.py"))}


def _is_type_checking(node: ast.If) -> bool:
    test = node.test
    return (isinstance(test, ast.Name) and test.id == "TYPE_CHECKING") or (
        isinstance(test, ast.Attribute) and test.attr == "TYPE_CHECKING")


def _runtime_imports(tree: ast.AST) -> list[ast.Import | ast.ImportFrom]:
    """Every import statement, at any depth, except those under ``if TYPE_CHECKING:``."""
    found: list[ast.Import | ast.ImportFrom] = []

    def visit(node: ast.AST) -> None:
        for child in ast.iter_child_nodes(node):
            if isinstance(child, ast.If) and _is_type_checking(child):
                for other in child.orelse:
                    visit(other)
                continue
            if isinstance(child, ast.Import | ast.ImportFrom):
                found.append(child)
            visit(child)

    visit(tree)
    return found


def _targets(module: str, node: ast.Import | ast.ImportFrom) -> list[tuple[str, list[str]]]:
    """(imported cir module, names taken from it) for one import statement."""
    if isinstance(node, ast.Import):
        return [(a.name, []) for a in node.names if a.name.split(".")[0] == "cir"]
    base = node.module or ""
    if node.level:  # relative import
        package = module.split(".") if MODULES[module].name == "__init__.py" else module.split(".")[:-1]
        package = package[: len(package) - node.level + 1]
        base = ".".join([*package, base] if base else package)
    if base.split(".")[0] != "cir":
        return []
    out = []
    for alias in node.names:
        sub = f"{base}.{alias.name}"
        out.append((sub, []) if sub in MODULES else (base, [alias.name]))
    return out


def import_graph() -> dict[str, dict[str, list[str]]]:
    """module -> {imported module: names taken} over the runtime imports of every cir module."""
    graph: dict[str, dict[str, list[str]]] = {}
    for module, path in MODULES.items():
        edges: dict[str, list[str]] = {}
        for node in _runtime_imports(ast.parse(path.read_text(encoding="utf-8"))):
            for target, names in _targets(module, node):
                if target != module:
                    edges.setdefault(target, []).extend(names)
        graph[module] = edges
    return graph


def cycles(graph: dict[str, dict[str, list[str]]]) -> list[set[str]]:
    """The strongly connected components with more than one module (Tarjan)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[set[str]] = []

    def connect(v: str) -> None:
        index[v] = low[v] = len(index)
        stack.append(v)
        on_stack.add(v)
        for w in graph.get(v, {}):
            if w not in graph:
                continue
            if w not in index:
                connect(w)
                low[v] = min(low[v], low[w])
            elif w in on_stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            component = set()
            while True:
                w = stack.pop()
                on_stack.discard(w)
                component.add(w)
                if w == v:
                    break
            if len(component) > 1:
                found.append(component)

    for v in sorted(graph):
        if v not in index:
            connect(v)
    return found


def test_the_graph_sees_known_edges():
    graph = import_graph()
    assert "cir.episode.transcript" in graph["cir.episode.harness"]
    assert "cir.episode.recovery" in graph["cir.episode.harness"]
    assert "cir.episode.harness" not in graph["cir.router.runtime"]  # typing-only import
    assert cycles({"a": {"b": []}, "b": {"c": []}, "c": {"a": []}, "d": {"a": []}}) == [{"a", "b", "c"}]


#: The layers, lowest first: a module may import its own layer and the layers below it.
LAYERS = ("util", "envs", "agents", "episode", "tools", "adapters", "families", "pairs", "stats", "router", "study", "testing",
          "cli")

#: Imports that still run upward, each with the issue that removes it. The test fails when
#: one is added and when one of these is gone (so the list only shrinks, and stays true).
#: Issue 22 emptied it: the agents and the extractor get a family's parts from above.
KNOWN_UPWARD: set[tuple[str, str]] = set()


def layer_of(module: str) -> int | None:
    """The layer's rank of a ``cir.LAYER...`` module; None for ``cir`` and ``cir.__main__``."""
    parts = module.split(".")
    if len(parts) < 2 or parts[1] not in LAYERS:
        return None
    return LAYERS.index(parts[1])


def upward_imports(graph: dict[str, dict[str, list[str]]]) -> set[tuple[str, str]]:
    return {(module, target) for module, edges in graph.items() for target in edges
            if layer_of(module) is not None and layer_of(target) is not None
            and layer_of(target) > layer_of(module)}


def test_every_module_is_in_a_layer():
    flat = [m for m in MODULES if layer_of(m) is None and m not in ("cir", "cir.__main__")]
    assert not flat, f"modules outside the layer folders: {flat}"


def test_a_lower_layer_never_imports_a_higher_one():
    assert upward_imports({"cir.util.x": {"cir.pairs.y": []}, "cir.pairs.y": {"cir.util.x": []}}) == {
        ("cir.util.x", "cir.pairs.y")}
    found = upward_imports(import_graph())
    assert found - KNOWN_UPWARD == set(), f"imports from a lower layer to a higher one: {sorted(found - KNOWN_UPWARD)}"
    assert KNOWN_UPWARD - found == set(), f"gone, remove from KNOWN_UPWARD: {sorted(KNOWN_UPWARD - found)}"


def test_no_import_cycles():
    found = cycles(import_graph())
    assert not found, f"import cycles among cir modules: {[sorted(c) for c in found]}"


def test_no_private_names_imported_across_modules():
    graph = import_graph()
    private = [(module, target, name) for module, edges in graph.items()
               for target, names in edges.items() for name in names
               if name.startswith("_") and not name.startswith("__")]
    assert not private, f"private names imported from other modules: {private}"


def test_the_runtime_router_needs_neither_pandas_nor_scikit_learn():
    code = "import sys, cir.router.runtime; print(sorted(m for m in ('pandas', 'sklearn') if m in sys.modules))"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "[]"


#: The core: the layers that know no environment (a family is found by name, cir.families.registry).
CORE = ("util", "envs", "agents", "episode", "tools", "adapters", "pairs", "stats", "router", "study")


def test_the_core_never_imports_a_family_directly():
    graph = import_graph()
    direct = sorted((module, target) for module, edges in graph.items() for target in edges
                    if module.split(".")[1:2] and module.split(".")[1] in CORE
                    and target.startswith("cir.families.") and target.split(".")[2] not in ("family", "registry"))
    assert direct == [], f"core modules importing a family's own code: {direct}"


#: The agent frameworks an adapter brings (optional extras), and the one module each may be
#: imported in: the core and the other adapters never import one.
FRAMEWORKS = {"langgraph": "cir.adapters.langgraph", "langchain": "cir.adapters.langgraph",
              "langchain_core": "cir.adapters.langgraph", "langchain_openai": "cir.adapters.langgraph",
              "agents": "cir.adapters.openai_agents", "inspect_ai": "cir.adapters.inspect_ai"}


def test_a_framework_is_imported_only_by_its_adapter():
    found = []
    for module, path in MODULES.items():
        for node in _runtime_imports(ast.parse(path.read_text(encoding="utf-8"))):
            names = [a.name for a in node.names] if isinstance(node, ast.Import) else \
                [node.module or ""] if not node.level else []
            for name in names:
                top = name.split(".")[0]
                if top in FRAMEWORKS and FRAMEWORKS[top] != module:
                    found.append((module, name))
    assert found == [], f"framework imports outside their adapter: {found}"


def test_running_a_framework_agent_loads_no_framework_until_its_adapter():
    code = ("import sys, cir.adapters.driver, cir.adapters.protocol, cir.pairs.run, cir.cli; "
            f"print(sorted(m for m in {sorted(FRAMEWORKS)!r} if m in sys.modules))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "[]"
