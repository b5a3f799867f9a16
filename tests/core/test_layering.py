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
            "def f():\n    from ..core.paths import project_root\n",
            "imports implicit_bias.core.paths",
        ),
        ("implicit_bias.models.demo", "import matplotlib.pyplot as plt", "imports matplotlib"),
        (
            "implicit_bias.core.runner",
            "from implicit_bias.chapters.gln_norm import tasks",
            "imports the chapter",
        ),
        (
            "implicit_bias.chapters.gln_norm.tasks",
            "from ..galu_expressivity import analysis",
            "imports another chapter",
        ),
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
            "from implicit_bias.models import gln\nfrom implicit_bias.core.tasks import task",
        ),
        ("implicit_bias.core.runner", "from . import claims"),
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
