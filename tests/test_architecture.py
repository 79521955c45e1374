"""Imports follow the module map in docs/architecture.md: every import of a workbench module is parsed (ast)
and checked against the 'may import' column; a package missing from the map fails too. No modules import
each other round a loop, imports inside functions included."""

from __future__ import annotations

import ast
import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
PACKAGE = ROOT / "workbench"
# root modules: the "foundation" row
# root modules and the validation layer (inputs/): the "foundation" row
FOUNDATION = {
    "__init__",
    "config",
    "console",
    "quiet",
    "errors",
    "artifacts",
    "optional",
    "values",
    "workspace",
    "resources",
    "artifact_paths",
    "journal",
    "inputs",
}
ROW = re.compile(r"^\| `(?P<name>\w+)` \|[^|]*\| (?P<imports>[^|]*) \|$")


def module_map() -> dict[str, set[str]]:
    """package -> the packages it may import, read from the table in docs/architecture.md."""
    rows = {}
    for line in (ROOT / "docs" / "architecture.md").read_text(encoding="utf-8").splitlines():
        match = ROW.match(line.strip())
        if match and match["name"] not in rows:
            allowed = {p.strip().strip("`") for p in match["imports"].split(",")} - {"—", ""}
            rows[match["name"]] = allowed
    return rows


def unit_of(module: str) -> str:
    """The row a dotted module name belongs to: its top-level package, or ``foundation`` for the root modules."""
    parts = module.split(".")
    top = parts[1] if len(parts) > 1 else "__init__"
    return "foundation" if top in FOUNDATION else top


def workbench_imports(path: Path) -> list[tuple[int, str]]:
    """(line, module) for every import of a workbench module in ``path``; relative imports count as violations."""
    found = []
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"), str(path))):
        if isinstance(node, ast.Import):
            found += [(node.lineno, a.name) for a in node.names if a.name.split(".")[0] == "workbench"]
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                found.append((node.lineno, "relative:" + (node.module or "")))
            elif node.module and node.module.split(".")[0] == "workbench":
                names = [f"{node.module}.{a.name}" for a in node.names]
                # ``from workbench import jobs`` imports the package ``workbench.jobs``
                found += [
                    (
                        node.lineno,
                        n
                        if (PACKAGE / n.split(".")[1]).is_dir() and node.module == "workbench"
                        else node.module,
                    )
                    for n in names
                ]
    return found


def violations(package: Path = PACKAGE) -> list[str]:
    rules = module_map()
    out = []
    for path in sorted(package.rglob("*.py")):
        rel = path.relative_to(package.parent).with_suffix("")
        me = unit_of(".".join(rel.parts))
        if me not in rules:
            out.append(f"{rel}: package '{me}' is not in docs/architecture.md")
            continue
        for line, module in workbench_imports(path):
            if module.startswith("relative:"):
                out.append(f"{rel}:{line}: relative import; write it as 'from workbench....'")
                continue
            target = unit_of(module)
            if target != me and target not in rules[me]:
                out.append(f"{rel}:{line}: {me} may not import {target} ({module})")
            if (
                me == "commands"
                and target == "commands"
                and module not in ("workbench.commands", "workbench.commands.options")
            ):
                out.append(f"{rel}:{line}: a verb imports another verb ({module}); call a job instead")
    return out


def _is_type_checking(node: ast.If) -> bool:
    test = node.test
    return (isinstance(test, ast.Name) and test.id == "TYPE_CHECKING") or (
        isinstance(test, ast.Attribute) and test.attr == "TYPE_CHECKING"
    )


def module_edges(package: Path = PACKAGE) -> dict[str, set[str]]:
    """module -> the workbench modules it imports when it runs: imports inside functions count, imports under
    ``if TYPE_CHECKING:`` do not. ``from a.b import c`` is an edge to ``a.b.c`` when that is a module."""
    root = package.parent
    modules = {
        ".".join(p.relative_to(root).with_suffix("").parts).removesuffix(".__init__"): p
        for p in sorted(package.rglob("*.py"))
    }
    edges: dict[str, set[str]] = {}
    for name, path in modules.items():
        tree = ast.parse(path.read_text(encoding="utf-8"), str(path))
        skipped = {
            id(inner)
            for node in ast.walk(tree)
            if isinstance(node, ast.If) and _is_type_checking(node)
            for stmt in node.body
            for inner in ast.walk(stmt)
        }
        targets: set[str] = set()
        for node in ast.walk(tree):
            if id(node) in skipped:
                continue
            if isinstance(node, ast.Import):
                targets |= {a.name for a in node.names}
            elif isinstance(node, ast.ImportFrom) and node.module and not node.level:
                for alias in node.names:
                    full = f"{node.module}.{alias.name}"
                    targets.add(full if full in modules else node.module)
        edges[name] = {m for m in targets if m in modules and m != name}
    return edges


def import_cycles(edges: dict[str, set[str]]) -> list[list[str]]:
    """Every group of modules that import each other, directly or round a loop (strongly connected
    components of more than one module), each sorted; the groups sorted."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[list[str]] = []

    def visit(node: str) -> None:  # Tarjan's algorithm
        index[node] = low[node] = len(index)
        stack.append(node)
        on_stack.add(node)
        for nxt in sorted(edges.get(node, ())):
            if nxt not in index:
                visit(nxt)
                low[node] = min(low[node], low[nxt])
            elif nxt in on_stack:
                low[node] = min(low[node], index[nxt])
        if low[node] == index[node]:
            group = []
            while True:
                member = stack.pop()
                on_stack.discard(member)
                group.append(member)
                if member == node:
                    break
            if len(group) > 1:
                found.append(sorted(group))

    for node in sorted(edges):
        if node not in index:
            visit(node)
    return sorted(found)


def test_no_module_imports_itself_round_a_loop() -> None:
    """No import cycle between workbench modules, not even through an import inside a function."""
    assert import_cycles(module_edges()) == []


def test_the_cycle_check_finds_a_loop_in_an_edge_list() -> None:
    edges = {"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}, "e": set()}
    assert import_cycles(edges) == [["a", "b", "c"]]
    assert import_cycles({"a": {"b"}, "b": set()}) == []


def test_the_cycle_check_counts_imports_inside_functions(tmp_path: Path) -> None:
    """A tiny package whose only loop closes through a function-level import is caught; the same loop closed
    under ``if TYPE_CHECKING:`` is not an edge."""
    fake = tmp_path / "workbench"
    (fake / "backends").mkdir(parents=True)
    for path, text in {
        "__init__.py": "",
        "backends/__init__.py": "",
        "backends/factory.py": "from workbench.backends.runner import Runner\n",
        "backends/runner.py": (
            "class Runner:\n"
            "    def describe(self):\n"
            "        from workbench.backends.factory import device_of\n"
            "        return device_of()\n"
        ),
        "backends/typed.py": (
            "from typing import TYPE_CHECKING\n"
            "if TYPE_CHECKING:\n"
            "    from workbench.backends.other import Thing\n"
        ),
        "backends/other.py": "from workbench.backends import typed\n",
    }.items():
        (fake / path).write_text(text)
    edges = module_edges(fake)
    assert edges["workbench.backends.runner"] == {"workbench.backends.factory"}
    assert edges["workbench.backends.typed"] == set()
    assert edges["workbench.backends.other"] == {"workbench.backends.typed"}
    assert import_cycles(edges) == [["workbench.backends.factory", "workbench.backends.runner"]]


def test_every_import_follows_the_module_map() -> None:
    assert violations() == []


def test_the_map_lists_every_package_and_only_known_names() -> None:
    rules = module_map()
    packages = {p.name for p in PACKAGE.iterdir() if (p / "__init__.py").is_file()} - FOUNDATION
    root_modules = {p.stem for p in PACKAGE.glob("*.py")} - FOUNDATION
    assert packages | root_modules | {"foundation"} == set(rules)
    for name, allowed in rules.items():
        assert allowed <= set(rules), (name, allowed - set(rules))


def test_the_check_catches_a_backwards_import(tmp_path: Path) -> None:
    """A backend that imports calibration (the cycle this map forbids) and a verb that imports a verb."""
    fake = tmp_path / "workbench"
    for folder, text in {
        "backends": "from workbench.calibration.cache import legacy_header\n",
        "commands": "from workbench.commands.compare import run\n",
    }.items():
        (fake / folder).mkdir(parents=True)
        (fake / folder / "__init__.py").write_text("")
        (fake / folder / "bad.py").write_text(text)
    found = violations(fake)
    assert any("backends may not import calibration" in v for v in found)
    assert any("a verb imports another verb" in v for v in found)


@pytest.mark.parametrize(
    "module, unit",
    [
        ("workbench.config", "foundation"),
        ("workbench", "foundation"),
        ("workbench.jobs.search", "jobs"),
        ("workbench.cli", "cli"),
    ],
)
def test_unit_of(module: str, unit: str) -> None:
    assert unit_of(module) == unit
