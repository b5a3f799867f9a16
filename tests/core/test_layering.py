"""The library's layers, enforced from its imports: `models` is pure numerics, `core` knows no
chapter, and a chapter knows no other chapter. Also: no module over 800 lines."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

LIB = Path(__file__).resolve().parents[2] / "lib"
PACKAGE = LIB / "implicit_bias"
MAX_LINES = 800
MODELS_FORBIDDEN = (
    "implicit_bias.core",
    "implicit_bias.chapters",
    "pandas",
    "matplotlib",
    "seaborn",
    "IPython",
)


def module_name(path: Path) -> str:
    parts = path.relative_to(LIB).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def imports_of(source: str, module: str, is_package: bool = False) -> set[str]:
    """Every module an import statement names, anywhere in the source (function-level
    imports too), with relative imports resolved against `module`."""
    package = module if is_package else module.rpartition(".")[0]
    found = set()
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Import):
            found.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = package.split(".")
                base = base[: len(base) - node.level + 1]
                target = ".".join(base + ([node.module] if node.module else []))
            else:
                target = node.module or ""
            found.add(target)
            found.update(f"{target}.{alias.name}" for alias in node.names)
    return found


# core's wings, lowest first: a module imports only its own wing and those below it.
CORE_ORDER = ("engine", "verdicts", "site", "chapter", "tools")


def core_rank(name: str) -> int | None:
    """The place in CORE_ORDER of the core module (or name in it) `name`; None outside the
    wings (`implicit_bias.core` itself)."""
    parts = name.split(".")
    if parts[:2] != ["implicit_bias", "core"] or len(parts) < 3:
        return None
    return CORE_ORDER.index(parts[2]) if parts[2] in CORE_ORDER else None


def violations(module: str, imported: set[str]) -> list[str]:
    """The layering rules broken by `module` importing `imported`."""

    def names(prefix: str) -> list[str]:
        return sorted(i for i in imported if i == prefix or i.startswith(prefix + "."))

    problems = []
    if module.startswith("implicit_bias.models"):
        for prefix in MODELS_FORBIDDEN:
            problems += [f"{module} (a model module) imports {i}" for i in names(prefix)]
    elif module.startswith("implicit_bias.core"):
        problems += [
            f"{module} (core) imports the chapter {i}"
            for i in names("implicit_bias.chapters")
            if i != "implicit_bias.chapters"
        ]
        own = core_rank(module)
        problems += [
            f"{module} ({CORE_ORDER[own]}) imports {i}, from {CORE_ORDER[rank]} above it"
            for i in names("implicit_bias.core")
            if (rank := core_rank(i)) is not None and own is not None and rank > own
        ]
    elif module.startswith("implicit_bias.chapters."):
        own = ".".join(module.split(".")[:3])
        problems += [
            f"{module} imports another chapter, {i}"
            for i in names("implicit_bias.chapters")
            if i != "implicit_bias.chapters" and not (i == own or i.startswith(own + "."))
        ]
    return sorted(set(problems))


def library_modules() -> list[Path]:
    return sorted(PACKAGE.rglob("*.py"))


def test_the_library_is_layered():
    problems = []
    for path in library_modules():
        module = module_name(path)
        source = path.read_text()
        if module.startswith("implicit_bias.chapters._template"):  # its id before copying
            source = source.replace("__chapter__", "_template")
        problems += violations(module, imports_of(source, module, path.name == "__init__.py"))
    assert not problems, "\n".join(problems)


def core_import_graph() -> dict[str, set[str]]:
    """core's modules, each with the core modules it imports (function-level imports too)."""
    modules = {module_name(p): p for p in library_modules() if "core" in p.relative_to(LIB).parts}
    graph = {}
    for module, path in modules.items():
        imported = imports_of(path.read_text(), module, path.name == "__init__.py")
        # a name resolves to the longest module it starts with (`x.claims.PROFILES` -> x.claims)
        graph[module] = {
            max((m for m in modules if i == m or i.startswith(m + ".")), key=len)
            for i in imported
            if i.startswith("implicit_bias.core")
        } - {module, "implicit_bias.core"}
    return graph


def circles(graph: dict[str, set[str]]) -> list[list[str]]:
    """The import circles of `graph`: its strongly connected components of more than one
    module (Tarjan's algorithm)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    found = []

    def visit(node: str) -> None:
        index[node] = low[node] = len(index)
        stack.append(node)
        for other in graph.get(node, ()):
            if other not in index:
                visit(other)
                low[node] = min(low[node], low[other])
            elif other in stack:
                low[node] = min(low[node], index[other])
        if low[node] == index[node]:
            component = []
            while True:
                top = stack.pop()
                component.append(top)
                if top == node:
                    break
            if len(component) > 1:
                found.append(sorted(component))

    for node in sorted(graph):
        if node not in index:
            visit(node)
    return found


def test_core_has_no_import_circle():
    assert not circles(core_import_graph())


def test_the_circle_check_finds_a_circle():
    graph = core_import_graph()
    graph["implicit_bias.core.engine.paths"] |= {"implicit_bias.core.engine.sweep"}
    assert ["implicit_bias.core.engine.paths", "implicit_bias.core.engine.sweep"] in [
        [m for m in c if m.endswith((".paths", ".sweep"))] for c in circles(graph)
    ]


def test_core_holds_only_the_facade_and_the_four_wings():
    core = PACKAGE / "core"
    loose = sorted(
        p.name
        for p in core.iterdir()
        if p.suffix == ".py" and p.name not in ("__init__.py", "chapter.py")
    )
    assert not loose, f"modules outside the wings of core/: {loose}"
    wings = sorted(p.name for p in core.iterdir() if (p / "__init__.py").exists())
    assert wings == sorted(w for w in CORE_ORDER if w != "chapter")
    for wing in wings:
        assert ast.get_docstring(ast.parse((core / wing / "__init__.py").read_text()))


def test_the_layers_exist():
    assert (PACKAGE / "core").is_dir() and (PACKAGE / "models").is_dir()
    chapters = [
        p for p in (PACKAGE / "chapters").iterdir() if p.is_dir() and (p / "__init__.py").exists()
    ]
    assert len(chapters) >= 2


@pytest.mark.parametrize(
    "module,source,expected",
    [
        ("implicit_bias.models.demo", "import pandas as pd", "imports pandas"),
        (
            "implicit_bias.models.demo",
            "def f():\n    from ..core.engine.paths import project_root\n",
            "imports implicit_bias.core.engine.paths",
        ),
        ("implicit_bias.models.demo", "import matplotlib.pyplot as plt", "imports matplotlib"),
        (
            "implicit_bias.core.tools.runner",
            "from implicit_bias.chapters.gln_norm import tasks",
            "imports the chapter",
        ),
        (
            "implicit_bias.chapters.gln_norm.tasks",
            "from ..galu_expressivity import analysis",
            "imports another chapter",
        ),
        (
            "implicit_bias.core.engine.overrides",
            "from ..verdicts.claims import PROFILES",
            "from verdicts above it",
        ),
        (
            "implicit_bias.core.site.status_page",
            "def f():\n    from ..tools.runner import dashboard_rows\n",
            "from tools above it",
        ),
        ("implicit_bias.core.site.plotting", "from .. import chapter", "from chapter above it"),
    ],
)
def test_the_layering_check_catches_each_violation(module, source, expected):
    found = violations(module, imports_of(source, module))
    assert any(expected in problem for problem in found), found


@pytest.mark.parametrize(
    "module,source",
    [
        (
            "implicit_bias.models.demo",
            "import numpy as np\nfrom .convex import min_l1_interpolator",
        ),
        (
            "implicit_bias.chapters.gln_norm.tasks",
            "from . import analysis\n"
            "from implicit_bias.models import gln\n"
            "from implicit_bias.core.engine.tasks import task",
        ),
        ("implicit_bias.core.tools.runner", "from ..verdicts import claims"),
        ("implicit_bias.core.site.status_page", "from ..engine.paths import project_root"),
        ("implicit_bias.core.chapter", "from .site.plotting import save_figure"),
        ("implicit_bias.core.tools.runner", "from ..chapter import chapters"),
    ],
)
def test_allowed_imports_pass(module, source):
    assert violations(module, imports_of(source, module)) == []


def test_no_module_is_over_800_lines():
    long = {
        str(p.relative_to(LIB)): n
        for p in library_modules()
        if (n := len(p.read_text().splitlines())) > MAX_LINES
    }
    assert not long, f"modules over {MAX_LINES} lines: {long}"
